// TaskJournal's callers' side: queueing writes for the store's writer thread, flush, stats,
// and close (docs/journal.md).
#include <sandpool/store/task_journal.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <optional>

#include <spdlog/spdlog.h>

#include <sandpool/base/thread_name.hpp>

#include <sandpool/store/sqlite_db.hpp>
#include "retry/dead_letter_store_impl.hpp"
#include "retry/journal_state.hpp"
#include "retry/task_journal_impl.hpp"
#include "retry/task_journal_write.hpp"
#include "retry/wal_checkpointer.hpp"

namespace sandpool {

std::uint64_t kept_bytes(const TaskResult& t) {
  std::uint64_t n = t.result.size() + t.error.size();
  for (const Attempt& a : t.history) n += 48 + a.error.size() + a.backtrace.size();
  return n;
}

Result<std::unique_ptr<TaskJournalImpl>> TaskJournalImpl::open(DeadLetterStoreImpl& store,
                                                               TaskJournalOptions options) {
  if (options.max_batch == 0) options.max_batch = 1;
  auto db = DeadLetterStoreImpl::open_connection(store.path(), store.opts_);
  if (!db) return db.status();
  std::unique_ptr<TaskJournalImpl> journal(new TaskJournalImpl(
      store, options, std::make_unique<sqlite::SqliteDb>(std::move(db).value())));
  SP_RETURN_IF_ERROR(journal->load().with_context("task journal"));
  journal->evict_finished();  // the log may hold finished tasks retention had dropped
  auto own = DeadLetterStoreImpl::open_connection(store.path(), store.opts_);
  if (!own) return own.status();
  journal->checkpointer_ = sqlite::WalCheckpointer::start(store.writer_db_, std::move(own).value());
  if (journal->opts_.sync_timeout.count() > 0) {
    TaskJournalImpl* j = journal.get();
    j->watch_ = std::thread([j] { j->watch_syncs(); });
    name_thread(j->watch_.native_handle(), "sp-jwatch");
  }
  return journal;
}

TaskJournalImpl::TaskJournalImpl(DeadLetterStoreImpl& store, TaskJournalOptions options,
                                 std::unique_ptr<sqlite::SqliteDb> query_db)
    : store_(store),
      opts_(options),
      log_(store.log_),
      query_owner_(std::move(query_db)),
      state_(std::make_unique<JournalState>()),
      round_(std::make_unique<RoundResult>()),
      plan_(std::make_unique<RoundPlan>()),
      tx_(std::make_unique<Tx>()) {}

TaskJournalImpl::~TaskJournalImpl() { stop_watch(); }

TaskJournal::TaskJournal(std::unique_ptr<TaskJournalImpl> impl) : impl_(std::move(impl)) {}
TaskJournal::~TaskJournal() = default;

Status TaskJournal::dead_letter(DeadLetter letter, LetterWritten on_written) {
  return impl_->dead_letter(std::move(letter), std::move(on_written));
}
Status TaskJournal::flush(std::chrono::milliseconds timeout) { return impl_->flush(timeout); }
Result<std::vector<JournalTask>> TaskJournal::unfinished(const std::optional<std::string>& pool) {
  return impl_->unfinished(pool);
}
Result<std::vector<std::string>> TaskJournal::unfinished_pools() {
  return impl_->unfinished_pools();
}
Result<std::uint64_t> TaskJournal::highest_task_id() { return impl_->highest_task_id(); }
Result<JournalTask> TaskJournal::find(std::uint64_t task_id) { return impl_->find(task_id); }
Result<JournalTask> TaskJournal::find_by_key(const std::string& idempotency_key) {
  return impl_->find_by_key(idempotency_key);
}
TaskJournalStats TaskJournal::stats() const { return impl_->stats(); }

TaskJournal::Records::Records() = default;
TaskJournal::Records::~Records() = default;
TaskJournal::Records::Records(Records&&) noexcept = default;
TaskJournal::Records& TaskJournal::Records::operator=(Records&&) noexcept = default;

bool TaskJournal::Records::empty() const { return writes_.empty(); }

void TaskJournal::Records::start(std::uint64_t task_id, const Attempt& start) {
  Write& w = writes_.emplace_back();
  w.kind = Write::Kind::kStart;
  w.task_id = task_id;
  w.start_number = start.number;
  w.start_pid = start.worker_pid;
  w.started_ms = start.started_ms;
}

void TaskJournal::Records::requeue(std::uint64_t task_id) {
  Write& w = writes_.emplace_back();
  w.kind = Write::Kind::kRequeue;
  w.task_id = task_id;
}

void TaskJournal::Records::attempt(std::uint64_t task_id, const Attempt& ended, TaskState next,
                                   std::int64_t retry_due_ms) {
  Write& w = writes_.emplace_back();
  w.kind = Write::Kind::kAttempt;
  w.task_id = task_id;
  w.ended = std::make_unique<Attempt>(ended);
  w.next = next;
  w.retry_due_ms = retry_due_ms;
}

void TaskJournal::Records::finish(std::shared_ptr<const TaskResult> final_account,
                                  JournalCommitted on_committed) {
  Write& w = writes_.emplace_back();
  w.kind = Write::Kind::kFinish;
  w.task_id = final_account->id;
  w.final_account = std::move(final_account);
  w.on_committed = std::move(on_committed);
}

void TaskJournal::hand_over(Records& records) { impl_->queue_chunk(records.writes_, true); }

namespace {
// Storage kept for the pool loops' records, in writes: a round of the writer spans many turns
// of a loop, so its chunks come back together.
constexpr std::size_t kMaxSpareWrites = 8192;
}  // namespace

void TaskJournalImpl::queue_chunk(std::vector<Write>& writes, bool reuse) {
  if (writes.empty()) return;
  const std::int64_t now_ms = store_.now_ms();
  std::optional<std::chrono::steady_clock::time_point> since;  // read for a batch only
  for (Write& w : writes) {
    w.at_ms = now_ms;
    if (w.kind != Write::Kind::kAccept) continue;
    if (!since) since = std::chrono::steady_clock::now();
    w.accept->since = *since;
  }
  Answers refused;
  Status refusal;
  {
    MutexLock lk(store_.mu_);
    // An accept() is a chunk of its own; while the journal is failing it is refused at once.
    if (!store_.writer_done_ && failing_ && writes.front().kind == Write::Kind::kAccept) {
      ++stats_.batches_refused;
      refusal = refusal_locked();
      for (Write& w : writes) {
        if (w.on_committed) refused.push_back(std::move(w.on_committed));
      }
      writes.clear();
    } else if (!store_.writer_done_) {
      // The writer waits for the queue to fill or for a group's deadline: it needs waking
      // only when the queue was empty or becomes full.
      const bool was_empty = queue_head_ == queue_.size();
      for (Write& w : writes) {
        w.seq = next_seq_++;
        queued_tasks_ += w.task_count();
        // Whoever answers first takes it (the writer, a refusal, the sync watch).
        if (w.kind == Write::Kind::kAccept) {
          accept_answers_.emplace_back(w.seq, std::move(w.on_committed));
        }
      }
      queued_writes_ += writes.size();
      if (was_empty) {
        queue_.clear();
        queue_head_ = 0;
      }
      const std::size_t size = writes.size();
      queue_.push_back(std::move(writes));
      writes.clear();
      if (reuse && !spare_.empty()) {
        writes.swap(spare_.back());
        spare_.pop_back();
        spare_writes_ -= writes.capacity();
      } else if (reuse) {
        writes.reserve(size);  // the next turn is likely alike: grow it once
      }
      if (was_empty || group_full_locked()) store_.work_cv_.notify_one();
      return;
    }
  }
  if (!refused.empty() || !refusal.is_ok()) {
    for (JournalCommitted& cb : refused) cb(refusal);
    return;
  }
  // The store closed: nothing more is written.
  std::vector<Write> closed;
  closed.swap(writes);
  for (Write& w : closed) {
    if (w.on_committed) {
      w.on_committed(Status::error(Code::kClosed, "storage: the task journal is closed"));
    }
  }
}

void TaskJournal::accept(std::vector<JournalTask> tasks, JournalCommitted on_committed) {
  if (tasks.empty()) {
    if (on_committed) on_committed(Status::ok());
    return;
  }
  Records one;
  Write& w = one.writes_.emplace_back();
  w.kind = Write::Kind::kAccept;
  w.accept = std::make_unique<Write::Accept>();
  w.accept->tasks = std::move(tasks);
  w.on_committed = std::move(on_committed);
  impl_->queue_chunk(one.writes_, false);
}

void TaskJournal::accept(JournalAcceptViews tasks, JournalCommitted on_committed) {
  if (tasks.tasks.empty()) {
    if (on_committed) on_committed(Status::ok());
    return;
  }
  Records one;
  Write& w = one.writes_.emplace_back();
  w.kind = Write::Kind::kAccept;
  w.accept = std::make_unique<Write::Accept>();
  w.accept->views = std::move(tasks);
  w.on_committed = std::move(on_committed);
  impl_->queue_chunk(one.writes_, false);
}

void TaskJournal::Write::make_tasks() {
  if (!accept || accept->views.tasks.empty()) return;
  const JournalAcceptViews& v = accept->views;
  accept->tasks.reserve(accept->tasks.size() + v.tasks.size());
  for (const JournalAcceptViews::Task& t : v.tasks) {
    JournalTask& j = accept->tasks.emplace_back();  // in place: a JournalTask is over 500 bytes
    j.task.id = t.id;
    j.task.type = t.type;
    j.pool = v.pool;
    j.payload = t.payload;
    j.options = v.options.at(t.options);
  }
  accept->views = JournalAcceptViews{};
}

void TaskJournal::reopen(JournalTask task, std::uint64_t letter_id, JournalCommitted on_committed) {
  Records one;
  Write& w = one.writes_.emplace_back();
  w.kind = Write::Kind::kAccept;
  w.accept = std::make_unique<Write::Accept>();
  w.accept->tasks.push_back(std::move(task));
  w.accept->letter_id = letter_id;
  w.on_committed = std::move(on_committed);
  impl_->queue_chunk(one.writes_, false);
}

void TaskJournal::record_start(std::uint64_t task_id, const Attempt& start) {
  Records one;
  one.start(task_id, start);
  impl_->queue_chunk(one.writes_, false);
}

void TaskJournal::record_requeue(std::uint64_t task_id) {
  Records one;
  one.requeue(task_id);
  impl_->queue_chunk(one.writes_, false);
}

void TaskJournal::record_attempt(std::uint64_t task_id, const Attempt& ended, TaskState next,
                                 std::int64_t retry_due_ms) {
  Records one;
  one.attempt(task_id, ended, next, retry_due_ms);
  impl_->queue_chunk(one.writes_, false);
}

void TaskJournal::finish(TaskResult final_account, JournalCommitted on_committed) {
  Records one;
  one.finish(std::make_shared<const TaskResult>(std::move(final_account)), std::move(on_committed));
  impl_->queue_chunk(one.writes_, false);
}

Status TaskJournalImpl::dead_letter(DeadLetter letter, LetterWritten on_written) {
  return store_.enqueue_letter(std::move(letter), std::move(on_written), true);
}

Status TaskJournalImpl::flush(std::chrono::milliseconds timeout) {
  MutexLock lk(store_.mu_);
  const std::uint64_t target = next_seq_;
  const auto done = [&] {
    store_.mu_.assert_held();  // called below, under it
    const std::uint64_t oldest =
        taken_count_ > 0
            ? taken_seq_
            : (queue_head_ == queue_.size() ? next_seq_ : queue_[queue_head_].front().seq);
    return oldest >= target;
  };
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!done() && !store_.writer_done_ &&
         store_.done_cv_.wait_until(store_.mu_, until) == std::cv_status::no_timeout) {
  }
  if (done()) return Status::ok();
  if (store_.writer_done_) return Status::error(Code::kClosed, "task journal closed before flush");
  return Status::error(Code::kTimeout, "task journal: writes still pending after flush timeout (" +
                                           std::to_string(queued_writes_ + taken_count_) + ")");
}

