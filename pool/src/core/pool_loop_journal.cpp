// PoolLoop's task journal (docs/journal.md): a pool whose dead_letter_store was opened with a
// journal writes every task it accepts there, and what becomes of it.
//
// - Acknowledged means written: submit() queues the task for the loop at once (it may start
//   before its commit) and queues its accept(); the journal's answer, on its writer thread,
//   settles the ticket's ack (Ticket::wait_accepted, SubmitOptions::on_accepted). A refused
//   accept cancels the task.
// - Reported means written: a task that ends completed or cancelled stays open until the
//   journal's finish() is committed (TaskJournalHooks::end), a dead-lettered one until its
//   letter and journaled end are (pool_loop_letters.cpp): only then do its ticket and on_done
//   learn the end. The answer is posted to the loop like a letter's receipt.
// - Starts, requeues (a start that never became an attempt) and attempt ends (with the
//   retry's wall-clock due time) are recorded without a callback: the loop never waits on
//   the disk. While the loop turns, these records and the ends gather in a batch that each
//   turn hands to the journal at once (PoolLoop::iterate): one lock and one clock read a turn.
// - Recovery: Pool::create queues this pool's unfinished tasks again (recover_journal()), and
//   dead-letters those of a type it no longer serves.
#include <chrono>
#include <future>

#include <spdlog/spdlog.h>

#include <sandpool/store/dead_letters.hpp>
#include <sandpool/store/task_journal.hpp>

#include "core/pool_loop.hpp"

