// WorkerLinks: the pool's live workers, as PoolCore commands them (WorkerControl) and as the
// loop hears them: each worker's process, rings, doorbell and output pipe, watched through
// the loop's Poller. It decodes and checks what workers write (check_message), turns it into
// the core's events (on_ready, on_result, on_exit ...), reaps exited workers and logs their
// output within each worker's output limit. A worker whose fds the poller refuses to watch or
// unwatch is killed: the loop never runs a worker whose exit it cannot see.
//
// Loop thread only: the holder of the loop's claim, which a submitting thread is during a
// direct hand-off (or its owner before the loop runs and after it ends). Owns the
// WorkerProcesses: destroying it, or clear(), kills and reaps what is left.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/check_message.hpp"
#include "core/poller.hpp"
#include "core/pool_core.hpp"
#include "supervision/output_limiter.hpp"
#include "supervision/worker_process.hpp"

namespace spdlog {
class logger;
}

namespace sandpool::core {

class WorkerLinks final : public WorkerControl {
 public:
  struct Config {
    std::string pool;  // the pool's name, for the log
    std::shared_ptr<spdlog::logger> log;
    std::shared_ptr<Spawner> spawner;
    MessageLimits limits;
    double output_lines_per_second = 0;  // each worker's output limit (OutputLimiter)
    double output_burst = 0;
    std::uint32_t spin_us = 0;  // written into each worker's header
    // What the manager sets up around what each worker reports of its own isolation
    // (LaunchPlan::manager_prefix, manager_layers).
    std::string isolation_prefix;
    std::string isolation_suffix;
    // Called with the task types of each Ready a worker sends, before the core hears of it.
    std::function<void(const std::vector<std::string>& declared)> on_declared;
  };
  // Tags with worker id 0 are the loop's own; this one is free for it (the mailbox's bell).
  static constexpr std::uint64_t kLoopTag = 3;

  WorkerLinks(Config config, Poller& poller);
  ~WorkerLinks() override;
  // Before the loop runs: the core the workers' events go to.
  void attach(PoolCore& core) { core_ = &core; }
  // What the next spawn() starts a worker with.
  const supervision::LaunchSpec& launch() const { return launch_; }
  void set_launch(supervision::LaunchSpec spec) { launch_ = std::move(spec); }
  // The largest result a worker may send from now on (a reconfigure's max_result).
  void set_max_result(std::uint64_t bytes) { cfg_.limits.max_result = bytes; }

  // ---- the loop's steps
  // Reads each worker's results (at most `budget` messages each). Returns true iff any came.
  bool poll_all(std::int64_t now);
  // Tells the core about the spawns that failed since the last call. Returns true iff any.
  bool report_failed_spawns(std::int64_t now);
  // Publishes the task frames written since the last flush; wakes workers that sleep.
  void flush();
  // Returns true iff a worker's result ring holds data (the loop's spin).
  bool has_results() const {
    for (const auto& [id, link] : links_) {
      if (link.proc && !link.broken && link.proc->results().ring().has_data()) return true;
    }
    return false;
  }
  // Fills *out with the result rings has_results() reads (cleared first): a snapshot the loop
  // spins on while it does not hold its claim (PoolLoop::spin_for_work). The rings stay valid
  // until the loop reaps a worker, which it does only under the claim.
  void result_rings(std::vector<ipc::RingConsumer*>* out) {
    out->clear();
    for (auto& [id, link] : links_) {
      if (link.proc && !link.broken) out->push_back(&link.proc->results().ring());
    }
  }
  // The direct wait (PoolLoop::read_own_result): worker w's result ring, or null when w has
  // no process or its ring is no longer read (a protocol error).
  ipc::RingConsumer* result_ring(WorkerId w) {
    Link* link = live(w);
    return link != nullptr && !link->broken ? &link->proc->results().ring() : nullptr;
  }
  // Reads worker w's results as poll_all() does. Returns true iff any came.
  bool poll_one(WorkerId w, std::int64_t now);
  // Before the loop sleeps: tells every ring so (its producer then rings the doorbell).
  // Returns false when one has data or room meanwhile: then the loop must not sleep.
  bool prepare_sleep();
  void cancel_sleep();
  // An event the poller reported under one of this object's tags.
  void on_event(std::uint64_t tag);
  // Reaps the workers whose pidfd said they exited (on_event); the core hears on_exit.
  void reap_exited(std::int64_t now);
  // Kills what is left.
  void clear() { links_.clear(); }
  // Sends a signal to the live worker with this pid; false when there is none.
  bool signal(std::int32_t pid, int sig);
  // Wake-up syscalls made towards workers (doorbell writes, futex wakes).
  std::uint64_t wakes() const { return wakes_.load(std::memory_order_relaxed); }

