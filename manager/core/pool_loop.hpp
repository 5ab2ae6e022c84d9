// The pool's event loop: one thread that owns a PoolCore and the live WorkerProcesses, and
// carries out the core's commands (WorkerControl) with real processes, rings and epoll.
// Other threads talk to it through a mutex-guarded inbox; the loop pays a wake-up syscall
// only when it was asleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/busy_clock.hpp>
#include <sandpool/ipc/wake.hpp>
#include <sandpool/pool.hpp>

#include "core/pool_core.hpp"
#include "supervision/output_limiter.hpp"
#include "supervision/worker_process.hpp"

namespace spdlog {
class logger;
}

namespace sandpool::core {

// As root: refuses a plugin other users could replace (sandbox::check_plugin_permissions)
// and resolves who the workers become (args.policy.run_as, from `user`) once, in the manager,
// since the worker's view of /etc may be restricted. Does nothing when not root.
Status prepare_privilege_drop(sandbox::WorkerArgs& args, const std::string& user);

class PoolLoop final : public WorkerControl, public std::enable_shared_from_this<PoolLoop> {
 public:
  // Starts the loop thread and the workers; returns once the first worker is ready, or
  // the plugin's error when the first one cannot load or init.
  static Result<std::shared_ptr<PoolLoop>> start(PoolOptions options);
  ~PoolLoop() override;

  // Thread-safe entry points (see Pool).
  // id 0: a fresh id; otherwise the task keeps that id (a dead letter's replay).
  Result<Ticket> submit(std::string type, std::string payload, SubmitOptions options,
                        std::uint64_t id = 0);
  // Any thread may read the pool's identity here (name, task_types, task_ids,
  // dead_letter_store, logger, worker_path): reconfigure() never writes those. The other
  // fields belong to the loop thread.
  const PoolOptions& options() const { return opts_; }
  // See Pool::reconfigure. Validates on the caller's thread, applies on the loop thread.
  Result<ReconfigureReport> reconfigure(PoolOptions next);
  bool cancel(const TaskPtr& task);
  void set_draining(bool on) { draining_.store(on); }
  bool draining() const { return draining_.load(); }
  // Stops taking new submits (close() follows). After it returns no submit is accepted.
  void stop_accepting();
  // Sends a signal to the live worker with this pid; false when there is none.
  bool signal_worker(std::int32_t pid, int sig);
  // Runs fn on the loop thread (or inline once the loop has ended) and returns its value.
  template <typename R>
  R query(std::function<R(PoolCore&, std::int64_t now)> fn);
  void post(std::function<void(PoolCore&, std::int64_t now)> fn);
  // PoolCore::stats() as the loop last published it: at most 1 ms old while the loop is
  // busy, current while it sleeps, and taken after every command posted before the call (a
  // scale, a reconfigure); otherwise (a command still queued, or the loop ended) exact, by
  // query. So a monitor is answered at once however many tasks are queued ahead of it.
  PoolStats published_stats();
  bool wait_idle_for(std::int64_t timeout_ms);  // negative: forever
  void close();
  const std::vector<std::string>& task_types() const { return task_types_; }
  // The isolation workers run under as configured (sandbox::describe_isolation, plus the
  // cgroup); set before the loop thread starts, immutable after.
  const std::string& isolation() const { return isolation_; }
  // Wake-up syscalls the manager side has made (futex wakes, eventfd signals): the
  // benchmark reports them per task.
  std::uint64_t wake_syscalls() const { return wakes_.load(std::memory_order_relaxed); }
  // For poold's watchdog: how long the loop thread has been inside its current
  // iteration; 0 while it sleeps or once it ended. Any thread.
  std::int64_t busy_for_ns() const {
    return loop_ended_.load() ? 0 : busy_.busy_for_ns(ipc::monotonic_ns());
  }
  std::chrono::milliseconds max_timeout() const {
    return std::chrono::milliseconds(max_timeout_ms_.load(std::memory_order_relaxed));
  }

 private:
  struct Link {
    std::unique_ptr<supervision::WorkerProcess> proc;  // null when the spawn failed
    std::string spawn_error;
    bool broken = false;  // protocol error: its ring is no longer read
    bool killed = false;
    bool dirty = false;  // task frames written but not yet published
    bool output_open = true;
    bool ready = false;  // its Ready arrived (a second one is a protocol error)
    // Bounds the lines this worker puts into the log (its output and its LogMsgs).
    std::optional<supervision::OutputLimiter> output_limit;
  };

