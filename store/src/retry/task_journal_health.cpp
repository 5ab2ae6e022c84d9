// TaskJournal's health (docs/journal.md, "A failing disk"): the failing state that refuses
// accepts at once, the probe that ends it, and the sync watch that bounds how long any
// accept waits for its answer when a commit hangs.
#include <sqlite3.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include <sandpool/store/task_journal.hpp>

#include <sandpool/store/sqlite_db.hpp>
#include "retry/task_journal_write.hpp"

namespace sandpool {
namespace {

// The probe's write: one row rewritten in place, big enough that a disk with room for it has
// room for a submit or two. Its table is created by the probe itself (older releases ignore
// it).
constexpr const char* kProbe =
    "CREATE TABLE IF NOT EXISTS journal_probe (id INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL,"
    " pad BLOB NOT NULL); INSERT OR REPLACE INTO journal_probe (id, at_ms, pad) VALUES (1, "
    "CAST(strftime('%s','now') AS INTEGER) * 1000, zeroblob(65536))";

std::uint64_t ms_between(std::chrono::steady_clock::time_point a,
                         std::chrono::steady_clock::time_point b) {
  return static_cast<std::uint64_t>(std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count()));
}

void answer_all(std::vector<JournalCommitted>& answers, const Status& s,
                const std::shared_ptr<spdlog::logger>& log) {
  for (JournalCommitted& cb : answers) {
    try {
      cb(s);
    } catch (const std::exception& e) {
      log->error("task journal: a commit callback threw: {}", e.what());
    }
  }
}

}  // namespace

void TaskJournalImpl::writing_locked(bool writing) {
  if (writing) {
    writing_since_ = std::chrono::steady_clock::now();
  } else {
    writing_since_.reset();
    stuck_reported_ = false;
  }
}

Status TaskJournalImpl::refusal_locked() const {
  const Status& why = failing_->why;
  return Status::error(why.code(), why.message() +
                                       " (the journal is failing: submits are refused until a "
                                       "write succeeds again; it is retried every " +
                                       std::to_string(opts_.probe_interval.count()) + " ms)");
}

void TaskJournalImpl::turn_failing_locked(const Status& why, Answers* answers) {
  const bool fresh = !failing_;
  if (fresh) {
    failing_ = Failing{why, std::chrono::steady_clock::now()};
    last_probe_ = failing_->since;
    log_->error(
        "task journal {}: failing, submits are refused at once until a write succeeds again "
        "(tried every {} ms): {}",
        store_.path(), opts_.probe_interval.count(), why.to_string());
  } else {
    failing_->why = why;
  }
  stats_.last_error = why.to_string();
  // The accepts queued behind the failure would wait for a round that cannot take them: each
  // accept() is a chunk of its own, so whole chunks go.
  std::size_t kept = queue_head_;
  for (std::size_t i = queue_head_; i < queue_.size(); ++i) {
    std::vector<Write>& chunk = queue_[i];
    if (chunk.size() == 1 && chunk.front().kind == Write::Kind::kAccept) {
      queued_writes_ -= 1;
      queued_tasks_ -= chunk.front().task_count();
      ++stats_.batches_refused;
      if (JournalCommitted cb = take_answer_locked(chunk.front().seq)) {
        answers->push_back(std::move(cb));
      }
      continue;
    }
    if (kept != i) queue_[kept] = std::move(chunk);
    ++kept;
  }
  queue_.resize(kept);
  if (queue_head_ == queue_.size()) {
    queue_.clear();
    queue_head_ = 0;
  }
}

void TaskJournalImpl::recovered_locked() {
  if (!failing_) return;
  log_->warn("task journal {}: writes succeed again after {} ms failing; submits are taken",
             store_.path(), ms_between(failing_->since, std::chrono::steady_clock::now()));
  failing_.reset();
}

