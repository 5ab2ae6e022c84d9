#include <sandpool/service/wait_deadlines.hpp>

#include <vector>

#include <sandpool/base/thread_name.hpp>

namespace sandpool::poold {

WaitDeadlines::WaitDeadlines(Expire expire)
    : expire_(std::move(expire)), thread_([this] { run(); }) {
  name_thread(thread_.native_handle(), "sp-waits");
}

WaitDeadlines::~WaitDeadlines() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void WaitDeadlines::add(Clock::time_point at, std::uint64_t task_id, std::uint64_t token) {
  bool earliest = false;
  {
    MutexLock lock(mu_);
    earliest = due_.empty() || at < due_.begin()->first;
    due_.emplace(at, std::make_pair(task_id, token));
  }
  if (earliest) cv_.notify_one();
}

void WaitDeadlines::run() {
  MutexLock lock(mu_);
  while (!stopping_) {
    if (due_.empty()) {
      cv_.wait(mu_);
      continue;
    }
    const Clock::time_point next = due_.begin()->first;
    if (Clock::now() < next) {
      cv_.wait_until(mu_, next);
      continue;
    }
    std::vector<std::pair<std::uint64_t, std::uint64_t>> passed;
    const auto now = Clock::now();
    while (!due_.empty() && due_.begin()->first <= now) {
      passed.push_back(due_.begin()->second);
      due_.erase(due_.begin());
    }
    lock.unlock();
    for (const auto& [task_id, token] : passed) expire_(task_id, token);
    lock.lock();
  }
}

}  // namespace sandpool::poold
