// DeadLetterStoreImpl::claim and restore: a replay takes its letter out of the store in one
// transaction before it submits the task, so of two replays of one letter exactly one gets
// it; a replay whose submit is refused puts the letter back as it was.
#include <sandpool/store/dead_letters.hpp>

#include <sqlite3.h>

#include <sandpool/store/sqlite_db.hpp>
#include "retry/dead_letter_rows.hpp"
#include "retry/dead_letter_store_impl.hpp"

namespace sandpool {
namespace {

using sqlite::SqliteDb;
using sqlite::SqliteStmt;
using sqlite::StmtRef;

constexpr const char* kClaimGet =
    "SELECT letter_id, task_id, pool, type, reason, error, payload, timeout_ms, retries,"
    " priority, affinity_key, dead_lettered_ms, tenant FROM dead_letters WHERE letter_id = ?1";
constexpr const char* kClaimDelete = "DELETE FROM dead_letters WHERE letter_id = ?1";
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

Result<DeadLetter> DeadLetterStoreImpl::claim(std::uint64_t letter_id) {
  MutexLock lk(query_mu_);
  // BEGIN IMMEDIATE takes the database's write lock before the read: another claim (this
  // process or another) waits for it, then finds the letter gone.
  return in_transaction(query_db_, "claim dead letter", [&]() -> Result<DeadLetter> {
    query_mu_.assert_held();  // run by in_transaction, under it
    auto get = query_db_.prepare(kClaimGet, "claim dead letter");
    if (!get) return get.status();
    Result<DeadLetter> letter = [&]() -> Result<DeadLetter> {
      query_mu_.assert_held();
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
    SP_RETURN_IF_ERROR(query_db_.step_done(**del, "claim dead letter: delete"));
    return letter;
  });
}

Status DeadLetterStoreImpl::restore(const DeadLetter& l) {
  MutexLock lk(query_mu_);
  // Under its own letter_id: AUTOINCREMENT never handed that id to another letter.
  auto done = in_transaction(query_db_, "restore dead letter", [&]() -> Result<std::uint64_t> {
    query_mu_.assert_held();  // run by in_transaction, under it
    return dead_letter_rows::insert(query_db_, l, dead_letter_rows::LetterId::kKeep);
  });
  return done.status();
}

}  // namespace sandpool