JournalCommitted TaskJournalImpl::take_answer_locked(std::uint64_t seq) {
  const auto it =
      std::lower_bound(accept_answers_.begin(), accept_answers_.end(), seq,
                       [](const auto& entry, std::uint64_t s) { return entry.first < s; });
  if (it == accept_answers_.end() || it->first != seq) return {};
  JournalCommitted cb = std::move(it->second);
  it->second = nullptr;
  while (!accept_answers_.empty() && !accept_answers_.front().second) accept_answers_.pop_front();
  return cb;
}

bool TaskJournalImpl::probe_due_locked(std::chrono::steady_clock::time_point now) const {
  return failing_ && taken_.empty() && now >= next_probe_locked();
}

std::chrono::steady_clock::time_point TaskJournalImpl::next_probe_locked() const {
  return last_probe_ + opts_.probe_interval;
}

void TaskJournalImpl::probe(sqlite::SqliteDb& db) {
  Status s = db.exec("BEGIN IMMEDIATE", "journal probe: begin");
  if (s) s = db.exec(kProbe, "journal probe: write");
  if (s) s = db.exec("COMMIT", "journal probe: commit");
  const int rc = s ? SQLITE_OK : db.errcode();
  if (!s) (void)db.exec("ROLLBACK", "journal probe: rollback");
  MutexLock lk(store_.mu_);
  ++stats_.probes;
  last_probe_ = std::chrono::steady_clock::now();
  if (s) {
    recovered_locked();
    return;
  }
  log_->debug("task journal {}: probe failed (sqlite code {}): {}", store_.path(), rc,
              s.to_string());
  if (failing_) failing_->why = Status::error(s.code(), "storage: " + s.message());
  stats_.last_error = s.to_string();
}

void TaskJournalImpl::watch_syncs() {
  const auto tick = std::clamp<std::chrono::milliseconds>(
      opts_.sync_timeout / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(250));
  MutexLock lk(store_.mu_);
  while (!watch_stop_) {
    const auto until = std::chrono::steady_clock::now() + tick;
    while (!watch_stop_ && watch_cv_.wait_until(store_.mu_, until) == std::cv_status::no_timeout) {
    }
    if (watch_stop_ || !writing_since_ || stuck_reported_) continue;
    const auto now = std::chrono::steady_clock::now();
    if (now - *writing_since_ < opts_.sync_timeout) continue;
    stuck_reported_ = true;
    const Status why =
        Status::error(Code::kTimeout, "storage: a journal commit has not returned after " +
                                          std::to_string(ms_between(*writing_since_, now)) +
                                          " ms (journal.sync_timeout " +
                                          std::to_string(opts_.sync_timeout.count()) + " ms)");
    Answers queued, taken;
    turn_failing_locked(why, &queued);
    // The accepts in the stuck transaction: told now, though they may still commit (kTimeout
    // says so: their tasks are cancelled, and that end is journaled after them).
    for (auto& [seq, cb] : accept_answers_) {
      if (cb) taken.push_back(std::move(cb));
    }
    accept_answers_.clear();
    stats_.batches_refused += taken.size();
    const Status refused = refusal_locked();
    lk.unlock();
    answer_all(queued, refused, log_);
    answer_all(taken, why, log_);
    lk.lock();
  }
}

void TaskJournalImpl::end_refused_late(const std::vector<std::uint64_t>& ids) {
  log_->warn(
      "task journal {}: {} tasks committed after their submit was answered at "
      "sync_timeout; they are journaled as cancelled",
      store_.path(), ids.size());
  Records ends;
  for (const std::uint64_t id : ids) {
    auto account = std::make_shared<TaskResult>();
    account->id = id;
    account->state = TaskState::kCancelled;
    account->error = "storage: refused: its commit took longer than journal.sync_timeout (" +
                     std::to_string(opts_.sync_timeout.count()) + " ms)";
    ends.finish(std::move(account), {});
  }
  store_.journal()->hand_over(ends);  // this journal's public side: Records are its to take
}

void TaskJournalImpl::stop_watch() {
  {
    MutexLock lk(store_.mu_);
    watch_stop_ = true;
  }
  watch_cv_.notify_all();
  if (watch_.joinable()) watch_.join();
}

}  // namespace sandpool