  explicit PoolLoop(PoolOptions options);
  Status launch();
  // The workers' command line, region sizes and cgroup limits from opts_ (loop thread, or
  // before it runs).
  Status fill_launch_spec();
  // Loop thread: takes `next`'s changeable fields; returns true iff the launch spec changed.
  bool apply_options(const PoolOptions& next);
  // A worker's plugin declared `declared` (empty: nothing); the pool serves task_types_.
  void check_declared_types(const std::vector<std::string>& declared);
  // Loop thread: raises max_payload_ to a reconfigured, larger value once no worker started
  // with the old launch spec takes tasks any more.
  void release_pending_max_payload();
  // Opens the process's cgroup tree when the policy asks for cgroups (sandbox.cgroup); sets
  // launch_ and isolation_.
  Status set_up_cgroups();
  void run();
  bool drain_inbox(std::int64_t now);
  bool poll_worker(WorkerId id, Link& link, std::int64_t now, std::size_t budget);
  void handle_message(WorkerId id, Link& link, std::uint16_t kind, std::int64_t now);
  void protocol_error(WorkerId id, Link& link, const std::string& what);
  void flush_links();
  void reap(WorkerId id, std::int64_t now);
  bool spin_for_work(std::int64_t until_ns);
  void wait_for_events(std::int64_t timeout_ms, std::int64_t now);
  void after_iteration();
  // Loop thread: copies core_->stats() for published_stats() when `force` or when the last
  // copy is 1 ms old.
  void publish_stats(std::int64_t now, bool force);
  // Logs one line of worker `id`'s output (level -1) or plugin log (0..3), within the
  // worker's output limit.
  void log_line(WorkerId id, int level, std::string_view text);
  // Logs "N output line(s) dropped ..." if the worker's limiter dropped any unreported.
  void report_dropped_output(Link& link);
  void ring_inbox_bell();  // any thread: wakes the loop iff it sleeps

  // WorkerControl
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
  void send_message(WorkerId w, std::uint16_t kind);

  // pool_loop_letters.cpp: dead letters through opts_.dead_letter_store. The sink hands each
  // letter to the store and keeps its task open until the store's receipt; the receipt ends
  // the task on the loop thread (letter_written), or inline once the loop has ended.
  void install_dead_letter_sink();
  void letter_written(std::uint64_t task_id);
  bool receipt_inline_ = false;  // loop thread: the store answered within enqueue() itself

  PoolOptions opts_;
  const PoolOptions as_started_;  // opts_ as given at start: reconfigure() checks against it
  std::shared_ptr<spdlog::logger> log_;
  std::shared_ptr<Spawner> spawner_;
  supervision::LaunchSpec launch_;
  std::atomic<std::size_t> admitted_{0};
  // Submit-side limits, read by any thread, changed by reconfigure().
  std::atomic<std::uint64_t> max_payload_{0};
  std::atomic<std::size_t> queue_capacity_{0};
  std::atomic<std::int64_t> max_timeout_ms_{0};
  BusyClock busy_;  // the loop thread's (busy_for_ns)
  std::unique_ptr<PoolCore> core_;
  std::vector<std::string> task_types_;
  std::string isolation_;
  // The layers the manager sets up around each worker, around what the worker reports of its
  // own (ReadyMsg::isolation): the namespaces before ("ns:user,pid+"), the cgroup after
  // ("+cgroup:v1").
  std::string manager_prefix_;
  sandbox::NamespaceSet namespaces_;  // in effect for every worker (the clone3 spawner's)
  std::string manager_layers_;

  // Loop-thread state.
  UniqueFd epoll_;
  std::map<WorkerId, Link> links_;
  std::vector<WorkerId> spawn_failures_;
  std::vector<WorkerId> exited_;
  WorkerId next_worker_ = 1;
  std::string scratch_;
  std::string message_;
  bool first_ready_seen_ = false;
  std::uint32_t spin_us_ = 0;
  std::uint64_t pending_max_payload_ = 0;  // 0: none (release_pending_max_payload)

  // Inbox (any thread -> loop).
  std::mutex inbox_mu_;
  std::vector<TaskPtr> inbox_tasks_;
  std::vector<std::function<void(PoolCore&, std::int64_t)>> inbox_cmds_;
  std::atomic<std::size_t> inbox_count_{0};
  std::atomic<bool> sleeping_{false};
  ipc::EventFd inbox_bell_;
  std::atomic<std::uint64_t> wakes_{0};

  // Stats for other threads (published_stats). published_cmds_: how many posted commands
  // had run when published_ was taken (cmds_done_, the loop thread's count, at that time).
  std::mutex published_mu_;
  PoolStats published_;
  std::uint64_t published_cmds_ = 0;
  std::int64_t published_at_ns_ = 0;           // loop thread
  std::uint64_t cmds_done_ = 0;                // loop thread
  std::atomic<std::uint64_t> cmds_posted_{0};  // any thread (post)

  std::atomic<std::uint64_t> next_task_id_{1};
  std::atomic<bool> accepting_{true};
  std::atomic<bool> draining_{false};
  // failed_ is set after failure_ is written; both through set_failure(), failure_ under
  // failure_mu_ (read by submit() and reconfigure() on other threads).
  void set_failure(std::string why);
  std::string failure() const;
  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mu_;
  std::string failure_;

  // Start-up hand-shake and idle waiters.
  std::promise<Status> started_;
  bool started_reported_ = false;
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  std::atomic<int> idle_waiters_{0};
  bool idle_ = false;  // guarded by idle_mu_

  std::mutex ended_mu_;  // serialises inline queries once the loop has ended
  std::atomic<bool> loop_ended_{false};
  std::thread thread_;
};

template <typename R>
R PoolLoop::query(std::function<R(PoolCore&, std::int64_t)> fn) {
  auto done = std::make_shared<std::promise<R>>();
  auto fut = done->get_future();
  {
    // Held while posting: the loop's last act takes this lock and runs what is left in the
    // inbox, so a query can never be stranded between the check and the post.
    std::lock_guard lock(ended_mu_);
    if (loop_ended_.load()) return fn(*core_, ipc::monotonic_ns());
    post([fn = std::move(fn), done](PoolCore& core, std::int64_t now) {
      done->set_value(fn(core, now));
    });
  }
  return fut.get();
}

}  // namespace sandpool::core
