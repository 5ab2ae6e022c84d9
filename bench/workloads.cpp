// W1 (throughput), W2 (sequential round trips) and W3 (CPU-bound efficiency): real Pools
// running real plugins in sandboxed worker processes, driven through the public API only.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include <sandpool/ipc/wake.hpp>
#include <sandpool/pool/pool.hpp>
#include <sandpool/pool/pool_metrics.hpp>

#include "bench.hpp"

namespace sandpool::bench {
namespace {

using ipc::monotonic_ns;

// Payloads prepared up front, as a client would have them; task i carries payloads[i % n].
std::vector<std::string> payload_set(std::uint32_t size) {
  std::vector<std::string> p;
  for (std::uint64_t i = 0; i < 1024; ++i) p.push_back(make_payload(i, size));
  return p;
}

// Submits n tasks and awaits each; false on any failure.
bool warm_up(Pool& pool, const std::string& type, const std::vector<std::string>& payloads,
             std::uint32_t n) {
  std::vector<Ticket> tickets;
  for (std::uint32_t i = 0; i < n; ++i) {
    auto t = pool.submit(type, payloads[i % payloads.size()]);
    if (!t) return false;
    tickets.push_back(std::move(t).value());
  }
  for (const Ticket& t : tickets) {
    if (t.wait().state != TaskState::kCompleted) return false;
  }
  return true;
}

struct W1Run {
  double throughput = 0;   // tasks/s, first submit to last completion
  double submit_rate = 0;  // tasks/s accepted by submit()
  double wakes_per_task = 0;
  double wall_s = 0;
  // CPU time per task (us): the submitting thread (submit + await), the rest of this
  // process (the pool's loop thread), and the worker processes together.
  double submitter_us = 0, loop_us = 0, workers_us = 0;
  std::uint64_t kills = 0;    // workers SIGKILLed during the run (the crash run)
  double fn_ns_per_call = 0;  // a dispatch function's mean call time (PoolMetrics)
};

SchedTimes workers_sched(Pool& pool) {
  SchedTimes sum;
  for (const WorkerInfo& w : pool.workers()) {
    const SchedTimes t = pid_sched(w.pid);
    sum.on_cpu_ns += t.on_cpu_ns;
    sum.runqueue_ns += t.runqueue_ns;
  }
  return sum;
}
std::int64_t workers_cpu_ns(Pool& pool) { return workers_sched(pool).on_cpu_ns; }

// Completions counted by SubmitOptions::on_done (on_done mode): the callback runs on the
// pool's loop thread and checks the echo itself.
struct DoneCounter {
  const std::vector<std::string>* payloads;
  bool check_echo;
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> bad{0};
};

// SIGKILLs one of the pool's workers every `every`, from its own thread, until stopped:
// the crashes W1's crash run measures (docs/performance.md: a crash costs a respawn and a retry).
class WorkerKiller {
 public:
  WorkerKiller(Pool& pool, std::chrono::milliseconds every)
      : thread_([this, &pool, every] { run(pool, every); }) {}
  ~WorkerKiller() { stop(); }
  void stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  std::uint64_t kills() const { return kills_; }

