// DeadLetterStore::claim and restore: a replay takes its letter out of the store in one
// transaction before it submits the task, so of two replays of one letter exactly one gets
// it; a replay whose submit is refused puts the letter back as it was.
#include <sandpool/dead_letters.hpp>

#include <sqlite3.h>

#include "retry/sqlite_db.hpp"

namespace sandpool {
namespace {

using sqlite::SqliteDb;
using sqlite::SqliteStmt;
using sqlite::StmtRef;

constexpr const char* kClaimGet =
    "SELECT letter_id, task_id, pool, type, reason, error, payload, timeout_ms, retries,"
    " priority, affinity_key, dead_lettered_ms FROM dead_letters WHERE letter_id = ?1";
constexpr const char* kClaimDelete = "DELETE FROM dead_letters WHERE letter_id = ?1";
// The letter under its own letter_id (AUTOINCREMENT never hands that id out again).
constexpr const char* kRestoreLetter =
    "INSERT INTO dead_letters (letter_id, task_id, pool, type, reason, error, payload,"
    " timeout_ms, retries, priority, affinity_key, dead_lettered_ms)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";
constexpr const char* kRestoreAttempt =
    "INSERT INTO attempts (letter_id, seq, number, outcome, error, worker_pid, started_ms,"
    " ended_ms, backtrace) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

Status step_done(SqliteDb& db, SqliteStmt& s, std::string_view op) {
  const int rc = s.step();
  return rc == SQLITE_DONE ? Status::ok() : db.error(rc, op);
}

// Runs `body` inside BEGIN IMMEDIATE .. COMMIT on `db`, rolling back when it fails.
template <typename Body>
auto in_transaction(SqliteDb& db, std::string_view op, Body body) -> decltype(body()) {
  SP_RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE", std::string(op) + ": begin"));
  auto out = body();
  Status s = out.status();
  if (s.is_ok()) s = db.exec("COMMIT", std::string(op) + ": commit");
  if (!s.is_ok()) {
    (void)db.exec("ROLLBACK", std::string(op) + ": rollback");
    return s;
  }
  return out;
}

}  // namespace

Result<DeadLetter> DeadLetterStore::claim(std::uint64_t letter_id) {
  std::lock_guard lk(query_mu_);
  // BEGIN IMMEDIATE takes the database's write lock before the read: another claim (this
  // process or another) waits for it, then finds the letter gone.
  return in_transaction(query_db_, "claim dead letter", [&]() -> Result<DeadLetter> {
    auto get = query_db_.prepare(kClaimGet, "claim dead letter");
    if (!get) return get.status();
    Result<DeadLetter> letter = [&]() -> Result<DeadLetter> {
      StmtRef s(*get);
      s->bind(1, static_cast<std::int64_t>(letter_id));
      const int rc = s->step();
      if (rc == SQLITE_DONE) {
        return Status::error(Code::kNotFound, "no dead letter " + std::to_string(letter_id) +
                                                  " (purged, or replayed already)");
      }
      if (rc != SQLITE_ROW) return query_db_.error(rc, "claim dead letter");
      return read_letter(**get);
    }();
    if (!letter) return letter.status();
    auto del = query_db_.prepare(kClaimDelete, "claim dead letter: delete");
    if (!del) return del.status();
    StmtRef d(*del);
    d->bind(1, static_cast<std::int64_t>(letter_id));
    SP_RETURN_IF_ERROR(step_done(query_db_, **del, "claim dead letter: delete"));
    return letter;
  });
}

Status DeadLetterStore::restore(const DeadLetter& l) {
  std::lock_guard lk(query_mu_);
  auto done = in_transaction(query_db_, "restore dead letter", [&]() -> Result<bool> {
    auto ins = query_db_.prepare(kRestoreLetter, "restore dead letter");
    if (!ins) return ins.status();
    {
      StmtRef s(*ins);
      s->bind(1, static_cast<std::int64_t>(l.letter_id));
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
      SP_RETURN_IF_ERROR(step_done(query_db_, **ins, "restore dead letter"));
    }
    auto att = query_db_.prepare(kRestoreAttempt, "restore attempt");
    if (!att) return att.status();
    for (std::size_t seq = 0; seq < l.task.history.size(); ++seq) {
      const Attempt& a = l.task.history[seq];
      StmtRef s(*att);
      s->bind(1, static_cast<std::int64_t>(l.letter_id));
      s->bind(2, static_cast<std::int64_t>(seq));
      s->bind(3, a.number);
      s->bind_text(4, to_string(a.outcome));
      s->bind_text(5, a.error);
      s->bind(6, a.worker_pid);
      s->bind(7, a.started_ms);
      s->bind(8, a.ended_ms);
      s->bind_text(9, a.backtrace);
      SP_RETURN_IF_ERROR(step_done(query_db_, **att, "restore attempt"));
    }
    return true;
  });
  return done.status();
}

}  // namespace sandpool
