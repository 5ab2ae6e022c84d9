#include "core/loop_mailbox.hpp"

#include "core/pool_core.hpp"

namespace sandpool::core {

LoopMailbox::LoopMailbox() : started_future_(started_.get_future()) {}

Status LoopMailbox::open() {
  auto bell = ipc::EventFd::create();
  if (!bell) return bell.status();
  bell_ = std::move(bell).value();
  return Status::ok();
}

bool LoopMailbox::post_task(TaskPtr task) {
  {
    // accepting_ is read under the lock stop_accepting() takes to clear it: a task is either
    // posted before whatever the closing side posts next (the loop takes both), or refused.
    MutexLock lock(mu_);
    if (!accepting_.load()) return false;
    tasks_.push_back(std::move(task));
    count_.fetch_add(1);
  }
  ring_bell();
  return true;
}

bool LoopMailbox::post_tasks(std::span<const TaskPtr> tasks) {
  if (tasks.empty()) return accepting_.load();
  {
    MutexLock lock(mu_);  // as post_task(): refused whole, or posted before what closes
    if (!accepting_.load()) return false;
    tasks_.insert(tasks_.end(), tasks.begin(), tasks.end());
    count_.fetch_add(tasks.size());
  }
  ring_bell();
  return true;
}

void LoopMailbox::post(LoopCommand cmd) {
  {
    MutexLock lock(mu_);
    cmds_.push_back(std::move(cmd));
    count_.fetch_add(1);
    cmds_posted_.fetch_add(1, std::memory_order_release);
  }
  ring_bell();
}

void LoopMailbox::post_or_run(LoopCommand cmd, PoolCore& core) {
  MutexLock lock(ended_mu_);
  if (ended_.load()) return cmd(core, ipc::monotonic_ns());
  post(std::move(cmd));
}

void LoopMailbox::ring_bell() {
  // Only the first poster to find the loop asleep pays the write: the exchange clears the
  // flag, so the others see an awake loop (it will find their mail).
  if (sleeping_.load() && sleeping_.exchange(false)) {
    bell_.signal();
    bell_rings_.fetch_add(1, std::memory_order_relaxed);
  }
}

void LoopMailbox::stop_accepting() {
  MutexLock lock(mu_);
  accepting_.store(false);
}

std::optional<PoolStats> LoopMailbox::published_stats() const {
  const std::uint64_t posted = cmds_posted_.load(std::memory_order_acquire);
  MutexLock lock(published_mu_);
  // Read-your-writes: a copy taken after every command posted so far (a scale, a
  // reconfigure) is good enough; submitted tasks may be up to a millisecond behind.
  if (published_cmds_ >= posted && !ended_.load()) return published_;
  return std::nullopt;
}

bool LoopMailbox::wait_idle_for(std::int64_t timeout_ms) {
  idle_waiters_.fetch_add(1);
  MutexLock lock(idle_mu_);
  if (!ended_.load()) {
    idle_ = false;  // possibly stale: the loop only tracks it while somebody waits
    lock.unlock();
    post([](PoolCore&, std::int64_t) {});  // make the loop re-evaluate idleness now
    lock.lock();
  }
  bool ok = true;
  if (timeout_ms < 0) {
    while (!idle_) idle_cv_.wait(idle_mu_);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!idle_) {
      if (idle_cv_.wait_until(idle_mu_, deadline) == std::cv_status::timeout) {
        ok = idle_;
        break;
      }
    }
  }
  idle_waiters_.fetch_sub(1);
  return ok;
}

bool LoopMailbox::take(std::vector<TaskPtr>* tasks, std::vector<LoopCommand>* cmds) {
  if (count_.load(std::memory_order_acquire) == 0) return false;
  MutexLock lock(mu_);
  tasks->swap(tasks_);
  cmds->swap(cmds_);
  count_.store(0, std::memory_order_release);
  return true;
}

bool LoopMailbox::announce_sleep() {
  // The loop's half of the hand-shake (the posters' half is ring_bell()): announce, then look
  // once more.
  sleeping_.store(true);
  return count_.load() == 0;
}

void LoopMailbox::set_idle(bool idle) {
  MutexLock lock(idle_mu_);
  if (idle == idle_) return;
  idle_ = idle;
  if (idle) idle_cv_.notify_all();
}

bool LoopMailbox::report_start(Status s) {
  if (start_reported_) return false;
  start_reported_ = true;
  started_.set_value(std::move(s));
  return true;
}

void LoopMailbox::end(PoolCore& core) {
  MutexLock lock(ended_mu_);
  ended_ = true;
  std::vector<LoopCommand> cmds;
  {
    MutexLock in(mu_);
    cmds.swap(cmds_);
  }
  for (auto& c : cmds) c(core, ipc::monotonic_ns());
  report_start(Status::error(Code::kClosed, "pool closed while starting"));
  MutexLock idle(idle_mu_);
  idle_ = true;
  idle_cv_.notify_all();
}

}  // namespace sandpool::core