 private:
  void run(Pool& pool, std::chrono::milliseconds every) {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, every, [this] { return stop_; })) {
      for (const WorkerInfo& w : pool.workers()) {
        if (w.state != "busy" && w.state != "idle") continue;
        if (::kill(w.pid, SIGKILL) == 0) ++kills_;
        break;
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<std::uint64_t> kills_{0};
  std::thread thread_;
};

// Tasks that did not come back completed with their own payload echoed: the counter's bad
// ones, plus (on_done runs, `counted` tasks) the ones it never saw, plus the tickets' bad
// or unfinished ones.
std::uint64_t count_bad(const DoneCounter& counter, const std::vector<Ticket>& tickets,
                        std::uint64_t counted) {
  std::uint64_t bad = counter.bad.load();
  if (counted != 0) bad += counted - counter.completed.load() - counter.bad.load();
  const std::vector<std::string>& payloads = *counter.payloads;
  for (std::uint64_t i = 0; i < tickets.size(); ++i) {
    if (!tickets[i].done()) {
      ++bad;
      continue;
    }
    const TaskResult r = tickets[i].snapshot();
    bad += r.state != TaskState::kCompleted ||
           (counter.check_echo && r.result != payloads[i % payloads.size()]);
  }
  return bad;
}

bool w1_once(const BenchOptions& o, std::uint32_t concurrency, std::uint64_t tasks,
             std::chrono::milliseconds crash_every, W1Run* out,
             sandbox::SeccompProfile profile = sandbox::SeccompProfile::kStrict,
             DispatchFunction dispatch_function = {}) {
  PoolOptions opts = pool_options(o, o.plugin, o.workers, concurrency);
  opts.sandbox.profile = profile;
  opts.dispatch_function = std::move(dispatch_function);
  opts.queue_capacity = std::max<std::size_t>(opts.queue_capacity, tasks + 1024);
  if (crash_every.count() > 0) opts.max_restarts = 1000000;  // crashes are the point here
  auto pool = start_pool(opts);
  if (!pool) return false;
  const std::string type = pool->task_types().front();
  const auto payloads = payload_set(o.payload_size);
  if (!warm_up(*pool, type, payloads, 2000)) {
    std::cerr << "sandpool-bench: W1 warm-up tasks did not complete\n";
    return false;
  }
  const bool keep_tickets = o.w1_await != "on_done";
  const bool check_echo = o.plugin == "echo";
  DoneCounter counter{&payloads, check_echo};
  std::vector<Ticket> tickets;
  if (keep_tickets) tickets.reserve(tasks);
  const std::uint64_t wakes0 = pool->wake_syscalls();
  const std::int64_t workers0 = workers_cpu_ns(*pool);
  const std::int64_t process0 = process_cpu_ns();
  const std::int64_t thread0 = thread_cpu_ns();
  std::optional<WorkerKiller> killer;
  if (crash_every.count() > 0) killer.emplace(*pool, crash_every);
  const std::int64_t t0 = monotonic_ns();
  for (std::uint64_t i = 0; i < tasks; ++i) {
    SubmitOptions so;
    if (!keep_tickets) {
      // Two words: stored inside the std::function, no allocation.
      so.on_done = [c = &counter, i](const TaskResult& r) {
        const bool ok = r.state == TaskState::kCompleted &&
                        (!c->check_echo || r.result == (*c->payloads)[i % c->payloads->size()]);
        (ok ? c->completed : c->bad).fetch_add(1, std::memory_order_relaxed);
      };
    }
    auto t = pool->submit(type, payloads[i % payloads.size()], std::move(so));
    if (!t) {
      std::cerr << "sandpool-bench: W1 submit " << i << ": " << t.status().message() << "\n";
      return false;
    }
    if (keep_tickets) tickets.push_back(std::move(t).value());
  }
  const std::int64_t t_submitted = monotonic_ns();
  if (o.w1_await == "tickets") {
    for (const Ticket& t : tickets) (void)t.wait();
  } else {
    pool->wait_idle();
  }
  const std::int64_t t1 = monotonic_ns();
  if (killer) {
    killer->stop();
    out->kills = killer->kills();
  }
  const std::int64_t thread_cpu = thread_cpu_ns() - thread0;
  const std::int64_t process_cpu = process_cpu_ns() - process0;
  const std::int64_t workers_cpu = workers_cpu_ns(*pool) - workers0;
  const std::uint64_t wakes = pool->wake_syscalls() - wakes0;
  const std::uint64_t bad = count_bad(counter, tickets, keep_tickets ? 0 : tasks);
  if (bad != 0) {
    std::cerr << "sandpool-bench: W1: " << bad << " of " << tasks
              << " tasks did not complete with their payload echoed\n";
    return false;
  }
  const double n = static_cast<double>(tasks);
  out->wall_s = static_cast<double>(t1 - t0) / 1e9;
  out->throughput = n / out->wall_s;
  out->submit_rate = n / (static_cast<double>(t_submitted - t0) / 1e9);
  out->wakes_per_task = static_cast<double>(wakes) / n;
  out->submitter_us = static_cast<double>(thread_cpu) / n / 1000.0;
  out->loop_us = static_cast<double>(process_cpu - thread_cpu) / n / 1000.0;
  out->workers_us = static_cast<double>(workers_cpu) / n / 1000.0;
  if (opts.dispatch_function) {
    const PoolMetrics m = pool->metrics();
    const Histogram& h = m.dispatch_function.time;
    if (h.count() > 0) {
      out->fn_ns_per_call = static_cast<double>(h.sum_ns()) / static_cast<double>(h.count());
    }
  }
  return true;
}

// A dispatch function as an embedding program might write one: the least loaded worker with
// room, ties to the lowest slot (least-loaded's choice, made outside the pool).
std::optional<std::size_t> least_loaded_function(std::span<const WorkerView> workers,
                                                 const TaskView&) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    if (!workers[i].has_room()) continue;
    if (!best || workers[i].in_flight < workers[*best].in_flight) best = i;
  }
  return best;
}

}  // namespace

