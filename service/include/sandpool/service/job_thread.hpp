// JobThread: one named thread running queued jobs in order. poold's control handler must not
// block the server thread, so the slow operations (reload, SQLite, replays) and the requests
// that take effect in order (submits, task lookups, pool controls) run on threads of this kind.
#pragma once

#include <pthread.h>

#include <deque>
#include <functional>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include <sandpool/base/busy_clock.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/base/thread_name.hpp>

namespace sandpool::poold {

// Thread-safety: post() and busy_for_ns() from any thread. Lifetime: ~JobThread runs what
// is queued, then joins. mu_ is a leaf: a job runs with it released.
class JobThread {
 public:
  // `name` (at most 15 characters) is the thread's name in `top -H` and in /healthz.
  explicit JobThread(std::string name) : name_(std::move(name)), thread_([this] { run(); }) {}
  ~JobThread() EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  JobThread(const JobThread&) = delete;
  JobThread& operator=(const JobThread&) = delete;

  void post(std::function<void()> job) EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

  const std::string& name() const { return name_; }
  // How long the thread has been inside its current job at `now_ns` (BusyClock::now_ns());
  // 0 while it waits for one.
  std::int64_t busy_for_ns(std::int64_t now_ns) const { return busy_.busy_for_ns(now_ns); }

 private:
  void run() EXCLUDES(mu_) {
    name_thread(::pthread_self(), name_);
    MutexLock lock(mu_);
    while (true) {
      while (!stopping_ && jobs_.empty()) cv_.wait(mu_);
      if (jobs_.empty()) return;
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      busy_.begin(BusyClock::now_ns());
      run_caught(job);
      busy_.end();
      lock.lock();
    }
  }

  // A job that throws must not end poold (std::terminate): the request it served is lost
  // (its requester's deadline ends its wait), the thread goes on with the next.
  void run_caught(const std::function<void()>& job) {
    try {
      job();
    } catch (const std::exception& e) {
      spdlog::error("{}: a job failed and was dropped: {}", name_, e.what());
    } catch (...) {
      spdlog::error("{}: a job failed and was dropped", name_);
    }
  }

  const std::string name_;  // before thread_: run() reads it
  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> jobs_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  BusyClock busy_;
  std::thread thread_;
};

}  // namespace sandpool::poold
