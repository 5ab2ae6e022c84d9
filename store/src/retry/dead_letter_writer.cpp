// DeadLetterStore's writer thread: group commits, retries with backoff while the database
// cannot take letters, and finds the letters it refuses on their own (docs/dead-letters.md,
// "When a write fails").
#include <sqlite3.h>

#include <spdlog/spdlog.h>
#include <algorithm>

#include <sandpool/store/dead_letters.hpp>
#include <sandpool/store/task_journal.hpp>

#include <sandpool/store/sqlite_db.hpp>
#include "retry/dead_letter_rows.hpp"
#include "retry/dead_letter_store_impl.hpp"
#include "retry/task_journal_impl.hpp"
#include "retry/write_failure.hpp"

namespace sandpool {
namespace {

using sqlite::StmtRef;

constexpr const char* kDeleteOlder = "DELETE FROM dead_letters WHERE dead_lettered_ms < ?1";
constexpr const char* kDeleteBeyondCount =
    "DELETE FROM dead_letters WHERE letter_id IN (SELECT letter_id FROM dead_letters"
    " ORDER BY dead_lettered_ms DESC, letter_id DESC LIMIT -1 OFFSET ?1)";

std::int64_t ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

}  // namespace

WriteFailure classify_write_failure(int rc) {
  switch (rc & 0xff) {
    case SQLITE_TOOBIG:
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
      return WriteFailure::kLetter;
    case SQLITE_PERM:
    case SQLITE_ABORT:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_NOMEM:
    case SQLITE_READONLY:
    case SQLITE_INTERRUPT:
    case SQLITE_IOERR:
    case SQLITE_CORRUPT:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
    case SQLITE_NOLFS:
    case SQLITE_AUTH:
    case SQLITE_NOTADB:
      return WriteFailure::kCondition;
    default:
      return WriteFailure::kUnclear;
  }
}

// One transaction's outcome: the new letter ids when it committed, else the error and
// SQLite's result code for it.
struct DeadLetterStoreImpl::Transaction {
  Status status;
  int rc = SQLITE_OK;
  std::vector<std::uint64_t> ids;
  std::uint64_t evicted = 0;
  bool journal_failed = false;  // the journal's writes failed, before any letter was tried
};

// What one round of the writer did with its batch.
struct DeadLetterStoreImpl::WriteRound {
  std::vector<Delivery> deliveries;  // receipts for every letter committed or spilled
  std::uint64_t written = 0, transactions = 0, evicted = 0, errors = 0;
  Status last_error;  // of the round's last failed transaction
};

bool DeadLetterStoreImpl::has_work_locked() const {
  if (!pending_.empty()) return true;
  if (!journal_) return false;
  journal_->writer_lock_held();
  return journal_->has_writes_locked();
}

bool DeadLetterStoreImpl::wait_for_work() {
  if (!journal_) {
    while (!closing_ && pending_.empty()) work_cv_.wait(mu_);
    return !pending_.empty();  // else closing, and everything is written
  }
  journal_->writer_lock_held();
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (has_work_locked()) break;
    if (closing_) return false;
    if (journal_->probe_due_locked(now)) {
      journal_->writing_locked(true);
      mu_.unlock();
      journal_->probe(writer_db_);  // a failing journal's small write (docs/journal.md)
      mu_.lock();
      journal_->writing_locked(false);
      continue;
    }
    if (journal_->upkeep_due_locked(now)) {
      journal_->writing_locked(true);
      mu_.unlock();
      journal_->run_retention_chunk(writer_db_);  // one short transaction
      mu_.lock();
      journal_->writing_locked(false);
      continue;
    }
    auto until = now + journal_->opts_.retention_interval;
    if (journal_->failing_) until = std::min(until, journal_->next_probe_locked());
    while (!closing_ && !has_work_locked() &&
           work_cv_.wait_until(mu_, until) == std::cv_status::no_timeout) {
    }
  }
  // Group commit: journal writes wait up to group_commit for others to join them.
  const auto group_deadline = journal_->group_deadline_locked();
  while (!closing_ && !abort_ && !journal_->group_full_locked() &&
         work_cv_.wait_until(mu_, group_deadline) == std::cv_status::no_timeout) {
  }
  return true;
}