bool w1_throughput(const BenchOptions& o, std::uint32_t concurrency, double* tasks_per_s) {
  W1Run run;
  if (!w1_once(o, concurrency, o.tasks, std::chrono::milliseconds(0), &run)) return false;
  *tasks_per_s = run.throughput;
  return true;
}

bool run_w1(const BenchOptions& o, Report& r) {
  std::vector<std::uint32_t> settings;
  if (o.concurrency != 0) {
    settings.push_back(o.concurrency);
  } else {
    settings.assign(std::begin(kW1Concurrencies), std::end(kW1Concurrencies));
  }
  W1Run best;
  std::uint32_t best_c = 0;
  for (std::uint32_t c : settings) {
    W1Run run;
    if (!w1_once(o, c, o.tasks, std::chrono::milliseconds(0), &run)) return false;
    r.note("W1 concurrency " + std::to_string(c) + ": " + format_value(run.throughput) +
           " tasks/s, " + format_value(run.wakes_per_task) + " wake syscalls/task, wall " +
           format_value(run.wall_s) + " s");
    if (settings.size() > 1) {
      r.add("W1", "throughput_c" + std::to_string(c), run.throughput, "tasks/s");
    }
    if (run.throughput > best.throughput) {
      best = run;
      best_c = c;
    }
  }
  r.add("W1", "throughput", best.throughput, "tasks/s");
  if (auto raw = r.find("raw", "echo_stream_throughput")) {
    r.add("W1", "fraction_of_raw_echo", best.throughput / *raw, "ratio");
  }
  r.add("W1", "wake_syscalls_per_task", best.wakes_per_task, "ratio");
  r.add("W1", "concurrency", best_c, "tasks/worker");
  r.add("W1", "tasks", static_cast<double>(o.tasks), "tasks");
  r.add("W1", "workers", o.workers, "workers");
  r.add("W1", "submit_rate", best.submit_rate, "tasks/s");
  r.add("W1", "submitter_cpu_per_task", best.submitter_us, "us");
  r.add("W1", "loop_cpu_per_task", best.loop_us, "us");
  r.add("W1", "workers_cpu_per_task", best.workers_us, "us");
  if (o.w1_crash_tasks == 0) return true;

  // The same workload with one worker SIGKILLed per second (restart limit raised), against
  // a crash-free run of the same length right before it: every task must still complete.
  // Crash-free runs before and after it, so a drift over the process's life (this host's
  // throughput keeps changing from run to run) does not pass for the crashes' cost.
  W1Run before, crashing, after;
  if (!w1_once(o, best_c, o.w1_crash_tasks, std::chrono::milliseconds(0), &before)) return false;
  if (!w1_once(o, best_c, o.w1_crash_tasks, std::chrono::milliseconds(1000), &crashing)) {
    return false;
  }
  if (!w1_once(o, best_c, o.w1_crash_tasks, std::chrono::milliseconds(0), &after)) return false;
  W1Run calm;
  calm.throughput = (before.throughput + after.throughput) / 2;
  r.add("W1", "crash_free_before_throughput", before.throughput, "tasks/s");
  r.add("W1", "crash_free_after_throughput", after.throughput, "tasks/s");
  r.add("W1", "crash_free_throughput", calm.throughput, "tasks/s");
  r.add("W1", "crash_per_s_throughput", crashing.throughput, "tasks/s");
  r.add("W1", "crash_per_s_ratio", crashing.throughput / calm.throughput, "ratio");
  r.add("W1", "crash_per_s_kills", static_cast<double>(crashing.kills), "workers");
  return true;
}