TaskJournalStats TaskJournalImpl::stats() const {
  TaskJournalStats s;
  {
    MutexLock lk(store_.mu_);
    s = stats_;
    s.pending = queued_writes_ + taken_count_;
    s.pending_tasks = queued_tasks_ + taken_tasks_;
    s.writes_failing = failing_.has_value();
    if (failing_) {
      s.failing_ms =
          static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - failing_->since)
                                         .count());
    }
  }
  {
    MutexLock lk(state_mu_);
    s.finished_kept = state_->finished_count();
    s.finished_bytes = state_->finished_bytes();
    s.log_rounds = state_->rounds().size();
    s.log_bytes = state_->log_bytes();
    s.log_live_bytes = state_->live_bytes();
  }
  if (checkpointer_) {
    const sqlite::WalCheckpointStats c = checkpointer_->stats();
    s.wal_checkpoints = c.checkpoints;
    s.wal_checkpoint_us = c.total_us;
  }
  for (const std::string& f : {store_.path(), store_.path() + "-wal"}) {
    struct stat st {};
    if (::stat(f.c_str(), &st) == 0) s.file_bytes += static_cast<std::uint64_t>(st.st_size);
  }
  return s;
}

bool TaskJournalImpl::has_writes_locked() const { return queue_head_ < queue_.size(); }

