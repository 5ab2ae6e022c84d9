// TaskJournal's reads and its loading at open. The reads here answer from the state in memory
// (journal_state.hpp); those of unfinished tasks read them back from the log
// (task_journal_readback.cpp). Loading turns the rows of the journal's first layout (schema version
// 2: a row per task, a row per attempt) into the log's first round, then replays the log.
#include <sqlite3.h>

#include <spdlog/spdlog.h>

#include <sandpool/store/task_journal.hpp>

#include <sandpool/store/sqlite_db.hpp>
#include <sandpool/task/enum_names.hpp>
#include "retry/dead_letter_rows.hpp"
#include "retry/journal_records.hpp"
#include "retry/journal_state.hpp"
#include "retry/task_journal_write.hpp"

namespace sandpool {
namespace {

using sqlite::SqliteDb;
using sqlite::SqliteStmt;
using sqlite::StmtRef;

#define SP_JOURNAL_COLUMNS                                                              \
  "id, pool, type, payload, timeout_ms, retries, priority, affinity_key, queue_ttl_ms," \
  " fail_fast, idempotency_key, state, retry_due_ms, running_attempt, running_pid,"     \
  " running_since_ms, reason, result, error, letter_id, submitted_ms, finished_ms FROM tasks"

// The first layout's tables, read once to carry them into the log.
constexpr const char* kLegacyTable =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tasks'";
constexpr const char* kLegacyTasks = "SELECT " SP_JOURNAL_COLUMNS " ORDER BY id";
constexpr const char* kTaskAttempts =
    "SELECT " SP_ATTEMPT_COLUMNS " FROM task_attempts WHERE task_id = ?1 ORDER BY number";
constexpr const char* kDropLegacy = "DROP TABLE task_attempts; DROP TABLE tasks;";
constexpr const char* kRounds = "SELECT seq, body FROM journal_rounds ORDER BY seq";
// Above every id accepted: journal_meta holds what compaction deleted; dead letters may
// hold ids of pools without a journal.
constexpr const char* kHighest =
    "SELECT max((SELECT value FROM journal_meta WHERE name = 'highest_task_id'),"
    " coalesce((SELECT max(task_id) FROM dead_letters), 0))";

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
    const auto r = parse_enum(reason, DeadReason::kRejected);
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
  auto stmt = db.prepare(kTaskAttempts, "journal: read attempts");
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

Result<bool> has_legacy_rows(SqliteDb& db) {
  auto stmt = db.prepare(kLegacyTable, "journal: first layout");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  const int rc = s->step();
  if (rc != SQLITE_ROW) return db.error(rc, "journal: first layout");
  return s->int64(0) > 0;
}

Status insert_round(SqliteDb& db, std::uint64_t seq, const std::string& body) {
  auto stmt = db.prepare(kInsertRound, "journal: carry first layout");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, static_cast<std::int64_t>(seq));
  s->bind_blob(2, body);
  const int rc = s->step();
  return rc == SQLITE_DONE ? Status::ok() : db.error(rc, "journal: carry first layout");
}

// Moves the first layout's rows into the log (round 1 on), in one transaction with dropping
// its tables, so that a crash leaves either layout whole. Returns how many tasks it moved.
Result<std::size_t> carry_legacy(SqliteDb& db) {
  SP_RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE", "journal: carry first layout"));
  std::size_t moved = 0;
  auto run = [&]() -> Status {
    auto legacy = has_legacy_rows(db);
    if (!legacy) return legacy.status();
    if (!*legacy) return Status::ok();
    auto tasks = read_tasks(db, kLegacyTasks, [](SqliteStmt&) {});
    if (!tasks) return tasks.status();
    std::string body;
    journal_log::BodyWriter writer;
    writer.reset(&body);
    std::uint64_t seq = 1;
    for (const JournalTask& t : *tasks) {
      writer.task(t);
      if (body.size() >= (std::size_t{32} << 20)) {
        SP_RETURN_IF_ERROR(insert_round(db, seq++, body));
        writer.reset(&body);
      }
    }
    if (writer.has_records()) SP_RETURN_IF_ERROR(insert_round(db, seq, body));
    moved = tasks->size();
    return db.exec(kDropLegacy, "journal: drop first layout");
  };
  Status s = run();
  if (s) s = db.exec("COMMIT", "journal: carry first layout");
  if (!s) (void)db.exec("ROLLBACK", "journal: carry first layout");
  if (!s) return s;
  return moved;
}

}  // namespace

Status TaskJournalImpl::load() {
  MutexLock qlk(query_mu_);
  SqliteDb& db = *query_owner_;
  auto moved = carry_legacy(db);
  if (!moved) return moved.status();
  if (*moved > 0) {
    log_->info("task journal {}: {} tasks moved from the first layout into the round log",
               store_.path(), *moved);
  }
  MutexLock lk(state_mu_);
  JournalState& st = *state_;
  std::uint64_t last = 0;
  {
    auto stmt = db.prepare(kRounds, "journal: replay");
    if (!stmt) return stmt.status();
    StmtRef s(*stmt);
    int rc;
    while ((rc = s->step()) == SQLITE_ROW) {
      const auto seq = static_cast<std::uint64_t>(s->int64(0));
      const std::string body = s->blob(1);
      st.add_round(seq, body.size());
      const Status read =
          journal_log::decode(body, [&](journal_log::Record& r) { st.apply(seq, r); });
      if (!read) {
        return Status::error(read.code(), "round " + std::to_string(seq) + " of " + store_.path() +
                                              " is unreadable (" + read.message() +
                                              "); move the file away");
      }
      last = seq;
    }
    if (rc != SQLITE_DONE) return db.error(rc, "journal: replay");
  }
  st.replayed();
  auto stmt = db.prepare(kHighest, "journal: highest task id");
  if (!stmt) return stmt.status();
  StmtRef h(*stmt);
  if (const int rc = h->step(); rc != SQLITE_ROW) return db.error(rc, "journal: highest task id");
  st.raise_highest(static_cast<std::uint64_t>(h->int64(0)));
  tx_->next_seq = last + 1;
  tx_->first_seq = last + 1;
  return Status::ok();
}

Result<std::vector<std::string>> TaskJournalImpl::unfinished_pools() {
  MutexLock lk(state_mu_);
  return state_->unfinished_pools();
}

Result<std::uint64_t> TaskJournalImpl::highest_task_id() {
  std::uint64_t letters = 0;
  {
    MutexLock qlk(query_mu_);
    SqliteDb& db = *query_owner_;
    auto stmt = db.prepare(kHighest, "journal: highest task id");
    if (!stmt) return stmt.status();
    StmtRef s(*stmt);
    const int rc = s->step();
    if (rc != SQLITE_ROW) return db.error(rc, "journal: highest task id");
    letters = static_cast<std::uint64_t>(s->int64(0));
  }
  MutexLock lk(state_mu_);
  return std::max(letters, state_->highest());
}

}  // namespace sandpool
