// LoopMailbox: everything the pool's loop thread shares with other threads. Other threads
// post tasks and commands (and queries, answered through a command); the loop takes them in
// one swap. The loop publishes PoolCore::stats() for monitors, tells idle waiters when the
// pool is idle, reports how its start went, and at its end answers what is still posted
// inline. The loop pays a wake-up syscall (the bell, an eventfd it polls) only when it
// announced a sleep.
//
// Thread-safety: the "any thread" members from any thread; the "loop thread" members from the
// one thread that runs the loop (or, before it runs and after end(), the owner), or from a
// submitting thread that holds the loop's claim (a direct hand-off publishing its stats;
// docs/architecture.md, "The loop's claim"). Lives as long as its PoolLoop.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/ipc/wake.hpp>
#include <sandpool/pool/pool.hpp>

#include "core/task_record.hpp"

namespace sandpool::core {

class PoolCore;
using LoopCommand = std::function<void(PoolCore&, std::int64_t now)>;

class LoopMailbox {
 public:
  LoopMailbox();
  LoopMailbox(const LoopMailbox&) = delete;
  LoopMailbox& operator=(const LoopMailbox&) = delete;

  // Before the loop runs: makes the bell. Fails when eventfd does.
  Status open();
  int bell_fd() const { return bell_.fd(); }

  // ---- any thread
  // Queues a task for the loop. Returns false, queueing nothing, once stop_accepting() ran.
  bool post_task(TaskPtr task) EXCLUDES(mu_);
  // Queues the tasks for the loop, in order, in one hand-over: one lock and at most one
  // wake-up for all of them (Pool::submit_batch). Returns false, queueing none, once
  // stop_accepting() ran.
  bool post_tasks(std::span<const TaskPtr> tasks) EXCLUDES(mu_);
  // Queues a command for the loop (run with the core and the loop's clock).
  void post(LoopCommand cmd) EXCLUDES(mu_);
  // Runs fn on the loop thread and returns its value; inline (serialised with the end) once
  // the loop has ended.
  template <typename R>
  R query(std::function<R(PoolCore&, std::int64_t now)> fn, PoolCore& core);
  // Posts cmd, or runs it inline (serialised with the end) once the loop has ended.
  void post_or_run(LoopCommand cmd, PoolCore& core);
  // After it returns, post_task() accepts nothing.
  void stop_accepting() EXCLUDES(mu_);
  bool accepting() const { return accepting_.load(); }
  bool ended() const { return ended_.load(); }
  // The stats the loop last published, iff they were taken after every command posted so far
  // and the loop has not ended; nullopt otherwise (ask the loop: query).
  std::optional<PoolStats> published_stats() const EXCLUDES(published_mu_);
  // Waits until the loop says the pool is idle (set_idle) or it ends, at most timeout_ms
  // (negative: forever). Returns false on the timeout.
  bool wait_idle_for(std::int64_t timeout_ms);
  // Wakes the loop iff it announced a sleep (a hand-off whose task the loop must look at
  // sooner than it planned).
  void wake() { ring_bell(); }
  // How often the bell was rung (wake-up syscalls paid by the posting side).
  std::uint64_t bell_rings() const { return bell_rings_.load(std::memory_order_relaxed); }
  // The owner's side of the start hand-shake: blocks until the loop reports its start.
  Status wait_started() { return started_future_.get(); }

  // ---- loop thread
  // Returns true iff anything is posted (the loop's check while busy or spinning).
  bool has_mail() const { return count_.load(std::memory_order_acquire) != 0; }
  // Swaps what was posted into *tasks and *cmds (both empty on entry; what they hold, the
  // mailbox uses next). Returns false, taking nothing, when nothing was posted.
  bool take(std::vector<TaskPtr>* tasks, std::vector<LoopCommand>* cmds) EXCLUDES(mu_);
  // Counts commands the loop ran (after take()), for published_stats().
  void commands_done(std::size_t n) { cmds_done_ += n; }
  // Announces that the loop is about to sleep; returns false when mail came meanwhile (then it
  // must not). Each announce is followed by end_sleep().
  bool announce_sleep();
  void end_sleep() { sleeping_.store(false); }
  void drain_bell() { bell_.drain(); }
  // Publishes stats() (a callable returning PoolStats) when `force` or when the last copy is
  // 1 ms old (now, the loop's clock).
  template <typename StatsFn>
  void publish(std::int64_t now, bool force, StatsFn&& stats);
  // Returns true iff somebody waits in wait_idle_for(): only then is idleness worth computing.
  bool idle_wanted() const { return idle_waiters_.load() > 0; }
  void set_idle(bool idle);
  // Reports how the start went; only the first report counts. Returns true iff this was it.
  bool report_start(Status s);
  bool start_reported() const { return start_reported_; }
  // The loop's last act: marks the mailbox ended, runs the commands still posted inline,
  // reports a start never reported as closed, and releases idle waiters.
  void end(PoolCore& core);

 private:
  void ring_bell();  // any thread: wakes the loop iff it announced a sleep

  Mutex mu_;  // guards tasks_, cmds_, and accepting_'s changes
  std::vector<TaskPtr> tasks_ GUARDED_BY(mu_);
  std::vector<LoopCommand> cmds_ GUARDED_BY(mu_);
  std::atomic<std::size_t> count_{0};
  std::atomic<bool> accepting_{true};
  std::atomic<bool> sleeping_{false};
  ipc::EventFd bell_;
  std::atomic<std::uint64_t> bell_rings_{0};

  // published_cmds_: how many posted commands had run when published_ was taken (cmds_done_,
  // the loop's count, at that time).
  mutable Mutex published_mu_;
  PoolStats published_ GUARDED_BY(published_mu_);
  std::uint64_t published_cmds_ GUARDED_BY(published_mu_) = 0;
  std::int64_t published_at_ns_ = 0;           // loop thread
  std::uint64_t cmds_done_ = 0;                // loop thread
  std::atomic<std::uint64_t> cmds_posted_{0};  // any thread (post)

  std::promise<Status> started_;
  std::future<Status> started_future_;
  bool start_reported_ = false;  // loop thread

  Mutex idle_mu_;
  CondVar idle_cv_;
  std::atomic<int> idle_waiters_{0};
  bool idle_ GUARDED_BY(idle_mu_) = false;

  Mutex ended_mu_;  // serialises inline queries once the loop has ended
  std::atomic<bool> ended_{false};
};

inline constexpr std::int64_t kStatsPublishNs = 1'000'000;  // published stats: at most 1 ms old

template <typename R>
R LoopMailbox::query(std::function<R(PoolCore&, std::int64_t)> fn, PoolCore& core) {
  auto done = std::make_shared<std::promise<R>>();
  auto fut = done->get_future();
  {
    // Held while posting: the loop's last act takes this lock and runs what is left posted,
    // so a query can never be stranded between the check and the post.
    MutexLock lock(ended_mu_);
    if (ended_.load()) return fn(core, ipc::monotonic_ns());
    post(
        [fn = std::move(fn), done](PoolCore& c, std::int64_t now) { done->set_value(fn(c, now)); });
  }
  return fut.get();
}

template <typename StatsFn>
void LoopMailbox::publish(std::int64_t now, bool force, StatsFn&& stats) {
  if (!force && now - published_at_ns_ < kStatsPublishNs) return;
  published_at_ns_ = now;
  PoolStats s = stats();
  MutexLock lock(published_mu_);
  published_ = std::move(s);
  published_cmds_ = cmds_done_;
}

}  // namespace sandpool::core
