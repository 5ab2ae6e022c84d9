// The soak (issue 11): o.soak_tasks tasks through one pool of the chaos plugin (strict
// seccomp), where 1% of the tasks crash their worker, 0.1% time out, and cancels arrive at
// random moments (soak.hpp has the mix). Every accepted task must end exactly once, in a
// state its kind allows, and nothing may be left open once the pool is idle and closed.
// The whole soak has a deadline: past it, whatever is still open is reported lost and the
// process exits, so a wedged pool fails the run instead of hanging it.
#include <climits>
#include <cstdlib>
#include <iostream>
#include <random>

#include <sandpool/ipc/wake.hpp>

#include "bench.hpp"
#include "soak.hpp"

namespace sandpool::bench {
namespace {

using ipc::monotonic_ns;
using soak::Kind;

// Tasks per worker ring: deep enough for throughput, shallow enough that a crash sends few
// unstarted tasks back to the queue.
constexpr std::uint32_t kSoakConcurrency = 64;
constexpr std::size_t kOpenTasksShown = 10;

// The figures the issue asks for, from the tally: what a run that ends in time and one cut
// short by its deadline both print (lost: accepted tasks that never ended).
void add_tally_figures(Report& r, const soak::Tally& t) {
  r.add("soak", "tasks", static_cast<double>(t.accepted()), "tasks");
  r.add("soak", "completed", static_cast<double>(t.completed()), "tasks");
  r.add("soak", "dead_lettered", static_cast<double>(t.dead_lettered()), "tasks");
  r.add("soak", "cancelled", static_cast<double>(t.cancelled()), "tasks");
  r.add("soak", "lost", static_cast<double>(t.open()), "tasks");
  r.add("soak", "duplicated", static_cast<double>(t.duplicated()), "tasks");
  r.add("soak", "unexpected", static_cast<double>(t.unexpected()), "tasks");
  r.add("soak", "refused", static_cast<double>(t.refused()), "tasks");
  if (t.unexpected() != 0) r.note("soak: first unexpected end: " + t.first_unexpected());
}

// Arms the soak's deadline. Whoever is first after it passes, the watchdog thread (the
// soak's thread is stuck in a pool call) or the soak's thread (its wait timed out), reports
// what the tally holds and the stage the soak was in, prints the report and ends the process
// with exit code 1: nothing may wait on a wedged pool, and ~Pool would.
class Deadline {
 public:
  Deadline(std::int64_t at_ns, Report& r, const soak::Tally& t)
      : at_ns_(at_ns), report_(r), tally_(t), thread_([this] { watch(); }) {}
  ~Deadline() { disarm(); }
  std::int64_t at_ns() const { return at_ns_; }
  // What the soak's thread does now, for the report if the deadline passes (a literal).
  void stage(const char* what) { stage_.store(what); }
  // The soak ended in time: the watchdog stands down. Returns false iff it fired already
  // (the process is about to exit).
  bool disarm() {
    if (!claim()) return false;
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return true;
  }
  // The soak's own wait ran past the deadline.
  [[noreturn]] void expire() {
    if (claim()) give_up();
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // the watchdog exits
  }

 private:
  bool claim() {
    bool expected = false;
    return claimed_.compare_exchange_strong(expected, true);
  }
  void watch() {
    std::unique_lock lock(mu_);
    const auto at = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(at_ns_));
    if (cv_.wait_until(lock, at, [this] { return done_; })) return;
    lock.unlock();
    if (claim()) give_up();
  }
  [[noreturn]] void give_up() {
    const std::uint64_t open = tally_.open();
    report_.note(std::string("soak: deadline passed while ") + stage_.load() + ", with " +
                 std::to_string(open) + " accepted tasks not ended; they count as lost");
    for (const std::string& s : tally_.open_tasks(kOpenTasksShown)) {
      report_.note("soak: open at the deadline: seq " + s);
    }
    add_tally_figures(report_, tally_);
    report_.finish(std::cout);
    std::cout.flush();
    std::_Exit(1);
  }