std::chrono::steady_clock::time_point TaskJournalImpl::group_deadline_locked() const {
  if (queued_tasks_ == 0) return std::chrono::steady_clock::now();
  if (opts_.group_siblings > 0 && last_round_batches_ < opts_.group_siblings) {
    return std::chrono::steady_clock::now();  // nothing suggests others are on their way
  }
  for (std::size_t i = queue_head_; i < queue_.size(); ++i) {
    for (const Write& w : queue_[i]) {
      if (w.kind == Write::Kind::kAccept) return w.accept->since + opts_.group_commit;
    }
  }
  return std::chrono::steady_clock::now();
}

bool TaskJournalImpl::group_full_locked() const { return queued_tasks_ >= opts_.max_batch; }

namespace {

std::uint64_t tasks_in(const std::vector<TaskJournalImpl::Write>& chunk) {
  std::uint64_t n = 0;
  for (const TaskJournalImpl::Write& w : chunk) n += w.task_count();
  return n;
}

}  // namespace

void TaskJournalImpl::take_locked() {
  std::size_t end = queue_head_;
  std::uint64_t tasks = taken_tasks_;
  while (end < queue_.size()) {
    const std::uint64_t more = tasks_in(queue_[end]);
    if (more > 0 && tasks > 0 && tasks + more > opts_.max_batch) break;
    tasks += more;
    ++end;
  }
  for (std::size_t i = queue_head_; i < end; ++i) {
    queued_writes_ -= queue_[i].size();
    take_chunk(std::move(queue_[i]));
  }
  queued_tasks_ -= tasks - taken_tasks_;
  queue_head_ = end;
  if (queue_head_ == queue_.size()) {
    queue_.clear();
    queue_head_ = 0;
  } else if (queue_head_ >= 64 && queue_head_ * 2 >= queue_.size()) {
    drop_queue_head_locked();  // moves each chunk at most once more on average
  }
  taken_tasks_ = tasks;
  taken_count_ = taken_.size();
  const auto batches =
      static_cast<std::size_t>(std::count_if(taken_.begin(), taken_.end(), [](const Write* w) {
        return w->kind == Write::Kind::kAccept;
      }));
  if (batches > 0) last_round_batches_ = batches;  // a round of records alone says nothing
  if (!taken_.empty()) taken_seq_ = taken_.front()->seq;
}

