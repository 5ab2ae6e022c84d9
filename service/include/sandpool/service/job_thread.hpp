// JobThread: one named thread running queued jobs in order. poold's control handler must not
// block the server thread, so the slow operations (reload, SQLite, replays) and the requests
// that take effect in order (submits, task lookups, pool controls) run on threads of this kind.
#pragma once

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include <sandpool/base/busy_clock.hpp>
#include <sandpool/base/thread_name.hpp>

namespace sandpool::poold {

// Thread-safety: post() and busy_for_ns() from any thread. Lifetime: ~JobThread runs what
// is queued, then joins. mu_ is a leaf: a job runs with it released.
class JobThread {
 public:
  // `name` (at most 15 characters) is the thread's name in `top -H` and in /healthz.
  explicit JobThread(std::string name) : name_(std::move(name)), thread_([this] { run(); }) {}
  ~JobThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  JobThread(const JobThread&) = delete;
  JobThread& operator=(const JobThread&) = delete;

  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

  const std::string& name() const { return name_; }
  // How long the thread has been inside its current job at `now_ns` (BusyClock::now_ns());
  // 0 while it waits for one.
  std::int64_t busy_for_ns(std::int64_t now_ns) const { return busy_.busy_for_ns(now_ns); }

 private:
  void run() {
    name_thread(::pthread_self(), name_);
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
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
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  BusyClock busy_;
  std::thread thread_;
};

}  // namespace sandpool::poold
