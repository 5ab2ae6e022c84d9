// PoolLoop's dead letters: a task that ends dead-lettered stays open until the store says
// what became of its letter (docs/dead-letters.md, "When a write fails"). Its submitter learns
// the end only then, so a dead-lettered task is never reported before its letter is durable
// (committed, or appended to a spill file).
//
// Threads: the sink runs on the loop thread; the store's receipt arrives on the store's
// writer thread (or inline, within enqueue(), when the store has closed). A receipt is
// posted to the loop; once the loop has ended it is applied inline (LoopMailbox::post_or_run),
// like a late query; once the PoolLoop is gone it ends the task record itself.
#include <spdlog/spdlog.h>

#include <sandpool/store/dead_letters.hpp>
#include <sandpool/store/task_journal.hpp>

#include "core/pool_loop.hpp"

namespace sandpool::core {

void end_orphaned(TaskRecord& task, TaskState state) {
  {
    MutexLock lock(task.mu());
    task.account().dead_letter_pending = false;
  }
  task.state.store(state, std::memory_order_release);
  task.done.store(1, std::memory_order_release);
  task.done.notify_all();
  if (auto* done = task.opts.on_done()) (*done)(task.account());
}

void report_unwritten(TaskRecord& task, const std::string& why) {
  MutexLock lock(task.mu());
  const std::string reached(to_string(task.account().state));
  task.account().state = TaskState::kCancelled;
  task.account().reason = DeadReason::kNone;
  task.account().cancel_reason = CancelReason::kShutdown;
  task.account().dead_letter_pending = false;
  task.account().error = "not " + reached + ": " + why +
                         "; the journal keeps the task open and the next start runs it again";
}

void PoolLoop::install_dead_letter_sink() {
  if (!opts_.dead_letter_store) return;
  core_->set_dead_letter_sink([this](const TaskPtr& task) {
    DeadLetter letter;
    {
      MutexLock lock(task->mu());
      letter.task = task->account();  // final: state dead_lettered, reason, attempts
    }
    letter.task.dead_letter_pending = false;  // as stored: the letter is the record
    letter.pool = opts_.name;
    letter.payload = task->payload();
    letter.options = DeadLetter::kept_options(task->opts.kept());
    receipt_inline_ = false;
    const std::thread::id loop_thread = std::this_thread::get_id();
    std::weak_ptr<PoolLoop> self = weak_from_this();
    // A journaled task's letter and its journaled end are one transaction.
    auto receipt = [self, task, loop_thread, log = log_,
                    pool = opts_.name](const LetterReceipt& receipt) {
      if (!receipt.lost.empty()) {
        log->error("[{}] dead letter for task {} is lost: {}", pool, task->id, receipt.lost);
      } else if (receipt.letter_id == 0) {
        log->warn("[{}] dead letter for task {} went to the spill file {}", pool, task->id,
                  receipt.spill_file);
      }
      // A journaled task's end went with its letter: without the letter in the store, the
      // journal still holds it open (`dlq import` of the spill file skips it).
      if (receipt.letter_id == 0 && task->journaled) {
        report_unwritten(*task, receipt.lost.empty()
                                    ? "its dead letter is only in the spill file " +
                                          receipt.spill_file + ", not in the store"
                                    : "its dead letter is lost (" + receipt.lost + ")");
      }
      std::shared_ptr<PoolLoop> loop = self.lock();
      if (!loop) return end_orphaned(*task, task->account().state);
      if (std::this_thread::get_id() == loop_thread) {
        loop->receipt_inline_ = true;  // within enqueue(): the sink ends the task itself
        return;
      }
      loop->letter_written(task->id);
    };
    Status s = task->journaled
                   ? journal_->dead_letter(std::move(letter), std::move(receipt))
                   : opts_.dead_letter_store->enqueue(std::move(letter), std::move(receipt));
    if (!s) {
      log_->error("[{}] dead letter for task {} not stored: {}", opts_.name, task->id,
                  s.to_string());
    }
    // Answered already (closed store: spilled or lost) or refused: the task ends now.
    return s.is_ok() && !receipt_inline_;
  });
}

void PoolLoop::letter_written(std::uint64_t task_id) {
  mailbox_.post_or_run(
      [task_id](PoolCore& core, std::int64_t now) { core.on_letter_written(task_id, now); },
      *core_);
}

}  // namespace sandpool::core