void DeadLetterStoreImpl::run_writer() {
  std::vector<PendingLetter> batch;  // taken from pending_, kept until committed or spilled
  std::uint32_t failures = 0;
  MutexLock lk(mu_);
  // Each journal_->*_locked call below first tells the checker that mu_ is held under the
  // journal's name for it too (journal_->store_ is this store).
  for (;;) {
    if (abort_) break;
    const bool journal_kept = journal_ && !journal_->taken_.empty();
    if (batch.empty() && !journal_kept && !wait_for_work()) break;
    // Group commit: whatever waits joins the batch, up to max_batch.
    while (batch.size() < opts_.max_batch && !pending_.empty()) {
      batch.push_back(std::move(pending_.front()));
      pending_.pop_front();
    }
    if (journal_) {
      journal_->writer_lock_held();
      journal_->take_locked();
      journal_->writing_locked(true);  // the sync watch times it
    }
    hold(batch);
    lk.unlock();
    WriteRound round = write_round(batch);
    lk.lock();
    if (journal_) {
      journal_->writer_lock_held();
      journal_->writing_locked(false);
    }
    hold(batch);
    account_round(round, batch.size());
    lk.unlock();
    deliver(round.deliveries);
    if (journal_) journal_->deliver();
    lk.lock();
    done_cv_.notify_all();
    if (batch.empty() && !(journal_ && !journal_->taken_.empty())) {
      failures = 0;
      continue;
    }
    ++failures;
    const auto shift = std::min<std::uint32_t>(failures - 1, 20);
    std::chrono::milliseconds delay =
        std::min(opts_.retry_max, opts_.retry_base * (std::int64_t{1} << shift));
    // A failing journal's kept records are its probe: retried at the probe's pace.
    if (journal_) {
      journal_->writer_lock_held();
      if (journal_->failing_) delay = std::min(delay, journal_->opts_.probe_interval);
    }
    const auto until = std::chrono::steady_clock::now() + delay;
    while (!abort_ && work_cv_.wait_until(mu_, until) == std::cv_status::no_timeout) {
    }
  }
  // Hand what is unwritten back to close(), oldest first.
  if (journal_) {
    journal_->writer_lock_held();
    journal_->untake_locked();
  }
  while (!batch.empty()) {
    pending_.push_front(std::move(batch.back()));
    batch.pop_back();
  }
  held_ = 0;
  writer_done_ = true;
  done_cv_.notify_all();
}

DeadLetterStoreImpl::Transaction DeadLetterStoreImpl::write_whole(
    const std::vector<PendingLetter>& batch) {
  const bool with_journal = journal_ && !journal_->taken_.empty();
  const auto began = std::chrono::steady_clock::now();
  Transaction whole = write_transaction(batch, 0, batch.size(), with_journal);
  if (with_journal) {
    if (whole.status) {
      journal_->round_committed(std::chrono::steady_clock::now() - began);
    } else {
      journal_->round_failed(writer_db_, whole.status, whole.rc);
    }
  }
  // The journal's writes failed before the letters were tried: now the letters alone.
  if (!whole.status && whole.journal_failed && !batch.empty()) {
    whole = write_transaction(batch, 0, batch.size());
  }
  return whole;
}

DeadLetterStoreImpl::WriteRound DeadLetterStoreImpl::write_round(
    std::vector<PendingLetter>& batch) {
  WriteRound round;
  std::vector<bool> done(batch.size(), false);
  auto committed = [&](Transaction& t, std::size_t begin) {
    ++round.transactions;
    round.evicted += t.evicted;
    for (std::size_t k = 0; k < t.ids.size(); ++k) {
      done[begin + k] = true;
      ++round.written;
      round.deliveries.push_back({std::move(batch[begin + k].on_written), {t.ids[k], "", ""}});
    }
  };
  Transaction whole = write_whole(batch);
  if (batch.empty()) return round;  // a journal-only round: the journal accounted for it
  if (whole.status) {
    committed(whole, 0);
    batch.clear();
    return round;
  }
  ++round.errors;
  round.last_error = whole.status;
  // Refused on their own, with why; suspects failed unclearly and are refused only when
  // another letter of the round commits (the database works, so the letter is at fault).
  std::vector<std::pair<std::size_t, Status>> refused, suspects;
  const WriteFailure kind = classify_write_failure(whole.rc);
  const bool locked = (whole.rc & 0xff) == SQLITE_BUSY || (whole.rc & 0xff) == SQLITE_LOCKED;
  if (batch.size() == 1 || locked) {
    // Alone it is the letter's fault or nobody's; locked, no letter would commit now.
    if (kind == WriteFailure::kLetter) refused.push_back({0, whole.status});
  } else {
    // One letter per transaction: commit what can be, and find the offenders. The first
    // failure that is the database's condition ends the round: the rest wait for a retry.
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Transaction one = write_transaction(batch, i, i + 1);
      if (one.status) {
        committed(one, i);
        continue;
      }
      ++round.errors;
      round.last_error = one.status;
      const WriteFailure kind = classify_write_failure(one.rc);
      if (kind == WriteFailure::kCondition) break;
      (kind == WriteFailure::kLetter ? refused : suspects).push_back({i, one.status});
    }
    if (round.written > 0) refused.insert(refused.end(), suspects.begin(), suspects.end());
  }
  if (!refused.empty()) spill_refused(batch, refused, done, round);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (done[i]) continue;
    if (kept != i) batch[kept] = std::move(batch[i]);  // never onto itself: that empties it
    ++kept;
  }
  batch.resize(kept);
  return round;
}

