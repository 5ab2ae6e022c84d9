// TaskJournal's reads: recovery (every unfinished task), the highest id, and lookups by id or
// idempotency key. On the journal's own connection, beside the writer (WAL readers do not
// block it).
#include <sqlite3.h>

#include <sandpool/task_journal.hpp>

#include "retry/dead_letter_rows.hpp"
#include "retry/enum_names.hpp"
#include "retry/sqlite_db.hpp"

namespace sandpool {
namespace {

using sqlite::SqliteDb;
using sqlite::SqliteStmt;
using sqlite::StmtRef;

#define SP_JOURNAL_COLUMNS                                                              \
  "id, pool, type, payload, timeout_ms, retries, priority, affinity_key, queue_ttl_ms," \
  " fail_fast, idempotency_key, state, retry_due_ms, running_attempt, running_pid,"     \
  " running_since_ms, reason, result, error, letter_id, submitted_ms, finished_ms FROM tasks"

constexpr const char* kUnfinished =
    "SELECT " SP_JOURNAL_COLUMNS " WHERE finished_ms IS NULL ORDER BY id";
constexpr const char* kUnfinishedOf =
    "SELECT " SP_JOURNAL_COLUMNS " WHERE finished_ms IS NULL AND pool = ?1 ORDER BY id";
constexpr const char* kUnfinishedPools =
    "SELECT DISTINCT pool FROM tasks WHERE finished_ms IS NULL ORDER BY pool";
constexpr const char* kById = "SELECT " SP_JOURNAL_COLUMNS " WHERE id = ?1";
constexpr const char* kByKey = "SELECT " SP_JOURNAL_COLUMNS
                               " WHERE idempotency_key = ?1 ORDER BY submitted_ms DESC, id DESC"
                               " LIMIT 1";
constexpr const char* kAttempts =
    "SELECT " SP_ATTEMPT_COLUMNS " FROM task_attempts WHERE task_id = ?1 ORDER BY number";
// Above every id accepted (journal_meta), journaled or dead-lettered.
constexpr const char* kHighest =
    "SELECT max((SELECT value FROM journal_meta WHERE name = 'highest_task_id'),"
    " coalesce((SELECT max(id) FROM tasks), 0), coalesce((SELECT max(task_id) FROM dead_letters),"
    " 0))";

std::optional<std::chrono::milliseconds> optional_ms(const SqliteStmt& row, int column) {
  if (row.is_null(column)) return std::nullopt;
  return std::chrono::milliseconds(row.int64(column));
}

Status bad(const JournalTask& t, const std::string& what, const std::string& value) {
  return Status::error(Code::kInternal, "journaled task " + std::to_string(t.task.id) +
                                            ": unknown " + what + " '" + value + "'");
}

// Fills state, reasons and the running attempt from columns 11..16.
Status read_state(const SqliteStmt& row, JournalTask& t) {
  const std::string state = row.text(11);
  const auto st = parse_enum(state, TaskState::kCancelled);
  if (!st) return bad(t, "state", state);
  t.task.state = *st;
  if (!row.is_null(12)) t.retry_due_ms = row.int64(12);
  if (!row.is_null(13)) {
    Attempt a;
    a.number = static_cast<std::uint32_t>(row.int64(13));
    a.worker_pid = static_cast<std::int32_t>(row.int64(14));
    a.started_ms = row.int64(15);
    t.running = a;
  }
  const std::string reason = row.text(16);
  if (t.task.state == TaskState::kDeadLettered) {
    const auto r = parse_enum(reason, DeadReason::kPoolRemoved);
    if (!r) return bad(t, "reason", reason);
    t.task.reason = *r;
  } else if (t.task.state == TaskState::kCancelled) {
    const auto r = parse_enum(reason, CancelReason::kShutdown);
    if (!r) return bad(t, "cancel reason", reason);
    t.task.cancel_reason = *r;
  }
  return Status::ok();
}

Result<JournalTask> read_task(const SqliteStmt& row) {
  JournalTask t;
  t.task.id = static_cast<std::uint64_t>(row.int64(0));
  t.pool = row.text(1);
  t.task.type = row.text(2);
  t.payload = row.blob(3);
  t.options.timeout = optional_ms(row, 4);
  if (!row.is_null(5)) t.options.retries = static_cast<std::uint32_t>(row.int64(5));
  t.options.priority = static_cast<std::int32_t>(row.int64(6));
  t.options.key = row.text(7);
  t.options.queue_ttl = optional_ms(row, 8);
  t.options.fail_fast = row.int64(9) != 0;
  t.options.idempotency_key = row.text(10);
  SP_RETURN_IF_ERROR(read_state(row, t));
  t.task.result = row.blob(17);
  t.task.error = row.text(18);
  if (!row.is_null(19)) t.letter_id = static_cast<std::uint64_t>(row.int64(19));
  t.submitted_ms = row.int64(20);
  if (!row.is_null(21)) t.finished_ms = row.int64(21);
  return t;
}

Status read_attempts(SqliteDb& db, JournalTask& t) {
  auto stmt = db.prepare(kAttempts, "journal: read attempts");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, static_cast<std::int64_t>(t.task.id));
  return dead_letter_rows::read_attempts(db, **stmt, "journaled task " + std::to_string(t.task.id),
                                         "journal: read attempts", &t.task.history);
}

// Runs `sql` (bound by `bind`) and returns every task it yields, with their attempts.
template <typename Bind>
Result<std::vector<JournalTask>> read_tasks(SqliteDb& db, const char* sql, Bind bind) {
  std::vector<JournalTask> out;
  {
    auto stmt = db.prepare(sql, "journal: read tasks");
    if (!stmt) return stmt.status();
    StmtRef s(*stmt);
    bind(**stmt);
    int rc;
    while ((rc = s->step()) == SQLITE_ROW) {
      auto t = read_task(**stmt);
      if (!t) return t.status();
      out.push_back(std::move(t).value());
    }
    if (rc != SQLITE_DONE) return db.error(rc, "journal: read tasks");
  }
  for (JournalTask& t : out) SP_RETURN_IF_ERROR(read_attempts(db, t));
  return out;
}

}  // namespace