bool run_sandbox_cost(const BenchOptions& o, Report& r) {
  // W1 under the strict profile against the same run with no filter, alternated so that a
  // drift over the process's life (this host's throughput moves from run to run) is shared
  // by both: strict, off, strict, off, ... and the medians compared. CPU per task (the
  // submitter, the loop and the workers) is compared too: it moves less than throughput
  // when other processes compete for the cores.
  const std::uint32_t c = o.concurrency != 0 ? o.concurrency : 64;
  const std::uint64_t tasks = std::max<std::uint64_t>(o.tasks / 2, 1000);
  std::vector<double> strict, off, strict_cpu, off_cpu;
  auto cpu_per_task = [](const W1Run& run) {
    return run.submitter_us + run.loop_us + run.workers_us;
  };
  // The process's first pool is always the slowest (its heap is still growing): one run
  // that counts for neither side goes first.
  W1Run discarded;
  if (!w1_once(o, c, tasks, std::chrono::milliseconds(0), &discarded)) return false;
  for (std::uint32_t round = 0; round < 3; ++round) {
    W1Run s, f;
    if (!w1_once(o, c, tasks, std::chrono::milliseconds(0), &s, sandbox::SeccompProfile::kStrict))
      return false;
    if (!w1_once(o, c, tasks, std::chrono::milliseconds(0), &f, sandbox::SeccompProfile::kOff))
      return false;
    r.note("sandbox round " + std::to_string(round) + ": strict " + format_value(s.throughput) +
           " tasks/s, " + format_value(cpu_per_task(s)) + " us CPU/task; off " +
           format_value(f.throughput) + " tasks/s, " + format_value(cpu_per_task(f)) +
           " us CPU/task");
    strict.push_back(s.throughput);
    off.push_back(f.throughput);
    strict_cpu.push_back(cpu_per_task(s));
    off_cpu.push_back(cpu_per_task(f));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double s = median(strict), f = median(off);
  r.add("sandbox", "w1_strict_throughput", s, "tasks/s");
  r.add("sandbox", "w1_off_throughput", f, "tasks/s");
  r.add("sandbox", "w1_strict_overhead", (f - s) / f, "ratio");
  const double sc = median(strict_cpu), fc = median(off_cpu);
  r.add("sandbox", "w1_strict_cpu_per_task", sc, "us");
  r.add("sandbox", "w1_off_cpu_per_task", fc, "us");
  r.add("sandbox", "w1_strict_cpu_overhead", (sc - fc) / fc, "ratio");
  return true;
}

bool run_dispatch_cost(const BenchOptions& o, Report& r) {
  // W1 with the built-in round-robin against the same run with a dispatch function (the
  // least loaded worker with room), alternated like the sandbox group so that a drift over
  // the process's life is shared, and the medians compared. The loop's CPU per task is where
  // the function's cost lands (it runs on the loop thread); its own time per call comes from
  // the pool's histogram.
  const std::uint32_t c = o.concurrency != 0 ? o.concurrency : 64;
  const std::uint64_t tasks = std::max<std::uint64_t>(o.tasks / 2, 1000);
  W1Run discarded;
  if (!w1_once(o, c, tasks, std::chrono::milliseconds(0), &discarded)) return false;
  std::vector<double> builtin, custom, builtin_loop, custom_loop, call_ns;
  for (std::uint32_t round = 0; round < 3; ++round) {
    W1Run b, f;
    if (!w1_once(o, c, tasks, std::chrono::milliseconds(0), &b)) return false;
    if (!w1_once(o, c, tasks, std::chrono::milliseconds(0), &f, sandbox::SeccompProfile::kStrict,
                 least_loaded_function)) {
      return false;
    }
    r.note("dispatch round " + std::to_string(round) + ": round-robin " +
           format_value(b.throughput) + " tasks/s, loop " + format_value(b.loop_us) +
           " us/task; function " + format_value(f.throughput) + " tasks/s, loop " +
           format_value(f.loop_us) + " us/task, " + format_value(f.fn_ns_per_call) + " ns/call");
    builtin.push_back(b.throughput);
    custom.push_back(f.throughput);
    builtin_loop.push_back(b.loop_us);
    custom_loop.push_back(f.loop_us);
    call_ns.push_back(f.fn_ns_per_call);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double b = median(builtin), f = median(custom);
  r.add("dispatch", "w1_round_robin_throughput", b, "tasks/s");
  r.add("dispatch", "w1_function_throughput", f, "tasks/s");
  r.add("dispatch", "w1_function_overhead", (b - f) / b, "ratio");
  r.add("dispatch", "w1_round_robin_loop_cpu_per_task", median(builtin_loop), "us");
  r.add("dispatch", "w1_function_loop_cpu_per_task", median(custom_loop), "us");
  r.add("dispatch", "function_call_time", median(call_ns), "ns");
  return true;
}

bool w2_round_trips(const BenchOptions& o, std::uint32_t workers, Summary* out,
                    double* hand_off_share, double* direct_end_share) {
  auto pool = start_pool(pool_options(o, o.plugin, workers, PoolOptions{}.concurrency));
  if (!pool) return false;
  const std::string type = pool->task_types().front();
  const auto payloads = payload_set(o.payload_size);
  const bool poll = o.w2_wait == "poll";
  std::vector<double> samples;
  samples.reserve(o.rounds);
  const std::uint32_t warmup = 1000;
  std::uint64_t hand_offs0 = 0, direct_ends0 = 0;
  for (std::uint32_t i = 0; i < warmup + o.rounds; ++i) {
    if (i == warmup) {
      hand_offs0 = pool->hand_offs();
      direct_ends0 = pool->direct_ends();
    }
    const std::string& payload = payloads[i % payloads.size()];
    const std::int64_t t0 = monotonic_ns();
    auto t = pool->submit(type, payload);
    if (!t) {
      std::cerr << "sandpool-bench: W2 submit: " << t.status().message() << "\n";
      return false;
    }
    if (poll) {
      while (!t->done()) __builtin_ia32_pause();
    }
    const TaskResult res = t->wait();
    const std::int64_t t1 = monotonic_ns();
    if (res.state != TaskState::kCompleted || (o.plugin == "echo" && res.result != payload)) {
      std::cerr << "sandpool-bench: W2 round trip " << i << " ended " << to_string(res.state)
                << ": " << res.error << "\n";
      return false;
    }
    if (i >= warmup) samples.push_back(static_cast<double>(t1 - t0) / 1000.0);
  }
  *out = summarize(samples);
  if (hand_off_share != nullptr && o.rounds > 0) {
    *hand_off_share = static_cast<double>(pool->hand_offs() - hand_offs0) / o.rounds;
  }
  if (direct_end_share != nullptr && o.rounds > 0) {
    *direct_end_share = static_cast<double>(pool->direct_ends() - direct_ends0) / o.rounds;
  }
  return true;
}

bool run_w2(const BenchOptions& o, Report& r) {
  Summary s;
  double hand_off_share = 0, direct_end_share = 0;
  if (!w2_round_trips(o, o.workers, &s, &hand_off_share, &direct_end_share)) return false;
  r.add("W2", "p50", s.p50, "us");
  r.add("W2", "p99", s.p99, "us");
  r.add("W2", "mean", s.mean, "us");
  if (auto futex = r.find("raw", "futex_pingpong_p50")) {
    r.add("W2", "p50_vs_futex", s.p50 / *futex, "ratio");
  }
  if (auto futex = r.find("raw", "futex_pingpong_p99")) {
    r.add("W2", "p99_vs_futex", s.p99 / *futex, "ratio");
  }
  r.add("W2", "rounds", s.count, "round_trips");
  r.add("W2", "hand_off_share", hand_off_share, "ratio");
  r.add("W2", "direct_end_share", direct_end_share, "ratio");
  return true;
}

bool run_w3(const BenchOptions& o, Report& r) {
  constexpr std::uint32_t kTasks = 2000;
  constexpr double kTaskMs = 1.0;
  const std::uint32_t workers = 2;
  auto pool = start_pool(pool_options(o, "cpu", workers, PoolOptions{}.concurrency));
  if (!pool) return false;
  const std::string type = pool->task_types().front();
  std::vector<Ticket> tickets;
  tickets.reserve(kTasks);
  const SchedTimes workers0 = workers_sched(*pool);
  const std::int64_t cpu0 = process_cpu_ns();
  const std::int64_t machine0 = machine_busy_ns();
  const std::int64_t t0 = monotonic_ns();
  for (std::uint32_t i = 0; i < kTasks; ++i) {
    auto t = pool->submit(type, "1");
    if (!t) {
      std::cerr << "sandpool-bench: W3 submit: " << t.status().message() << "\n";
      return false;
    }
    tickets.push_back(std::move(t).value());
  }
  std::uint32_t bad = 0;
  for (const Ticket& t : tickets) bad += t.wait().state != TaskState::kCompleted;
  const std::int64_t t1 = monotonic_ns();
  const double manager_cpu = static_cast<double>(process_cpu_ns() - cpu0) / 1e9;
  const double machine = static_cast<double>(machine_busy_ns() - machine0) / 1e9;
  const SchedTimes workers1 = workers_sched(*pool);
  const double workers_cpu = static_cast<double>(workers1.on_cpu_ns - workers0.on_cpu_ns) / 1e9;
  const double workers_wait =
      static_cast<double>(workers1.runqueue_ns - workers0.runqueue_ns) / 1e9;
  if (bad != 0) {
    std::cerr << "sandpool-bench: W3: " << bad << " tasks did not complete\n";
    return false;
  }
  const double wall = static_cast<double>(t1 - t0) / 1e9;
  const double ideal = kTasks * kTaskMs / 1000.0 / workers;
  r.add("W3", "wall", wall, "s");
  r.add("W3", "ideal", ideal, "s");
  r.add("W3", "efficiency", ideal / wall, "ratio");
  r.add("W3", "manager_cpu", manager_cpu, "s");
  // The workers got this much CPU over the run: below `workers` x wall, the machine (other
  // processes, or the pool's own spinning) took the rest.
  r.add("W3", "workers_cpu", workers_cpu, "s");
  r.add("W3", "workers_cpu_share", workers_cpu / (wall * workers), "ratio");
  // Time the workers were runnable but had no CPU (all workers together).
  r.add("W3", "workers_runqueue_wait", workers_wait, "s");
  // CPU time the rest of the machine (other users' processes) took meanwhile.
  r.add("W3", "other_processes_cpu", std::max(0.0, machine - manager_cpu - workers_cpu), "s");
  return true;
}

}  // namespace sandpool::bench