namespace sandpool::core {

namespace {

// Sets the task's ack; returns true iff submit() has released it already (then the caller
// acts on it: on_accepted, a cancel).
bool settle_ack(TaskRecord& task, const Status& s) {
  bool released = false;
  {
    MutexLock lock(task.mu());
    task.set_ack_status(s);
    released = task.ack_released;
    task.ack.store(1, std::memory_order_release);
  }
  task.ack.notify_all();
  return released;
}

// Calls the task's on_accepted, once (the caller is whichever of the journal's callback and
// submit() came second), then drops it with what it holds.
void run_on_accepted(TaskRecord& task, const Status& s) {
  if (auto accepted = task.opts.take_on_accepted()) accepted(task.id, s);
}

// How many tasks ahead the accept's callback fetches what settling a task touches.
constexpr std::size_t kSettleAhead = 8;

void prefetch_ack(const TaskRecord& task) {
  __builtin_prefetch(&task.mu(), 1);
  __builtin_prefetch(&task.ack, 1);
  __builtin_prefetch(task.opts.on_accepted_address(), 0);
}

std::int64_t wall_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool PoolLoop::keeps_unfinished(DeadReason reason) const {
  return journal_ != nullptr && reason == DeadReason::kShutdown &&
         opts_.shutdown_unfinished == ShutdownUnfinished::kKeep;
}

void PoolLoop::install_journal() {
  if (journal_ == nullptr) return;
  TaskJournalHooks hooks;
  hooks.started = [this](const TaskRecord& task, const Attempt& start) {
    journal_record([&](TaskJournal::Records& r) { r.start(task.id, start); });
  };
  hooks.requeued = [this](const TaskRecord& task) {
    journal_record([&](TaskJournal::Records& r) { r.requeue(task.id); });
  };
  hooks.retrying = [this](const TaskRecord& task, const Attempt& ended, std::int64_t due_ms) {
    journal_record(
        [&](TaskJournal::Records& r) { r.attempt(task.id, ended, TaskState::kRetryWait, due_ms); });
  };
  hooks.end = [this](const TaskPtr& task) {
    if (!task->journaled) return false;  // refused or replayed: nothing to end there
    if (journal_batching_) {
      turn_ends_.push_back(task);  // its finish() goes with the turn's (hand_over_turn)
      return true;
    }
    // Final once end_task() decided it (state, reason, result, attempts): nothing writes it
    // again, so the journal reads it in place, kept alive with its task.
    std::shared_ptr<const TaskResult> account = shared_account(task);
    const std::thread::id hook_thread = std::this_thread::get_id();
    std::weak_ptr<PoolLoop> self = weak_from_this();
    JournalCommitted written = [self, task, hook_thread](const Status& s) {
      std::shared_ptr<PoolLoop> loop = self.lock();
      if (!s) {
        const auto& log = loop ? loop->log_ : spdlog::default_logger();
        log->error("[{}] the end of task {} is not journaled: {}",
                   loop ? loop->opts_.name : std::string("?"), task->id, s.to_string());
        report_unwritten(*task, "its end is not written (" + s.message() + ")");
      }
      if (!loop) return end_orphaned(*task, task->account().state);
      if (std::this_thread::get_id() == hook_thread && loop->in_end_hook_) {
        loop->end_inline_ = true;  // within finish(): the core ends the task itself
        return;
      }
      loop->end_written(task->id);
    };
    end_inline_ = false;
    in_end_hook_ = true;
    journal_record(
        [&](TaskJournal::Records& r) { r.finish(std::move(account), std::move(written)); });
    in_end_hook_ = false;
    return !end_inline_;
  };
  core_->set_journal(std::move(hooks));
}

void PoolLoop::journal_accept(const std::vector<TaskPtr>& tasks, std::shared_ptr<BatchAck> batch) {
  // The batch goes as views of the records' type and payload (immutable, kept alive by
  // `held`), not as a JournalTask each: batches that wait for the writer cost ~48 bytes a
  // task, where copies cost ~630 and left ~40 MB of freed pages behind a run of 1e6 tasks
  // (docs/performance.md, "Memory with the journal on: the transient peaks").
  auto held = std::make_shared<const std::vector<TaskPtr>>(tasks);
  JournalAcceptViews views;
  views.pool = opts_.name;
  views.tasks.reserve(tasks.size());
  for (const TaskPtr& task : tasks) {
    TaskOptions kept = task->opts.kept();  // here: the loop has not taken the task in yet
    if (views.options.empty() || !(kept == views.options.back())) {
      views.options.push_back(std::move(kept));
    }
    views.tasks.push_back({task->id, task->type(), task->payload(),
                           static_cast<std::uint32_t>(views.options.size() - 1)});
  }
  views.keep = held;
  std::weak_ptr<PoolLoop> self = weak_from_this();
  journal_->accept(std::move(views), [self, held, batch](const Status& s) {
    const std::vector<TaskPtr>& tasks = *held;
    std::shared_ptr<PoolLoop> loop;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      // A batch's tasks are cold in the cache by the time its commit lands: their lines are
      // fetched a few tasks ahead, so that the misses overlap instead of queueing one by one.
      if (i + kSettleAhead < tasks.size()) prefetch_ack(*tasks[i + kSettleAhead]);
      const TaskPtr& task = tasks[i];
      if (!settle_ack(*task, s)) continue;  // submit() has not returned: release_ack() acts
      run_on_accepted(*task, s);
      if (s) continue;
      if (!loop) loop = self.lock();
      if (loop) loop->cancel_refused(task, s);
    }
    if (batch) batch->settle(s);
  });
}

void PoolLoop::BatchAck::settle(const Status& s) {
  {
    MutexLock lock(mu);
    answer = s;
    if (!released) return;
  }
  if (callback) callback(s);
}

void PoolLoop::BatchAck::release() {
  Status s;
  {
    MutexLock lock(mu);
    released = true;
    if (!answer) return;
    s = *answer;
  }
  if (callback) callback(s);
}

void PoolLoop::release_ack(const TaskPtr& task) {
  Status s;
  if (task->ack.load(std::memory_order_acquire) != 0) {
    // Answered already: without a journal before the task was shared (admit_task), else by
    // the journal's callback, which saw it unreleased (settle_ack) and left it to us. Its
    // answer is written before ack is set and never after, and nothing reads ack_released
    // any more: the record's lock, a stripe the loop takes per completed task, is not taken.
    s = task->ack_status();
  } else {
    MutexLock lock(task->mu());
    task->ack_released = true;
    if (task->ack.load(std::memory_order_acquire) == 0) return;  // the journal's answer acts
    s = task->ack_status();
  }
  run_on_accepted(*task, s);
  if (!s) cancel_refused(task, s);
}

void PoolLoop::cancel_refused(const TaskPtr& task, const Status& why) {
  log_->warn("[{}] task {} is cancelled: the journal refused it ({})", opts_.name, task->id,
             why.to_string());
  mailbox_.post_or_run(
      [task](PoolCore& core, std::int64_t now) {
        // Its end is not written: the journal has no row of it, or (an accept answered at
        // journal.sync_timeout that committed after all) ends the row itself.
        task->journaled = false;
        if (task->decided) return;  // it ended before the refusal arrived: its end stands
        task->refused = true;       // its end reports the refusal (ack_status())
        core.cancel(task, now);
      },
      *core_);
}

void PoolLoop::hand_over_turn() {
  if (!turn_ends_.empty()) {
    // A turn's records are queued as one chunk, which the journal writes in one round; its
    // answers come in the order queued, so the last end's answer follows the others'. That
    // one callback ends the turn's tasks: a refused end is logged by the journal, and its
    // task ends all the same (as with a callback each).
    std::vector<TaskPtr> ends;
    ends.swap(turn_ends_);
    std::vector<std::uint64_t> ids;
    ids.reserve(ends.size());
    for (const TaskPtr& task : ends) {
      ids.push_back(task->id);
      if (&task == &ends.back()) break;
      // Final once end_task() decided it (state, reason, result, attempts): nothing writes it
      // again, so the journal reads it in place, kept alive with its task.
      journal_records_.finish(shared_account(task), {});
    }
    const TaskPtr& last = ends.back();
    std::shared_ptr<const TaskResult> account = shared_account(last);
    std::weak_ptr<PoolLoop> self = weak_from_this();
    journal_records_.finish(
        std::move(account), [self, ends = std::move(ends), ids = std::move(ids)](const Status& s) {
          std::shared_ptr<PoolLoop> loop = self.lock();
          if (!s) {
            const auto& log = loop ? loop->log_ : spdlog::default_logger();
            log->error("[{}] the end of task {} is not journaled: {}",
                       loop ? loop->opts_.name : std::string("?"), ids.back(), s.to_string());
            // Closed: the turn's chunk was never written, none of its ends. Else the last end
            // was refused on its own, and the others are committed.
            const std::string why = "its end is not written (" + s.message() + ")";
            if (s.code() == Code::kClosed) {
              for (const TaskPtr& task : ends) report_unwritten(*task, why);
            } else {
              report_unwritten(*ends.back(), why);
            }
          }
          if (!loop) {
            for (const TaskPtr& task : ends) end_orphaned(*task, task->account().state);
            return;
          }
          loop->ends_written(ids);
        });
  }
  journal_->hand_over(journal_records_);
}

void PoolLoop::ends_written(const std::vector<std::uint64_t>& ids) {
  {
    MutexLock lock(ends_mu_);
    const bool on_its_way = !ends_written_.empty();
    ends_written_.insert(ends_written_.end(), ids.begin(), ids.end());
    if (on_its_way) return;  // the message on its way takes these too
  }
  post_ends_written();
}

void PoolLoop::end_written(std::uint64_t task_id) {
  {
    MutexLock lock(ends_mu_);
    ends_written_.push_back(task_id);
    if (ends_written_.size() > 1) return;  // a message is on its way and takes this one too
  }
  post_ends_written();
}

void PoolLoop::post_ends_written() {
  mailbox_.post_or_run(
      [this](PoolCore& core, std::int64_t now) {
        std::vector<std::uint64_t> ids;
        {
          MutexLock lock(ends_mu_);
          ids.swap(ends_written_);
        }
        for (const std::uint64_t id : ids) core.on_end_written(id, now);
      },
      *core_);
}

namespace {
// How long a replay waits for its reopen's commit: a commit takes milliseconds; this only
// bounds a disk that hangs.
constexpr std::chrono::seconds kReplayCommitWait{30};
}  // namespace

Result<Ticket> PoolLoop::replay(const DeadLetter& letter, SubmitOptions options) {
  auto rec = admit_task(letter.task.type, letter.payload, std::move(options), letter.task.id);
  if (!rec) return rec.status();
  JournalTask j;
  j.task.id = letter.task.id;
  j.task.type = letter.task.type;
  j.pool = opts_.name;
  j.payload = letter.payload;
  j.options = (*rec)->opts.kept();
  // The writer answers after the waiter may have given up: the promise is shared.
  auto answer = std::make_shared<std::promise<Status>>();
  std::future<Status> reopened = answer->get_future();
  journal_->reopen(std::move(j), letter.letter_id,
                   [answer](const Status& s) { answer->set_value(s); });
  if (reopened.wait_for(kReplayCommitWait) != std::future_status::ready) {
    unadmit(*rec);
    return Status::error(
        Code::kTimeout, "storage: the replay of dead letter " + std::to_string(letter.letter_id) +
                            " is not committed after " + std::to_string(kReplayCommitWait.count()) +
                            " s; if it commits, task " + std::to_string(letter.task.id) +
                            " runs at the next start");
  }
  if (Status s = reopened.get(); !s) {
    unadmit(*rec);
    return s;
  }
  // Open in the journal from here on: its records and its end are journaled like a submit's.
  (*rec)->journaled = true;
  if (!post_admitted(*rec, false)) {
    return Status::error(Code::kClosed, "pool is closing; task " + std::to_string(letter.task.id) +
                                            " stays open in the journal for the next start");
  }
  return Ticket(*rec, weak_from_this());
}

Status PoolLoop::recover_journal() {
  if (journal_ == nullptr) return Status::ok();
  auto highest = journal_->highest_task_id();
  if (!highest) return highest.status();
  std::atomic<std::uint64_t>& ids = opts_.task_ids ? *opts_.task_ids : next_task_id_;
  std::uint64_t next = ids.load();
  while (next <= *highest && !ids.compare_exchange_weak(next, *highest + 1)) {
  }
  if (!opts_.recover_unfinished) return Status::ok();
  auto open = journal_->unfinished(opts_.name);
  if (!open) return open.status();

  std::vector<RecoveredTask> mine;
  std::size_t running = 0, waiting = 0, refused = 0;
  const std::int64_t wall_ms = wall_now_ms();
  for (JournalTask& j : *open) {
    SubmitOptions options = SubmitOptions::of(j.options);
    if (opts_.recovered_on_done) {
      options.on_done = opts_.recovered_on_done(j.task.id, j.options.idempotency_key);
    }
    // A type the pool serves is its interned one; one it no longer serves stays inline.
    const std::optional<TaskType> served = task_types_.find(j.task.type);
    auto task = TaskRecord::make(j.task.id, served ? *served : TaskType(j.task.type),
                                 std::move(j.payload), std::move(options));
    task->account().history = std::move(j.task.history);
    task->account().error = std::move(j.task.error);
    task->attempts_ended = static_cast<std::uint32_t>(task->account().history.size());
    task->set_ack_status(Status::ok());  // accepted by the run that journaled it
    task->ack_released = true;
    task->ack.store(1);
    task->journaled = true;
    task->tenant_counted = !task->opts.tenant().empty() || opts_.max_per_tenant != 0;
    RecoveredTask r{
        std::move(task), std::move(j.running), j.task.state == TaskState::kRetryWait, 0, {}};
    if (r.retry_wait) r.retry_in_ns = (j.retry_due_ms - wall_ms) * 1000000;
    // The pool's task types changed since it was accepted: a submit of it would be refused
    // now, and no worker is meant to run it.
    if (!served) {
      r.refused = unknown_type(j.task.type).message() +
                  "; it was accepted before the pool's task types changed";
    }
    running += r.running ? 1 : 0;
    waiting += r.retry_wait && r.refused.empty() ? 1 : 0;
    refused += r.refused.empty() ? 0 : 1;
    mine.push_back(std::move(r));
  }
  if (mine.empty()) return Status::ok();
  query<int>([&mine](PoolCore& core, std::int64_t now) {
    for (RecoveredTask& r : mine) core.recover(std::move(r), now);
    return 0;
  });
  log_->info(
      "[{}] recovered {} unfinished tasks from the journal ({} were running, {} wait to "
      "retry, {} dead-lettered: type no longer served)",
      opts_.name, mine.size(), running, waiting, refused);
  return Status::ok();
}

}  // namespace sandpool::core
