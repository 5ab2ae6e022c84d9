// PoolCore, the direct hand-off: submit() run by a submitting thread that holds the loop's
// claim while the loop is idle (PoolLoop::try_hand_off; docs/architecture.md, "The loop's
// claim"). The core's contract is unchanged (one holder at a time); what changes is which
// thread holds it, so the hand-off is taken only where submit() stays inside the core and
// its WorkerControl: no user callback (on_done, on_event, a dispatch function), no end of a
// task, no spawn or scale step. Everything else falls back to the loop, which decides as
// before.
#include <algorithm>

#include "core/pool_core.hpp"

namespace sandpool::core {

bool PoolCore::hand_off(const TaskPtr& task, std::int64_t now) {
  // Whatever would make submit() end the task, hold it, queue it behind others or call out.
  if (failed_ || closing_ || batching_ || workers_.crash_loop()) return false;
  if (!queue_.empty() || backlogged_ != 0 || gates_.on()) return false;
  if (opts_.dispatch_function || autoscaler_.enabled()) return false;
  if (task->opts.delay() || task->opts.not_before()) return false;  // scheduled
  const std::size_t bytes = task->payload().size();
  if (bytes > opts_.max_payload) return false;  // dead-lettered at dispatch
  // Affinity sends a keyed task to its home, full or not: it may wait in a backlog.
  if (dispatcher_.strategy() == DispatchStrategy::kAffinity && !task->opts.key().empty()) {
    return false;
  }
  // A ready worker with room whose region takes the frame: dispatch_queue() then assigns the
  // task at once (the strategies but affinity choose among the workers with room).
  bool room = false;
  for (const auto& [id, w] : workers_) {
    if (!w.is<Ready>() || bytes > w.frame_cap) continue;
    std::uint64_t capacity = opts_.concurrency;
    if (opts_.recycle_max_tasks != 0) {
      capacity = std::min<std::uint64_t>(capacity, opts_.recycle_max_tasks > w.tasks_done
                                                       ? opts_.recycle_max_tasks - w.tasks_done
                                                       : 0);
    }
    if (w.ring.size() < capacity) {
      room = true;
      break;
    }
  }
  if (!room) return false;
  submit(task, now);
  return true;
}

WorkerId PoolCore::direct_read_worker(const TaskPtr& task) const {
  if (failed_ || closing_ || batching_ || workers_.crash_loop()) return 0;
  if (opts_.on_event || opts_.dispatch_function || autoscaler_.enabled()) return 0;
  if (task->decided) return 0;
  for (const auto& [id, w] : workers_) {
    const auto in_ring = [&](const InFlight& f) { return f.task == task && !f.ended; };
    if (std::none_of(w.ring.begin(), w.ring.end(), in_ring)) continue;
    if (!w.is<Ready>()) return 0;
    // Every result on that ring may be read, and end its task, on the waiter's thread: no
    // callback but an on_done its submitter allowed there (SubmitOptions::on_done_on_waiter).
    for (const InFlight& f : w.ring) {
      if (f.task->opts.on_progress() != nullptr) return 0;
      if (f.task->opts.on_done() != nullptr && !f.task->opts.done_on_waiter()) return 0;
    }
    if (opts_.recycle_max_tasks != 0 && w.tasks_done + w.ring.size() >= opts_.recycle_max_tasks) {
      return 0;
    }
    return id;
  }
  return 0;
}

}  // namespace sandpool::core