Result<std::vector<JournalTask>> TaskJournal::unfinished(const std::optional<std::string>& pool) {
  std::lock_guard lk(query_mu_);
  SqliteDb& db = *query_owner_;
  // One read transaction: the tasks and their attempts come from one snapshot.
  SP_RETURN_IF_ERROR(db.exec("BEGIN", "journal: recovery read"));
  auto out = pool ? read_tasks(db, kUnfinishedOf, [&](SqliteStmt& s) { s.bind_text(1, *pool); })
                  : read_tasks(db, kUnfinished, [](SqliteStmt&) {});
  (void)db.exec("COMMIT", "journal: recovery read");
  return out;
}

Result<std::vector<std::string>> TaskJournal::unfinished_pools() {
  std::lock_guard lk(query_mu_);
  SqliteDb& db = *query_owner_;
  auto stmt = db.prepare(kUnfinishedPools, "journal: unfinished pools");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  std::vector<std::string> pools;
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) pools.push_back(s->text(0));
  if (rc != SQLITE_DONE) return db.error(rc, "journal: unfinished pools");
  return pools;
}

Result<std::uint64_t> TaskJournal::highest_task_id() {
  std::lock_guard lk(query_mu_);
  SqliteDb& db = *query_owner_;
  auto stmt = db.prepare(kHighest, "journal: highest task id");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  const int rc = s->step();
  if (rc != SQLITE_ROW) return db.error(rc, "journal: highest task id");
  return static_cast<std::uint64_t>(s->int64(0));
}

Result<JournalTask> TaskJournal::find(std::uint64_t task_id) {
  std::lock_guard lk(query_mu_);
  auto found = read_tasks(*query_owner_, kById,
                          [&](SqliteStmt& s) { s.bind(1, static_cast<std::int64_t>(task_id)); });
  if (!found) return found.status();
  if (found->empty()) {
    return Status::error(Code::kNotFound, "task " + std::to_string(task_id) + " is not journaled");
  }
  return std::move(found->front());
}

Result<JournalTask> TaskJournal::find_by_key(const std::string& idempotency_key) {
  std::lock_guard lk(query_mu_);
  auto found =
      read_tasks(*query_owner_, kByKey, [&](SqliteStmt& s) { s.bind_text(1, idempotency_key); });
  if (!found) return found.status();
  if (found->empty()) {
    return Status::error(Code::kNotFound, "no journaled task has key '" + idempotency_key + "'");
  }
  return std::move(found->front());
}

}  // namespace sandpool