  const std::int64_t at_ns_;
  Report& report_;
  const soak::Tally& tally_;
  std::atomic<const char*> stage_{"starting"};
  std::atomic<bool> claimed_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

PoolOptions soak_pool_options(const BenchOptions& o, std::uint32_t concurrency,
                              std::uint64_t window, std::uint64_t seed) {
  PoolOptions p = pool_options(o, "chaos", o.workers, concurrency);
  p.max_restarts = 1000000;  // 1% of the tasks crash: that is the point, not a crash loop
  p.cancel_grace = soak::kCancelGrace;
  p.queue_capacity = std::max<std::size_t>(p.queue_capacity, window * 2);
  p.seed = seed;
  return p;
}

// Submits every task of the soak, keeping at most `window` open; returns false iff the
// deadline passed while the window was full.
bool submit_all(const BenchOptions& o, Pool& pool, std::uint64_t seed, soak::Tally& tally,
                soak::Canceller& canceller, std::int64_t deadline_ns) {
  std::mt19937_64 rng(seed);
  for (std::uint64_t seq = 0; seq < o.soak_tasks; ++seq) {
    if (!tally.wait_for_window(deadline_ns)) return false;
    const soak::Plan plan = soak::draw_plan(rng);
    tally.plan(seq, plan);
    SubmitOptions so = soak::submit_options_for(plan.kind);
    so.on_done = [t = &tally, seq](const TaskResult& r) { t->on_done(seq, r); };
    auto ticket = pool.submit("chaos", soak::payload_for(plan.kind, seq), std::move(so));
    if (!ticket) {
      if (tally.refused() == 0) {
        std::cerr << "sandpool-bench: soak submit " << seq << ": " << ticket.status().message()
                  << "\n";
      }
      tally.refuse();
      continue;
    }
    tally.accept(seq, ticket->id());
    if (plan.cancel) {
      canceller.add(std::move(ticket).value(), plan.cancel_delay_ns, plan.cancel_when_running);
    }
  }
  return true;
}

// The pool's own counters must agree with the tally's; returns false (noted) iff not.
bool stats_agree(const PoolStats& s, const soak::Tally& t, Report& r) {
  if (s.submitted == t.accepted() && s.completed == t.completed() &&
      s.dead_lettered == t.dead_lettered() && s.cancelled == t.cancelled() && !s.crash_loop) {
    return true;
  }
  r.note("soak: the pool's stats disagree with the tally: submitted " +
         std::to_string(s.submitted) + ", completed " + std::to_string(s.completed) +
         ", dead_lettered " + std::to_string(s.dead_lettered) + ", cancelled " +
         std::to_string(s.cancelled) + (s.crash_loop ? ", in crash_loop" : ""));
  return false;
}

void note_mix(const soak::Tally& t, std::uint64_t seed, std::uint64_t window, Report& r) {
  std::string mix = "soak seed " + std::to_string(seed) + ", window " + std::to_string(window) +
                    " open tasks, accepted by kind:";
  for (std::size_t k = 0; k < soak::kKinds; ++k) {
    mix += std::string(" ") + soak::to_string(static_cast<Kind>(k)) + " " +
           std::to_string(t.accepted_of(static_cast<Kind>(k)));
  }
  r.note(mix);
}

}  // namespace

bool run_soak(const BenchOptions& o, Report& r) {
  const std::uint32_t concurrency = o.concurrency != 0 ? o.concurrency : kSoakConcurrency;
  // The crash-free baseline of this run: W1's figure if that group ran, else one W1 run.
  double w1 = 0;
  if (auto found = r.find("W1", "throughput")) {
    w1 = *found;
  } else if (!w1_throughput(o, concurrency, &w1)) {
    return false;
  }
  const std::uint64_t seed = o.soak_seed != 0 ? o.soak_seed : std::random_device{}() | 1;
  const std::uint64_t window = std::max<std::uint64_t>(1024, 8ull * o.workers * concurrency);
  auto pool = start_pool(soak_pool_options(o, concurrency, window, seed));
  if (!pool) return false;
  soak::Tally tally(o.soak_tasks, window);
  Deadline deadline(monotonic_ns() + std::int64_t{o.soak_deadline_s} * 1'000'000'000, r, tally);
  soak::Canceller canceller;
  const std::int64_t t0 = monotonic_ns();
  deadline.stage("submitting");
  if (!submit_all(o, *pool, seed, tally, canceller, deadline.at_ns())) deadline.expire();
  deadline.stage("cancelling the last tasks");
  canceller.stop();  // the last cancels come due within kMaxRandomCancelDelay
  // Idle: nothing queued, in flight or waiting for a retry. Every on_done has run by then (on
  // the loop thread, before it reports idle), so a task the tally still holds open is lost.
  deadline.stage("waiting for the pool to be idle");
  const std::int64_t left_ms = (deadline.at_ns() - monotonic_ns()) / 1'000'000;
  if (!pool->wait_idle_for(std::chrono::milliseconds(std::max<std::int64_t>(left_ms, 0)))) {
    deadline.expire();
  }
  const std::int64_t t1 = monotonic_ns();
  deadline.stage("closing the pool");
  const PoolStats stats = pool->stats();
  pool->close();
  pool.reset();
  if (!deadline.disarm()) deadline.expire();

  note_mix(tally, seed, window, r);
  add_tally_figures(r, tally);
  const double wall = static_cast<double>(t1 - t0) / 1e9;
  const double throughput = static_cast<double>(tally.accepted()) / wall;
  r.add("soak", "worker_restarts", static_cast<double>(stats.restarts), "workers");
  r.add("soak", "cancel_requests", static_cast<double>(canceller.requested()), "count");
  r.add("soak", "cancels_taken", static_cast<double>(canceller.taken()), "count");
  r.add("soak", "cancels_of_running", static_cast<double>(canceller.of_running()), "count");
  r.add("soak", "wall", wall, "s");
  r.add("soak", "throughput", throughput, "tasks/s");
  r.add("soak", "w1_throughput", w1, "tasks/s");
  r.add("soak", "throughput_vs_w1", throughput / w1, "ratio");
  for (const std::string& s : tally.open_tasks(kOpenTasksShown)) {
    r.note("soak: lost (never ended, the pool idle and closed): seq " + s);
  }
  const bool agree = stats_agree(stats, tally, r);
  return agree && tally.open() == 0 && tally.duplicated() == 0 && tally.unexpected() == 0 &&
         tally.refused() == 0;
}

}  // namespace sandpool::bench