void TaskJournalImpl::take_chunk(std::vector<Write>&& chunk) {
  std::vector<Write>& c = taken_chunks_.emplace_back(std::move(chunk));
  for (Write& w : c) taken_.push_back(&w);
}

void TaskJournalImpl::clear_taken_chunks() {
  if (!taken_.empty()) return;  // some wait for a retry
  for (std::vector<Write>& c : taken_chunks_) c.clear();
}

void TaskJournalImpl::recycle_taken_chunks_locked() {
  if (!taken_.empty()) return;
  for (std::vector<Write>& c : taken_chunks_) {
    if (c.capacity() == 0 || spare_writes_ + c.capacity() > kMaxSpareWrites) continue;
    c.clear();
    spare_writes_ += c.capacity();
    spare_.push_back(std::move(c));
  }
  taken_chunks_.clear();
}

void TaskJournalImpl::drop_queue_head_locked() {
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(queue_head_));
  queue_head_ = 0;
}

void TaskJournalImpl::untake_locked() {
  drop_queue_head_locked();
  if (!taken_.empty()) {
    std::vector<Write> left;
    left.reserve(taken_.size());
    for (Write* w : taken_) {
      queued_tasks_ += w->task_count();
      left.push_back(std::move(*w));
    }
    queued_writes_ += left.size();
    queue_.insert(queue_.begin(), std::move(left));
  }
  taken_.clear();
  taken_chunks_.clear();
  taken_count_ = 0;
  taken_tasks_ = 0;
}

void TaskJournalImpl::abandon(const std::string& why) {
  stop_watch();
  std::vector<Write> left;
  Answers accepts;
  {
    MutexLock lk(store_.mu_);
    for (auto& [seq, cb] : accept_answers_) {
      if (cb) accepts.push_back(std::move(cb));
    }
    accept_answers_.clear();
    drop_queue_head_locked();
    for (std::vector<Write>& chunk : queue_) {
      for (Write& w : chunk) left.push_back(std::move(w));
    }
    queue_.clear();
    queued_writes_ = 0;
    queued_tasks_ = 0;
  }
  std::size_t records = 0;
  for (JournalCommitted& cb : accepts) {
    cb(Status::error(Code::kClosed, "storage: task journal: " + why));
  }
  for (Write& w : left) {
    if (w.on_committed) {
      w.on_committed(Status::error(Code::kClosed, "storage: task journal: " + why));
    } else if (w.kind != Write::Kind::kAccept) {  // an accept's was answered above
      ++records;
    }
  }
  if (!left.empty()) {
    log_->warn("task journal {}: {} writes never committed ({} of them attempt records): {}",
               store_.path(), left.size(), records, why);
  }
  store_.done_cv_.notify_all();
}

}  // namespace sandpool