  // ---- WorkerControl
  WorkerId spawn() override;
  void send_task(WorkerId w, const TaskRecord& task, std::uint32_t attempt,
                 std::int64_t deadline_ns) override;
  void send_cancel(WorkerId w, std::uint64_t task_id) override;
  void raise_cancel_flag(WorkerId w, std::uint64_t task_id) override;
  void send_stop(WorkerId w) override;
  void kill(WorkerId w) override;
  std::uint64_t started_task(WorkerId w) override;
  std::int32_t pid(WorkerId w) override;
  std::int64_t heartbeat_ms(WorkerId w) override;
  std::uint64_t rss_bytes(WorkerId w) override;
  std::int64_t cpu_ns(WorkerId w) override;
  bool request_backtrace(WorkerId w) override;
  std::optional<std::string> backtrace(WorkerId w, ipc::BacktraceRead read) override;
  std::int64_t steady_ns(std::int64_t now) override;
  // The wall clock of the loop's current pass: read at the pass's first wall_ms(), then the
  // same stamp for the rest of the pass, so a pass that dispatches and ends many tasks reads
  // it once, not twice per task (issue 37); steady_ns() then answers the CLOCK_MONOTONIC
  // read right after it, the pair a not_before is placed from. Loop thread: begin_pass() at
  // each pass's start; end_passes() when the loop ends, after which every call reads the
  // clocks (late queries run inline on other threads).
  std::int64_t wall_ms() override;
  void begin_pass() { pass_wall_ms_ = kWallUnread; }
  void end_passes() { in_passes_ = false; }

 private:
  static constexpr std::int64_t kWallUnread = -1;
  struct Link {
    std::unique_ptr<supervision::WorkerProcess> proc;  // null when the spawn failed
    std::string spawn_error;
    bool broken = false;  // protocol error: its ring is no longer read
    bool killed = false;
    bool dirty = false;           // task frames written but not yet published
    bool doorbell_open = true;    // watched: the worker has not closed its end
    bool output_open = true;      // watched: its output pipe is not at end of file
    bool ready = false;           // its Ready arrived (a second one is a protocol error)
    std::int64_t started_ns = 0;  // CLOCK_MONOTONIC at spawn: older kernel records are not its
    // Bounds the lines this worker puts into the log (its output and its LogMsgs).
    std::optional<supervision::OutputLimiter> output_limit;
  };

  // Watches the new worker's pidfd, doorbell and output; on a refusal unwatches what was
  // added and returns why (the caller kills the worker).
  Status watch(WorkerId id, Link& link);
  // Stops watching one of a live worker's fds; a refusal kills the worker.
  void unwatch(WorkerId id, Link& link, int fd);
  bool poll_worker(WorkerId id, Link& link, std::int64_t now, std::size_t budget);
  void handle_message(WorkerId id, Link& link, std::uint16_t kind, std::int64_t now);
  void on_ready(WorkerId id, Link& link, ipc::ReadyMsg& m, std::int64_t now);
  void protocol_error(WorkerId id, Link& link, const std::string& what);
  void reap(WorkerId id, std::int64_t now);
  void log_exit(const Link& link, const supervision::ExitReport& report);
  void send_message(WorkerId w, std::uint16_t kind);
  // Logs one line of worker `id`'s output (level -1) or plugin log (0..3), within the
  // worker's output limit.
  void log_line(WorkerId id, int level, std::string_view text);
  // Logs "N output line(s) dropped ..." if the worker's limiter dropped any unreported.
  void report_dropped_output(Link& link);
  Link* live(WorkerId w);  // null when w has no process

  Config cfg_;
  Poller& poller_;
  PoolCore* core_ = nullptr;
  supervision::LaunchSpec launch_;
  std::map<WorkerId, Link> links_;
  std::vector<WorkerId> spawn_failures_;
  std::vector<WorkerId> exited_;
  WorkerId next_worker_ = 1;
  std::string scratch_;    // a task frame being encoded
  std::string frame_;      // a result frame being read
  WorkerMessage message_;  // frame_, checked
  std::atomic<std::uint64_t> wakes_{0};
  bool in_passes_ = true;                    // loop thread, until end_passes()
  std::int64_t pass_wall_ms_ = kWallUnread;  // loop thread
  std::int64_t pass_steady_ns_ = 0;          // loop thread: CLOCK_MONOTONIC after pass_wall_ms_
};

}  // namespace sandpool::core
