// A WorkerControl that records the core's commands, so PoolCore is tested without a single
// process: tests play the workers' part by calling on_ready / on_result / on_exit.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/pool_core.hpp"

namespace sandpool::testing {

struct FakeWorker {
  std::vector<std::uint64_t> ring;      // task ids sent, in order
  std::vector<std::uint32_t> attempts;  // attempt numbers sent
  std::vector<std::uint64_t> cancels;   // Cancel messages put into its ring
  std::uint64_t cancel_flag = 0;        // the header's cancel word (raise_cancel_flag)
  bool stop_sent = false;
  bool killed = false;
  bool gone = false;          // on_exit was reported for it
  std::uint64_t started = 0;  // what the header would say
  std::int32_t pid = 0;
  std::int64_t heartbeat_ms = 0;  // the harness beats for it as the clock moves...
  bool silent = false;            // ...unless it is "stopped"
  std::uint64_t rss = 0;
  std::int64_t cpu_ns = 0;
  std::uint32_t backtrace_requests = 0;
  std::optional<std::string> backtrace;  // the answer, once the test "writes" it
};

class FakeWorkerControl : public core::WorkerControl {
 public:
  core::WorkerId spawn() override {
    const core::WorkerId id = next_++;
    workers[id].pid = static_cast<std::int32_t>(1000 + id);
    spawned.push_back(id);
    return id;
  }
  void send_task(core::WorkerId w, const core::TaskRecord& t, std::uint32_t attempt,
                 std::int64_t) override {
    workers[w].ring.push_back(t.id);
    workers[w].attempts.push_back(attempt);
    sends.push_back({w, t.id});
  }
  void send_cancel(core::WorkerId w, std::uint64_t id) override {
    workers[w].cancels.push_back(id);
  }
  void raise_cancel_flag(core::WorkerId w, std::uint64_t id) override {
    workers[w].cancel_flag = id;
  }
  void send_stop(core::WorkerId w) override { workers[w].stop_sent = true; }
  void kill(core::WorkerId w) override { workers[w].killed = true; }
  std::uint64_t started_task(core::WorkerId w) override { return workers[w].started; }
  std::int32_t pid(core::WorkerId w) override { return workers[w].pid; }
  std::int64_t heartbeat_ms(core::WorkerId w) override { return workers[w].heartbeat_ms; }
  std::uint64_t rss_bytes(core::WorkerId w) override { return workers[w].rss; }
  std::int64_t cpu_ns(core::WorkerId w) override { return workers[w].cpu_ns; }
  bool request_backtrace(core::WorkerId w) override {
    ++workers[w].backtrace_requests;
    return !workers[w].gone;
  }
  std::optional<std::string> backtrace(core::WorkerId w, ipc::BacktraceRead) override {
    return workers[w].backtrace;
  }
  std::int64_t wall_ms() override { return wall_clock_ms; }
  // Moves only when a test moves it (a dispatch function that "takes" time bumps it).
  std::int64_t elapsed_ns() override { return elapsed_clock_ns; }

  std::map<core::WorkerId, FakeWorker> workers;
  std::vector<core::WorkerId> spawned;
  std::vector<std::pair<core::WorkerId, std::uint64_t>> sends;  // every send_task, in order
  // The wall clock the core stamps attempts with: far from today's, so that a stamp taken
  // from the system clock instead shows. The harness moves it with the monotonic clock.
  std::int64_t wall_clock_ms = 86'400'000;
  std::int64_t elapsed_clock_ns = 0;

 private:
  core::WorkerId next_ = 1;
};

}  // namespace sandpool::testing