void DeadLetterStoreImpl::spill_refused(std::vector<PendingLetter>& batch,
                                        std::vector<std::pair<std::size_t, Status>>& refused,
                                        std::vector<bool>& done, WriteRound& round) {
  std::sort(refused.begin(), refused.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<PendingLetter> letters;
  for (const auto& [i, why] : refused) {
    log_->error("dead-letter store {}: the database refuses the letter of task {} of pool {}: {}",
                path_, batch[i].letter.task.id, batch[i].letter.pool, why.to_string());
    letters.push_back(std::move(batch[i]));
  }
  auto file = spill(letters, "refused by the database");
  for (std::size_t k = 0; k < refused.size(); ++k) {
    const std::size_t i = refused[k].first;
    if (file) {
      done[i] = true;
      round.deliveries.push_back({std::move(letters[k].on_written), {0, *file, ""}});
    } else {
      batch[i] = std::move(letters[k]);  // stays pending; the spill is tried again
    }
  }
  if (!file) {
    log_->error("dead-letter store {}: cannot spill {} refused letters, keeping them: {}", path_,
                refused.size(), file.status().to_string());
    round.last_error = file.status();
  }
}

DeadLetterStoreImpl::Transaction DeadLetterStoreImpl::write_transaction(
    const std::vector<PendingLetter>& batch, std::size_t begin, std::size_t end,
    bool with_journal) {
  Transaction t;
  t.status = writer_db_.exec("BEGIN IMMEDIATE", "dead-letter write: begin");
  int journal_rc = SQLITE_OK;
  if (t.status && with_journal) {
    t.status = journal_->write_taken(writer_db_, &journal_rc);
    t.journal_failed = !t.status;
  }
  for (std::size_t i = begin; i < end && t.status; ++i) {
    auto id = dead_letter_rows::insert(writer_db_, batch[i].letter);
    if (id && batch[i].journaled && journal_) {
      const Status ended = journal_->write_dead_lettered(writer_db_, batch[i].letter, *id);
      if (!ended) id = ended;
    }
    if (id) {
      t.ids.push_back(*id);
    } else {
      t.status = id.status();
    }
  }
  if (t.status && end > begin) t.status = apply_retention(&t.evicted);
  if (t.status && journal_) t.status = journal_->flush_body(writer_db_);
  if (t.status) t.status = writer_db_.exec("COMMIT", "dead-letter write: commit");
  if (journal_) journal_->transaction_ended(t.status.is_ok());
  if (!t.status) {
    t.rc = journal_rc != SQLITE_OK ? journal_rc : writer_db_.errcode();  // before the rollback
    (void)writer_db_.exec("ROLLBACK", "dead-letter write: rollback");
    t.ids.clear();
    t.evicted = 0;
  }
  return t;
}

Status DeadLetterStoreImpl::apply_retention(std::uint64_t* evicted) {
  if (opts_.max_age.count() > 0) {
    auto stmt = writer_db_.prepare(kDeleteOlder, "retention by age");
    if (!stmt) return stmt.status();
    StmtRef s(*stmt);
    s->bind(1, now_ms() - opts_.max_age.count());
    const int rc = s->step();
    if (rc != SQLITE_DONE) return writer_db_.error(rc, "retention by age");
    *evicted += static_cast<std::uint64_t>(writer_db_.changes());
  }
  if (opts_.max_count > 0) {
    auto stmt = writer_db_.prepare(kDeleteBeyondCount, "retention by count");
    if (!stmt) return stmt.status();
    StmtRef s(*stmt);
    s->bind(1, static_cast<std::int64_t>(opts_.max_count));
    const int rc = s->step();
    if (rc != SQLITE_DONE) return writer_db_.error(rc, "retention by count");
    *evicted += static_cast<std::uint64_t>(writer_db_.changes());
  }
  return Status::ok();
}

void DeadLetterStoreImpl::account_round(const WriteRound& round, std::size_t still_pending) {
  stats_.written += round.written;
  stats_.transactions += round.transactions;
  stats_.evicted += round.evicted;
  stats_.write_errors += round.errors;
  if (!round.last_error.is_ok()) stats_.last_write_error = round.last_error.to_string();
  if (still_pending > 0) {
    if (!stats_.writes_failing) {
      stats_.writes_failing = true;
      failing_since_ = std::chrono::steady_clock::now();
      failed_rounds_ = 0;
      log_->warn(
          "dead-letter store {}: writes failing; {} letters wait in memory and are retried "
          "(every {} ms at most) until they are written or poold stops: {}",
          path_, still_pending + pending_.size(), opts_.retry_max.count(), stats_.last_write_error);
    }
    ++failed_rounds_;
  } else if (stats_.writes_failing) {
    stats_.writes_failing = false;
    log_->info(
        "dead-letter store {}: writes recovered after {} failed attempts over {} ms; {} "
        "letters written in the last attempt",
        path_, failed_rounds_, ms_since(failing_since_), round.written);
  }
}

}  // namespace sandpool
