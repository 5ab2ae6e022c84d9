// The hand-driven PoolCore of the unit tests: a FakeWorkerControl plays the workers and the
// tests move the clock themselves, so every scheduling decision is checked without a process.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>

#include "core/pool_core.hpp"
#include "fake_worker_control.hpp"

namespace sandpool::testing {

using namespace std::chrono_literals;

inline constexpr std::int64_t kMs = 1000000;

struct Harness {
  explicit Harness(PoolOptions o = defaults()) : opts(std::move(o)) {
    core = std::make_unique<core::PoolCore>(opts, ctl, admitted);
    core->start(now);
  }
  static PoolOptions defaults() {
    PoolOptions o;
    o.workers = 2;
    o.concurrency = 2;
    o.retries = 3;
    o.retry.base = 0ms;  // no jitter wait unless a test asks for it
    o.timeout = 1000ms;
    o.seed = 1;
    o.backtrace_grace = 0ms;  // kills happen at once unless a test asks for a backtrace
    return o;
  }
  core::TaskPtr submit(SubmitOptions so = {}) {
    admitted++;
    auto t = core::TaskRecord::make(next_id++, "echo", "p", std::move(so));
    core->submit(t, now);
    return t;
  }
  void ready_all() {
    for (auto id : ctl.spawned) core->on_ready(id, now);
  }
  bool result(core::WorkerId w, std::uint64_t id, ipc::TaskStatus st, std::string data = {}) {
    ipc::ResultMsg m;
    m.id = id;
    m.status = st;
    m.data = std::move(data);
    if (st != ipc::TaskStatus::kOk) m.error = "handler said no";
    return core->on_result(w, m, now);
  }
  void exit(core::WorkerId w, ExitStatus st) {
    ctl.workers[w].gone = true;
    core->on_exit(w, {st, 0, ctl.pid(w)}, now);
  }
  // Moves the clock (both of them); every worker that is not silent beats on the way.
  void advance(std::chrono::milliseconds d) {
    now += d.count() * kMs;
    ctl.wall_clock_ms += d.count();
    for (auto& [w, fw] : ctl.workers) {
      if (!fw.silent) fw.heartbeat_ms = now / kMs;
    }
    core->on_tick(now);
    core->observe_backtraces(now);  // as the loop does every iteration
  }
  // Moves the clock in small steps, so periodic checks see every moment in between.
  void run_for(std::chrono::milliseconds d, std::chrono::milliseconds step = 10ms) {
    for (auto t = 0ms; t < d; t += step) advance(step);
  }
  // The live worker the task was last sent to (0: none).
  core::WorkerId holder(std::uint64_t id) {
    for (auto it = ctl.sends.rbegin(); it != ctl.sends.rend(); ++it) {
      if (it->second == id) return ctl.workers[it->first].gone ? 0 : it->first;
    }
    return 0;
  }

  PoolOptions opts;
  FakeWorkerControl ctl;
  std::atomic<std::size_t> admitted{0};
  std::unique_ptr<core::PoolCore> core;
  std::int64_t now = 1000 * kMs;
  std::uint64_t next_id = 1;
};

inline TaskResult account(const core::TaskPtr& t) {
  MutexLock lock(t->mu());
  return t->account_copy();
}

}  // namespace sandpool::testing
