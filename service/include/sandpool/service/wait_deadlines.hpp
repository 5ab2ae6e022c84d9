// WaitDeadlines: the timeouts of `wait` requests (docs/protocol.md, "Operations"). One
// thread (sp-waits) sleeps until the earliest deadline and calls `expire` for each that
// passed; poold then answers that wait with the task as it is.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include <sandpool/base/thread_annotations.hpp>

namespace sandpool::poold {

// Thread-safety: add() from any thread. `expire` runs on the deadlines' thread with no lock
// of this class held (mu_ is a leaf). Lifetime: the destructor joins the thread; deadlines
// still pending are dropped unanswered.
class WaitDeadlines {
 public:
  using Clock = std::chrono::steady_clock;
  using Expire = std::function<void(std::uint64_t task_id, std::uint64_t token)>;

  explicit WaitDeadlines(Expire expire);
  ~WaitDeadlines() EXCLUDES(mu_);
  WaitDeadlines(const WaitDeadlines&) = delete;
  WaitDeadlines& operator=(const WaitDeadlines&) = delete;

  // Calls expire(task_id, token) once `at` has passed.
  void add(Clock::time_point at, std::uint64_t task_id, std::uint64_t token) EXCLUDES(mu_);

 private:
  void run() EXCLUDES(mu_);

  Expire expire_;
  Mutex mu_;
  CondVar cv_;
  std::multimap<Clock::time_point, std::pair<std::uint64_t, std::uint64_t>> due_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace sandpool::poold
