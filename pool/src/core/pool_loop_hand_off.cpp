// PoolLoop's idle phases and the direct hand-off (docs/architecture.md, "The loop's claim").
// The loop thread holds its claim while it works and lets go of it while it is idle: while it
// spins for work and while it is parked in epoll_wait. A submit that finds the claim free
// takes it and runs the core's hand_off() itself, so an idle worker gets the task without
// the loop waking: client -> worker instead of client -> loop -> worker.
//
// What the loop reads without the claim is atomics (the mailbox's count) and, while it spins,
// the result rings it snapshotted before letting go (spin_rings_): a hand-off writes a task
// ring and the core's books, never a result ring, and never reaps a worker (that is the
// loop's, under the claim), so those rings outlive the spin.
//
// The return half: a waiter that finds the loop parked reads its own task's worker's result
// ring under the claim and ends the task on its own thread (direct_wait). Only while the
// loop is parked, never while it spins (the spin reads those rings without the claim).
#include <sys/epoll.h>

#include <algorithm>
#include <climits>

#include <spdlog/spdlog.h>

#include "core/pool_core_internal.hpp"
#include "core/pool_loop.hpp"

namespace sandpool::core {

bool PoolLoop::spin_for_work(std::int64_t until_ns) {
  links_->result_rings(&spin_rings_);
  idle_look_ns_ = 0;  // it plans its sleep again, with what a hand-off changed, after the spin
  const std::int64_t start = ipc::monotonic_ns();
  bool park = false;  // a waiter wants to read its own result: the loop parks instead
  claim_.release();
  const bool found = ipc::spin_until(
      [&] {
        if (mailbox_.has_mail()) return true;
        if (direct_wanted_ns_.load(std::memory_order_relaxed) >= start) return park = true;
        for (ipc::RingConsumer* ring : spin_rings_) {
          if (ring->has_data()) return true;
        }
        return false;
      },
      until_ns);
  claim_.acquire();
  return found && !park;
}

void PoolLoop::wait_for_events(std::int64_t timeout_ms, std::int64_t now) {
  // Announce the sleep, then look once more (the posters' half of the hand-shake is in the
  // mailbox and the rings' publish()).
  const bool may_sleep = timeout_ms != 0 && mailbox_.announce_sleep() && links_->prepare_sleep();
  epoll_event events[64];
  Result<int> n = may_sleep ? park(events, timeout_ms, now) : poller_->wait(events, 64, 0);
  // After a sleep: the core may have seen a later clock meanwhile (a hand-off's).
  if (may_sleep) now = ipc::monotonic_ns();
  if (timeout_ms != 0) {
    mailbox_.end_sleep();
    links_->cancel_sleep();
  }
  if (!n) log_->error("[{}] {}", opts_.name, n.status().message());
  for (int i = 0; i < (n ? *n : 0); ++i) {
    const std::uint64_t tag = events[i].data.u64;
    if (tag == WorkerLinks::kLoopTag) {
      mailbox_.drain_bell();
    } else {
      links_->on_event(tag);
    }
  }
  links_->reap_exited(now);
}

Result<int> PoolLoop::park(epoll_event* events, std::int64_t timeout_ms, std::int64_t now) {
  // A hand-off may run while it sleeps, and sees by when the loop looks on its own.
  idle_look_ns_ = std::max<std::int64_t>(now, ipc::monotonic_ns()) + timeout_ms * detail::kMsNs;
  claim_.release();
  busy_.end();  // poold's watchdog: idle, however long the sleep
  Result<int> n = poller_->wait(events, 64, static_cast<int>(timeout_ms));
  busy_.begin(ipc::monotonic_ns());  // handling what woke it is work
  // Awake and about to want the claim: a waiter reading its own result hands it back.
  waking_.store(true, std::memory_order_relaxed);
  claim_.acquire();
  waking_.store(false, std::memory_order_relaxed);
  return n;
}

bool PoolLoop::loop_looks_in_time(const TaskRecord& task, std::int64_t now) const {
  if (idle_look_ns_ == 0) return true;  // spinning: it plans again once the spin ends
  // Parked: its timeout was planned without this task. It must look by the task's deadline
  // and, the task running, by the running poll, as if it had dispatched the task itself.
  const std::int64_t timeout_ms =
      task.opts.timeout() ? task.opts.timeout()->count() : opts_.timeout.count();
  return idle_look_ns_ <= now + std::min(kRunningPollMs, timeout_ms) * detail::kMsNs;
}

bool PoolLoop::try_hand_off(const TaskPtr& task) {
  // Cheap looks first, without the claim: mail posted before this task must reach the core
  // first (the claim's pass does not drain the mailbox), and a waiter on idleness wants the
  // loop's own answer.
  if (!hand_off_allowed_ || mailbox_.has_mail() || mailbox_.idle_wanted()) return false;
  if (!claim_.try_acquire()) return false;  // the loop works (or another hand-off runs): post
  bool taken = false;
  const std::int64_t now = ipc::monotonic_ns();
  // Again under the claim: the loop's passes and other hand-offs are excluded now. A pool
  // that stopped accepting refuses the task through post_task(); a loop that ended let go
  // of the claim only after it stopped accepting.
  if (mailbox_.accepting() && !mailbox_.ended() && !mailbox_.has_mail() &&
      loop_looks_in_time(*task, now)) {
    links_->begin_pass();
    taken = core_->hand_off(task, now);
  }
  if (taken) {
    links_->flush();  // publishes the frame; wakes the worker iff it sleeps
    hand_offs_.fetch_add(1, std::memory_order_relaxed);
    if (idle_look_ns_ != 0) {
      publish_stats(now, true);  // parked: the stats are current while it sleeps
    } else {
      handed_off_ = true;  // spinning: the loop publishes before it sleeps
    }
  }
  claim_.release();
  return taken;
}

// ---- the return half: a waiter reads its own result ------------------------------------

bool PoolLoop::direct_wait(const TaskPtr& task, std::int64_t until_ns) {
  if (!hand_off_allowed_ || mailbox_.has_mail() || mailbox_.idle_wanted()) return false;
  if (!claim_.try_acquire()) return false;  // the loop works, or another thread holds it
  bool ended = false;
  const WorkerId w = mailbox_.accepting() && !mailbox_.ended() && !mailbox_.has_mail()
                         ? core_->direct_read_worker(task)
                         : 0;
  if (w != 0 && idle_look_ns_ == 0) {
    // Spinning, the loop reads the result rings without the claim (spin_for_work): this
    // thread must not pop from them. It asks the loop to park; the next waiter reads.
    ask_to_park();
  } else if (w != 0) {
    ended = read_own_result(task, w, std::min(until_ns, ipc::monotonic_ns() + kDirectWaitNs));
  }
  claim_.release();
  if (ended) direct_ends_.fetch_add(1, std::memory_order_relaxed);
  return ended;
}

bool PoolLoop::read_own_result(const TaskPtr& task, WorkerId w, std::int64_t until_ns) {
  ipc::RingConsumer* ring = links_->result_ring(w);
  if (ring == nullptr) return false;
  ask_to_park();
  // The parked loop asked each worker to ring its doorbell for a result (prepare_sleep): this
  // one's is read here, so it need not wake the loop.
  ring->cancel_sleep();
  // Hand back at once when the loop has work: mail (a submit, a cancel, a close), a wait for
  // idleness, or the loop woken (a worker's exit, another ring, its deadline).
  const auto loop_wants = [this] {
    return mailbox_.has_mail() || mailbox_.idle_wanted() || waking_.load(std::memory_order_relaxed);
  };
  std::int64_t now = 0;
  bool read = false;
  while (ring != nullptr && task->done.load(std::memory_order_acquire) == 0) {
    if (!ipc::spin_until([&] { return ring->has_data() || loop_wants(); }, until_ns)) break;
    if (!ring->has_data()) break;  // the loop wants the claim; nothing here to read first
    // What is there is read first, in one pass (it may be the result that woke the loop: its
    // worker published before this thread cleared the ring's flag).
    now = ipc::monotonic_ns();
    links_->begin_pass();
    core_->begin_batch();
    read |= links_->poll_one(w, now);
    core_->end_batch(now);
    links_->flush();  // what the results dispatched (a queued task, a retry due now)
    if (loop_wants()) break;
    // The task still open on that worker, its ring still read: spin for the rest.
    ring = core_->direct_read_worker(task) == w ? links_->result_ring(w) : nullptr;
  }
  // A loop that woke takes the claim next and looks at everything (it cancels the sleep
  // flags, polls every ring). A loop still parked sleeps on every doorbell again; data that
  // came meanwhile wakes it, and so does a deadline the read brought before its own look (a
  // retry's backoff, a task dispatched from the queue: the running poll).
  const bool awake = waking_.load(std::memory_order_relaxed);
  if (!awake && !links_->prepare_sleep()) mailbox_.wake();
  if (read) {
    const std::int64_t look_by =
        core_->has_in_flight() ? now + kRunningPollMs * detail::kMsNs : INT64_MAX;
    // (The loop's sleep is whole milliseconds: a look within one of it is on time.)
    if (!awake && std::min(core_->next_deadline(), look_by) < idle_look_ns_ - detail::kMsNs) {
      mailbox_.wake();
    }
    publish_stats(now, true);  // parked: the stats are current while it sleeps
  }
  return task->done.load(std::memory_order_acquire) != 0;
}

}  // namespace sandpool::core
