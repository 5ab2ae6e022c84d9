#include "retry/dead_letter_rows.hpp"

#include <sqlite3.h>

#include <sandpool/task/enum_names.hpp>

namespace sandpool::dead_letter_rows {
namespace {

using sqlite::SqliteDb;
using sqlite::SqliteStmt;
using sqlite::StmtRef;

// ?1 left NULL: AUTOINCREMENT picks a letter id never used before.
constexpr const char* kInsertLetter =
    "INSERT INTO dead_letters (letter_id, task_id, pool, type, reason, error, payload,"
    " timeout_ms, retries, priority, affinity_key, dead_lettered_ms, tenant)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)";
constexpr const char* kInsertAttempt =
    "INSERT INTO attempts (letter_id, seq, number, outcome, error, worker_pid, started_ms,"
    " ended_ms, backtrace) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
// dead_letters_by_task narrows it to the task's few letters.
constexpr const char* kExists =
    "SELECT 1 FROM dead_letters WHERE task_id = ?1 AND pool = ?2 AND type = ?3"
    " AND dead_lettered_ms = ?4 LIMIT 1";

}  // namespace

Result<std::uint64_t> insert(SqliteDb& db, const DeadLetter& l, LetterId id) {
  auto stmt = db.prepare(kInsertLetter, "insert dead letter");
  if (!stmt) return stmt.status();
  {
    StmtRef s(*stmt);
    if (id == LetterId::kKeep) s->bind(1, static_cast<std::int64_t>(l.letter_id));
    s->bind(2, static_cast<std::int64_t>(l.task.id));
    s->bind_text(3, l.pool);
    s->bind_text(4, l.task.type);
    s->bind_text(5, to_string(l.task.reason));
    s->bind_text(6, l.task.error);
    s->bind_blob(7, l.payload);
    if (l.options.timeout) s->bind(8, l.options.timeout->count());
    if (l.options.retries) s->bind(9, *l.options.retries);
    s->bind(10, l.options.priority);
    s->bind_text(11, l.options.key);
    s->bind(12, l.dead_lettered_ms);
    s->bind_text(13, l.options.tenant);
    SP_RETURN_IF_ERROR(db.step_done(**stmt, "insert dead letter"));
  }
  const std::int64_t letter_id = db.last_insert_rowid();
  auto att = db.prepare(kInsertAttempt, "insert attempt");
  if (!att) return att.status();
  for (std::size_t seq = 0; seq < l.task.history.size(); ++seq) {
    const Attempt& a = l.task.history[seq];
    StmtRef s(*att);
    s->bind(1, letter_id);
    s->bind(2, static_cast<std::int64_t>(seq));
    s->bind(3, a.number);
    s->bind_text(4, to_string(a.outcome));
    s->bind_text(5, a.error);
    s->bind(6, a.worker_pid);
    s->bind(7, a.started_ms);
    s->bind(8, a.ended_ms);
    s->bind_text(9, a.backtrace);
    SP_RETURN_IF_ERROR(db.step_done(**att, "insert attempt"));
  }
  return static_cast<std::uint64_t>(letter_id);
}

Result<bool> exists(SqliteDb& db, const DeadLetter& l) {
  auto stmt = db.prepare(kExists, "find dead letter");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, static_cast<std::int64_t>(l.task.id));
  s->bind_text(2, l.pool);
  s->bind_text(3, l.task.type);
  s->bind(4, l.dead_lettered_ms);
  const int rc = s->step();
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db.error(rc, "find dead letter");
}

Status read_attempts(SqliteDb& db, SqliteStmt& stmt, const std::string& owner, std::string_view op,
                     std::vector<Attempt>* history) {
  int rc;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    Attempt a;
    a.number = static_cast<std::uint32_t>(stmt.int64(0));
    const std::string outcome = stmt.text(1);
    const auto o = parse_enum(outcome, Outcome::kCancelled);
    if (!o) return Status::error(Code::kInternal, owner + ": unknown outcome '" + outcome + "'");
    a.outcome = *o;
    a.error = stmt.text(2);
    a.worker_pid = static_cast<std::int32_t>(stmt.int64(3));
    a.started_ms = stmt.int64(4);
    a.ended_ms = stmt.int64(5);
    a.backtrace = stmt.text(6);
    history->push_back(std::move(a));
  }
  return rc == SQLITE_DONE ? Status::ok() : db.error(rc, op);
}

}  // namespace sandpool::dead_letter_rows
