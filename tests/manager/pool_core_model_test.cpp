// A model test of PoolCore: long random schedules of everything that can happen to a pool
// (submits, scheduled submits, tenants with weights and per-tenant bounds, priority aging,
// cancels, timeouts, crashes, hangs, failed inits, stops that are ignored, recycling,
// reconfigures, scaling and autoscaling, restarts, letters written late, close), played by a
// simulated set of workers against the real core with a hand-moved clock. After every step
// the invariants are checked; at the end the pool is closed and driven until it finishes,
// and every task must have ended exactly once.
//
// Each schedule comes from a seed, printed when it fails, so a failure reproduces with
// SANDPOOL_MODEL_SEED=<seed> SANDPOOL_MODEL_SCHEDULES=1. `make test` runs 2,000 schedules
// (3.5 s), the ASan and UBSan build of `make check` 250 (the same code paths under the
// sanitizers: a schedule costs 36x there, 2,000 took 127 s); SANDPOOL_MODEL_SCHEDULES raises it
// for a long run (`make model`: 300,000).
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/pool_core.hpp"

using namespace sandpool;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t kOneMs = 1000000;

struct Broken : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define MODEL_CHECK(cond, what)                                    \
  do {                                                             \
    if (!(cond)) {                                                 \
      std::ostringstream os_;                                      \
      os_ << "invariant broken: " << #cond << " (" << what << ")"; \
      throw Broken(os_.str());                                     \
    }                                                              \
  } while (0)

// One simulated worker process.
struct SimWorker {
  struct Entry {
    std::uint64_t id;
    std::uint32_t attempt;
  };
  std::int32_t pid = 0;
  bool alive = true;
  bool ready_sent = false;
  std::deque<Entry> ring;           // tasks received, not answered
  std::set<std::uint64_t> cancels;  // Cancel messages not yet drained
  std::uint64_t started = 0;        // the header's word
  std::uint64_t cancel_flag = 0;
  bool stop = false;
  bool killed = false;
  bool silent = false;
  bool ignores_stop = false;
  std::int64_t heartbeat_ms = 0;
  std::int64_t cpu_ns = 0;
};

// The world around the core: its WorkerControl, the clock, and the tasks' own bookkeeping.
class World : public core::WorkerControl {
 public:
  explicit World(std::uint64_t seed) : rng(seed) {}

  core::WorkerId spawn() override {
    const core::WorkerId id = next_++;
    spawned_log.push_back(id);
    workers[id].pid = static_cast<std::int32_t>(10000 + id);
    workers[id].heartbeat_ms = now / kOneMs;
    workers[id].ignores_stop = chance(10);
    return id;
  }
  void send_task(core::WorkerId w, const core::TaskRecord& t, std::uint32_t attempt,
                 std::int64_t) override {
    MODEL_CHECK(!t.decided, "task " << t.id << " dispatched after its end was decided");
    MODEL_CHECK(!is_terminal(t.state.load()), "terminal task " << t.id << " dispatched");
    SimWorker& sw = workers.at(w);
    MODEL_CHECK(sw.alive, "task sent to worker " << w << " after it exited");
    MODEL_CHECK(t.payload().size() <= payload_limit_at_spawn.at(w),
                "a payload over the worker's max_payload reached its ring");
    if (auto due = due_ms.find(t.id); due != due_ms.end()) {
      MODEL_CHECK(now / kOneMs >= due->second, "scheduled task " << t.id << " dispatched "
                                                                 << due->second - now / kOneMs
                                                                 << " ms before its not_before");
    }
    sw.ring.push_back({t.id, attempt});
  }
  void send_cancel(core::WorkerId w, std::uint64_t id) override {
    workers.at(w).cancels.insert(id);
  }
  void raise_cancel_flag(core::WorkerId w, std::uint64_t id) override {
    workers.at(w).cancel_flag = id;
  }
  void send_stop(core::WorkerId w) override { workers.at(w).stop = true; }
  void kill(core::WorkerId w) override { workers.at(w).killed = true; }
  std::uint64_t started_task(core::WorkerId w) override { return workers.at(w).started; }
  std::int32_t pid(core::WorkerId w) override { return workers.at(w).pid; }
  std::int64_t heartbeat_ms(core::WorkerId w) override { return workers.at(w).heartbeat_ms; }
  std::uint64_t rss_bytes(core::WorkerId) override { return 0; }
  std::int64_t cpu_ns(core::WorkerId w) override { return workers.at(w).cpu_ns; }
  bool request_backtrace(core::WorkerId w) override { return workers.at(w).alive; }
  // The wall clock moves with the hand-moved one: a not_before lands where the model expects.
  std::int64_t wall_ms() override { return kWallOffsetMs + now / kOneMs; }
  std::optional<std::string> backtrace(core::WorkerId, ipc::BacktraceRead) override {
    return std::nullopt;
  }

  bool chance(int percent) { return std::uniform_int_distribution<int>(0, 99)(rng) < percent; }
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); }

  std::mt19937_64 rng;
  std::map<core::WorkerId, SimWorker> workers;
  std::map<core::WorkerId, std::uint64_t> payload_limit_at_spawn;
  std::vector<core::WorkerId> spawned_log;
  std::int64_t now = 1000 * kOneMs;
  std::map<std::uint64_t, std::int64_t> due_ms;  // scheduled tasks: not before (monotonic ms)
  static constexpr std::int64_t kWallOffsetMs = 1790000000000;

 private:
  core::WorkerId next_ = 1;
};

class Model {
 public:
  explicit Model(std::uint64_t seed) : world_(seed), seed_(seed) {
    PoolOptions o;
    o.workers = 1 + static_cast<std::uint32_t>(world_.pick(3));
    o.concurrency = 1 + static_cast<std::uint32_t>(world_.pick(3));
    o.dispatch = static_cast<DispatchStrategy>(world_.pick(6));
    if (world_.chance(30)) o.dispatch_function = random_dispatch();
    o.retries = static_cast<std::uint32_t>(world_.pick(3));
    o.retry.base = std::chrono::milliseconds(world_.pick(3) * 50);
    o.retry.max = 500ms;
    o.timeout = std::chrono::milliseconds(200 + world_.pick(800));
    o.heartbeat_interval = 100ms;
    o.missed_heartbeats = 3;
    o.cancel_grace = std::chrono::milliseconds(50 + world_.pick(300));
    o.stop_timeout = std::chrono::milliseconds(100 + world_.pick(400));
    o.init_timeout = 1000ms;
    o.backtrace_grace = std::chrono::milliseconds(world_.chance(50) ? 0 : 30);
    o.max_restarts = 3 + static_cast<std::uint32_t>(world_.pick(20));
    o.restart_window = 2000ms;
    o.crash_backoff_base = 20ms;
    o.crash_backoff_max = 200ms;
    o.stable_after = 300ms;
    o.max_init_failures = 2 + static_cast<std::uint32_t>(world_.pick(4));
    o.recycle_max_tasks = world_.chance(30) ? 1 + world_.pick(6) : 0;
    o.cpu_time = world_.chance(30) ? 100ms : 0ms;
    o.max_payload = 64;
    o.queue_capacity = 1000;
    o.max_per_tenant = world_.chance(30) ? 3 + world_.pick(10) : 0;
    o.tenants.max_tenants = world_.chance(20) ? 2 : 10000;
    o.tenants.default_weight = 1 + static_cast<std::uint32_t>(world_.pick(3));
    if (world_.chance(50)) o.tenants.weights = {{"a", 1}, {"b", 4}};
    o.aging_interval = world_.chance(40) ? std::chrono::milliseconds(20 + world_.pick(200)) : 0ms;
    if (world_.chance(40)) o.flow = random_flow();
    o.task_records_max = 8;
    o.seed = seed;
    if (world_.chance(30)) {
      autoscale_ = true;
      o.autoscale.enabled = true;
      o.worker_bounds = {static_cast<std::uint32_t>(world_.pick(2)),
                         2 + static_cast<std::uint32_t>(world_.pick(3))};
      o.workers = std::clamp(o.workers, o.worker_bounds.min, o.worker_bounds.max);
      if (o.worker_bounds.min == 0 && world_.chance(50)) o.workers = 0;  // on demand
      o.autoscale.target_queue_wait = std::chrono::milliseconds(10 + world_.pick(100));
      o.autoscale.scale_up_step = 1 + static_cast<std::uint32_t>(world_.pick(2));
      o.autoscale.cooldown = std::chrono::milliseconds(world_.pick(300));
      o.autoscale.idle_timeout = std::chrono::milliseconds(50 + world_.pick(500));
      o.on_event = [this](const PoolEvent& e) {
        if (e.kind == PoolEvent::Kind::kScaled) on_scaled(e);
      };
    }
    opts_ = o;
    core_ = std::make_unique<core::PoolCore>(opts_, world_, admitted_);
    core_->set_tenant_counts(&tenant_counts_);
    durable_letters_ = world_.chance(50);
    if (durable_letters_) {
      core_->set_dead_letter_sink([this](const core::TaskPtr& t) {
        letters_.push_back(t->id);
        return true;
      });
    }
    core_->start(world_.now);
    note_spawns();
  }

  // A dispatch function that mostly picks a worker with room, and sometimes says queue it,
  // throws, or names a worker out of range, starting or full. It checks what it is shown.
  DispatchFunction random_dispatch() {
    return [this](std::span<const WorkerView> workers,
                  const TaskView& t) -> std::optional<std::size_t> {
      // The core contains what the function throws, so a broken invariant is kept for
      // check() instead.
      try {
        check_dispatch_view(workers, t);
      } catch (const Broken& e) {
        if (fn_broken_.empty()) fn_broken_ = e.what();
      }
      std::vector<std::size_t> room;
      for (std::size_t i = 0; i < workers.size(); ++i) {
        if (workers[i].has_room()) room.push_back(i);
      }
      const int r = world_.pick(100);
      if (r < 60) {
        if (room.empty()) return std::nullopt;
        return room[static_cast<std::size_t>(world_.pick(static_cast<int>(room.size())))];
      }
      if (r < 70) return std::nullopt;
      if (r < 80) throw std::runtime_error("model dispatch function throws");
      if (r < 90) return workers.size() + static_cast<std::size_t>(world_.pick(3));
      return static_cast<std::size_t>(world_.pick(static_cast<int>(workers.size())));
    };
  }

  void check_dispatch_view(std::span<const WorkerView> workers, const TaskView& t) {
    MODEL_CHECK(!workers.empty(), "a dispatch function called without workers");
    MODEL_CHECK(tasks_.count(t.id) == 1, "a dispatch function shown unknown task " << t.id);
    MODEL_CHECK(t.type == "echo", "a dispatch function shown type " << t.type);
    int homes = 0;
    for (const WorkerView& v : workers) {
      MODEL_CHECK(world_.workers.count(v.id) == 1 && world_.workers.at(v.id).alive,
                  "a dispatch function shown worker " << v.id << ", not alive");
      MODEL_CHECK(v.ready || v.in_flight == 0, "a starting worker shown with tasks");
      homes += v.key_home ? 1 : 0;
    }
    MODEL_CHECK(homes == (t.key.empty() ? 0 : 1), homes << " affinity homes for one task");
  }

  // The autoscaler's steps: within the bounds, never up in crash_loop (but for the first
  // worker of a pool at 0), never a step up reversed within two cooldowns.
  void on_scaled(const PoolEvent& e) {
    const std::string why(e.detail);
    trace("scaled to " + std::to_string(e.workers) + ": " + why);
    MODEL_CHECK(e.workers >= opts_.worker_bounds.min && e.workers <= opts_.worker_bounds.max,
                "target " << e.workers << " outside the bounds");
    const std::int64_t cooldown_ns = opts_.autoscale.cooldown.count() * kOneMs;
    if (why.rfind("autoscale up: queue wait", 0) == 0) {
      MODEL_CHECK(!core_->stats().crash_loop, "scaled up in crash_loop");
      last_autoscale_up_ns_ = world_.now;
    } else if (why.rfind("autoscale up", 0) == 0) {
      last_autoscale_up_ns_ = world_.now;
    } else if (why.rfind("autoscale down", 0) == 0) {
      MODEL_CHECK(world_.now - last_autoscale_up_ns_ >= 2 * cooldown_ns,
                  "a step up reversed " << (world_.now - last_autoscale_up_ns_) / kOneMs
                                        << " ms later, within two cooldowns");
    }
  }

  // Rate limits and caps, some of each kind (all tasks are of type echo).
  FlowLimits random_flow() {
    FlowLimits f;
    if (world_.chance(30)) f.pool = {static_cast<std::uint32_t>(5 + world_.pick(20)), 100ms, 0};
    if (world_.chance(50)) {
      f.task_types["echo"] = {static_cast<std::uint32_t>(1 + world_.pick(10)), 100ms,
                              static_cast<std::uint32_t>(world_.pick(3))};
    }
    if (world_.chance(50))
      f.tenants["a"] = {static_cast<std::uint32_t>(1 + world_.pick(5)), 200ms, 0};
    if (world_.chance(50))
      f.type_concurrency["echo"] = 1 + static_cast<std::uint32_t>(world_.pick(3));
    return f;
  }

  // Runs `steps` random steps, then closes the pool and drives it to the end.
  void run(int steps) {
    for (int i = 0; i < steps; ++i) {
      step();
      check();
    }
    core_->close(world_.now);
    note_spawns();
    check();
    for (int i = 0; i < 5000 && !(core_->wound_down() && letters_.empty()); ++i) {
      cooperate();
      check();
    }
    MODEL_CHECK(core_->wound_down(), "close() never finished: " << describe());
    MODEL_CHECK(letters_.empty(), "letters left unwritten");
    for (const auto& [id, t] : tasks_) {
      MODEL_CHECK(t.rec->done.load() == 1, "task " << id << " never ended");
      MODEL_CHECK(t.ended == 1, "task " << id << " ended " << t.ended << " times");
    }
  }

 private:
  struct Task {
    core::TaskPtr rec;
    int ended = 0;
  };

  void note_spawns() {
    for (core::WorkerId id : world_.spawned_log) {
      trace("spawned " + std::to_string(id) + " cap " + std::to_string(spawn_limit_));
    }
    world_.spawned_log.clear();
    for (auto& [id, w] : world_.workers) {
      world_.payload_limit_at_spawn.try_emplace(id, spawn_limit_);
    }
  }

  void submit() {
    if (admitted_.load() >= opts_.queue_capacity) return;
    SubmitOptions so;
    if (world_.chance(50)) so.tenant = std::string(1, static_cast<char>('a' + world_.pick(3)));
    // Like PoolLoop::admit_task: the tenant's bound, then the count.
    const bool counted = !so.tenant.empty() || opts_.max_per_tenant != 0;
    if (counted && !tenant_counts_.admit(so.tenant, opts_.max_per_tenant, opts_.tenants.max_tenants,
                                         "model")) {
      MODEL_CHECK(opts_.max_per_tenant != 0 || opts_.tenants.max_tenants != 0,
                  "a tenant refused without a bound");
      return;
    }
    admitted_++;
    const std::int64_t now_ms = world_.now / kOneMs;
    if (world_.chance(15)) {
      so.delay = std::chrono::milliseconds(world_.pick(600));
      if (so.delay->count() > 0) world_.due_ms[next_id_] = now_ms + so.delay->count();
    } else if (world_.chance(10)) {
      const std::int64_t ahead = world_.pick(900) - 300;  // some already past
      so.not_before = std::chrono::system_clock::time_point(
          std::chrono::milliseconds(World::kWallOffsetMs + now_ms + ahead));
      if (ahead > 0) world_.due_ms[next_id_] = now_ms + ahead;
    }
    if (world_.chance(30)) so.priority = world_.pick(3);
    if (world_.chance(30)) so.key = "k" + std::to_string(world_.pick(4));
    if (world_.chance(20)) so.timeout = std::chrono::milliseconds(1 + world_.pick(300));
    if (world_.chance(20)) so.retries = static_cast<std::uint32_t>(world_.pick(4));
    if (world_.chance(10)) so.queue_ttl = std::chrono::milliseconds(50 + world_.pick(500));
    so.fail_fast = world_.chance(10);
    const std::uint64_t id = next_id_++;
    so.on_done = [this, id](const TaskResult& r) {
      MODEL_CHECK(r.id == id, "on_done for the wrong task");
      MODEL_CHECK(is_terminal(r.state), "on_done with a state that is not terminal");
      tasks_.at(id).ended++;
    };
    // Some near max_payload. Like Pool::submit: a lower max_payload applies at once, a
    // higher one once no worker started with a lower one is left.
    std::size_t size = world_.chance(10) ? 60 : 8;
    std::uint64_t limit = opts_.max_payload;
    for (const auto& [wid, w] : world_.workers) {
      if (w.alive) limit = std::min(limit, world_.payload_limit_at_spawn.at(wid));
    }
    if (size > limit) {
      admitted_--;
      if (counted) tenant_counts_.release(so.tenant);
      world_.due_ms.erase(id);
      return;
    }
    auto rec = core::TaskRecord::make(id, "echo", std::string(size, 'p'), std::move(so));
    rec->tenant_counted = counted;
    tasks_.emplace(id, Task{rec});
    core_->submit(rec, world_.now);
  }

  core::TaskPtr some_task() {
    if (tasks_.empty()) return nullptr;
    auto it = tasks_.begin();
    std::advance(it, world_.pick(static_cast<int>(tasks_.size())));
    return it->second.rec;
  }

  SimWorker* some_worker(core::WorkerId* id) {
    std::vector<core::WorkerId> alive;
    for (auto& [wid, w] : world_.workers) {
      if (w.alive) alive.push_back(wid);
    }
    if (alive.empty()) return nullptr;
    *id = alive[world_.pick(static_cast<int>(alive.size()))];
    return &world_.workers.at(*id);
  }

  void exit_worker(core::WorkerId id, ExitStatus st) {
    trace("exit " + std::to_string(id) + " code " + std::to_string(st.code) + " sig " +
          std::to_string(st.signal));
    SimWorker& w = world_.workers.at(id);
    w.alive = false;
    core_->on_exit(id, {st, 0, w.pid}, world_.now);
    note_spawns();
  }

  void result(core::WorkerId id, std::uint64_t task, ipc::TaskStatus st) {
    ipc::ResultMsg m;
    m.id = task;
    m.status = st;
    if (st != ipc::TaskStatus::kOk) m.error = "model says no";
    if (!core_->on_result(id, m, world_.now)) {
      core_->on_protocol_error(id, "result for a task not in flight");
    }
    note_spawns();
  }

  // The worker's task loop: drain Cancels (dropping what has not started), then start the
  // front or answer it.
  void work(core::WorkerId id, SimWorker& w, bool cooperative) {
    if (!w.ready_sent) {
      if (!cooperative && world_.chance(15)) return exit_worker(id, ExitStatus{true, 67, 0});
      w.ready_sent = true;
      trace("ready " + std::to_string(id));
      core_->on_ready(id, world_.now);
      note_spawns();
      return;
    }
    for (auto it = w.ring.begin(); it != w.ring.end();) {
      if (w.cancels.count(it->id) != 0 && w.started != it->id) {
        const std::uint64_t tid = it->id;
        w.cancels.erase(tid);
        it = w.ring.erase(it);
        result(id, tid, ipc::TaskStatus::kCancelled);
        return;
      }
      ++it;
    }
    w.cancels.clear();  // late Cancels are harmless
    if (w.ring.empty()) {
      if (w.stop && !(w.ignores_stop && !cooperative)) exit_worker(id, ExitStatus{true, 0, 0});
      return;
    }
    const SimWorker::Entry front = w.ring.front();
    if (w.started != front.id) {
      w.started = front.id;
      return;
    }
    w.ring.pop_front();
    w.started = 0;
    ipc::TaskStatus st = ipc::TaskStatus::kOk;
    if (!cooperative) {
      const int r = world_.pick(100);
      st = r < 70   ? ipc::TaskStatus::kOk
           : r < 85 ? ipc::TaskStatus::kRetry
           : r < 95 ? ipc::TaskStatus::kFail
                    : ipc::TaskStatus::kResultTooLarge;
    }
    result(id, front.id, st);
  }

  void advance(std::int64_t ms) {
    world_.now += ms * kOneMs;
    for (auto& [id, w] : world_.workers) {
      if (w.alive && !w.silent) w.heartbeat_ms = world_.now / kOneMs;
      if (w.alive && w.started != 0) w.cpu_ns += ms * kOneMs / 2;
    }
    core_->observe_running();
    core_->observe_backtraces(world_.now);
    if (world_.now >= core_->next_deadline()) core_->on_tick(world_.now);
    note_spawns();
  }

  // Killed workers die; stopped ones that do not ignore Stop exit once idle.
  void reap_killed() {
    std::vector<core::WorkerId> dead;
    for (auto& [id, w] : world_.workers) {
      if (w.alive && w.killed) dead.push_back(id);
    }
    for (core::WorkerId id : dead) exit_worker(id, ExitStatus{false, 0, SIGKILL});
  }

  void reconfigure() {
    trace("reconfigure");
    PoolOptions next = opts_;
    switch (world_.pick(7)) {
      case 6:
        next.flow = world_.chance(50) ? random_flow() : FlowLimits{};
        reconfigured_flow_ = true;
        break;
      case 4:
        next.aging_interval =
            world_.chance(50) ? std::chrono::milliseconds(10 + world_.pick(100)) : 0ms;
        break;
      case 5:
        next.tenants.weights = {{"a", 1 + static_cast<std::uint32_t>(world_.pick(5))}};
        next.max_per_tenant = world_.chance(50) ? 2 + world_.pick(5) : 0;
        break;
      case 0:
        next.recycle_max_tasks = world_.chance(50) ? 1 + world_.pick(4) : 0;
        break;
      case 1:
        next.max_payload = world_.chance(50) ? 32 : 64;
        break;
      case 2:
        next.workers = 1 + static_cast<std::uint32_t>(world_.pick(3));
        break;
      default:
        next.dispatch = static_cast<DispatchStrategy>(world_.pick(6));
        break;
    }
    const bool replace = next.max_payload != opts_.max_payload || world_.chance(20);
    trace("  payload " + std::to_string(next.max_payload) + " workers " +
          std::to_string(next.workers) + " max_tasks " + std::to_string(next.recycle_max_tasks) +
          (replace ? " replace" : ""));
    opts_ = next;
    // Workers started from now on get the new limit; the old ones keep theirs.
    if (replace) spawn_limit_ = next.max_payload;
    core_->reconfigure(next, replace, world_.now);
    note_spawns();
  }

  void step() {
    core::WorkerId id = 0;
    const int r = world_.pick(100);
    if (r < 25) {
      submit();
    } else if (r < 55) {
      if (SimWorker* w = some_worker(&id)) work(id, *w, false);
    } else if (r < 65) {
      advance(1 + world_.pick(world_.chance(20) ? 1500 : 60));
    } else if (r < 70) {
      reap_killed();
    } else if (r < 74) {
      if (auto t = some_task()) core_->cancel(t, world_.now);
    } else if (r < 77) {
      if (some_worker(&id) != nullptr) exit_worker(id, ExitStatus{false, 0, SIGSEGV});
    } else if (r < 79) {
      if (SimWorker* w = some_worker(&id)) w->silent = !w->silent;
    } else if (r < 81) {
      if (SimWorker* w = some_worker(&id)) {
        // A hostile word: a bogus "started" id, or a second Ready.
        if (world_.chance(50)) {
          w->started = world_.chance(50) ? 0 : 0xdeadbeef;
        } else if (w->ready_sent && !core_->on_ready(id, world_.now)) {
          core_->on_protocol_error(id, "a second Ready");
        }
      }
    } else if (r < 84) {
      if (!letters_.empty()) {
        const auto i = static_cast<std::size_t>(world_.pick(static_cast<int>(letters_.size())));
        const std::uint64_t lid = letters_[i];
        letters_.erase(letters_.begin() + static_cast<std::ptrdiff_t>(i));
        core_->on_letter_written(lid, world_.now);
      }
    } else if (r < 87) {
      reconfigure();
    } else if (r < 89) {
      const auto n = 1 + static_cast<std::uint32_t>(world_.pick(3));
      opts_.workers = n;
      trace("scale " + std::to_string(n));
      core_->scale(n, world_.now);
    } else if (r < 90) {
      const bool rolling = world_.chance(50);
      trace(std::string("restart") + (rolling ? " rolling" : ""));
      core_->restart_workers(rolling, world_.now);
    } else {
      advance(1 + world_.pick(20));
    }
    note_spawns();
  }

  // After close: the workers behave (they start, answer, exit when told) and time passes.
  void cooperate() {
    reap_killed();
    if (!letters_.empty()) {
      core_->on_letter_written(letters_.front(), world_.now);
      letters_.erase(letters_.begin());
    }
    for (auto& [id, w] : world_.workers) w.silent = false;
    std::vector<core::WorkerId> alive;
    for (auto& [id, w] : world_.workers) {
      if (w.alive) alive.push_back(id);
    }
    for (core::WorkerId id : alive) {
      SimWorker& w = world_.workers.at(id);
      if (w.alive && !w.killed) work(id, w, true);
    }
    advance(50);
  }

  std::string describe() {
    const PoolStats st = core_->stats();
    std::ostringstream os;
    os << "state " << st.state << ", workers " << st.workers << "/" << st.target_workers
       << ", queued " << st.queued << ", in flight " << st.in_flight << ", retry_wait "
       << st.retry_wait << ", letters " << st.letters_pending << ", throttled " << st.throttled
       << ", scheduled " << st.scheduled << ", next deadline in "
       << (core_->next_deadline() - world_.now) / kOneMs << " ms; core workers:";
    for (const WorkerInfo& w : core_->workers(world_.now)) {
      os << " [" << w.pid << " " << w.state << " ring " << w.in_flight << "]";
    }
    os << "; opts max_payload " << opts_.max_payload << ", spawn limit " << spawn_limit_;
    os << "; sim:";
    for (const auto& [id, w] : world_.workers) {
      if (!w.alive) continue;
      os << " [" << w.pid << (w.ready_sent ? " ready" : " starting") << (w.stop ? " stop" : "")
         << (w.killed ? " killed" : "") << " ring " << w.ring.size() << " cap "
         << world_.payload_limit_at_spawn.at(id) << "]";
    }
    if (std::getenv("SANDPOOL_MODEL_TRACE") != nullptr) {
      os << "\ntrace:";
      for (const std::string& t : trace_) os << "\n  " << t;
    }
    return os.str();
  }

  void check() {
    const PoolStats s = core_->stats();
    MODEL_CHECK(admitted_.load() == s.queued + s.scheduled,
                "admission count " << admitted_.load() << " but " << s.queued << " queued and "
                                   << s.scheduled << " scheduled");
    std::size_t open = 0;
    std::map<std::string, std::size_t> waiting;  // counted tasks still admitted, by tenant
    std::size_t scheduled = 0;
    for (const auto& [id, t] : tasks_) {
      const TaskState st = t.rec->state.load();
      const bool done = t.rec->done.load() == 1;
      MODEL_CHECK(t.ended <= 1, "task " << id << " ended twice");
      MODEL_CHECK(done == is_terminal(st), "task " << id << " done flag and state disagree");
      MODEL_CHECK(done == (t.ended == 1), "task " << id << " done without its on_done");
      if (done) continue;
      ++open;
      if (t.rec->tenant_counted && t.rec->admitted) ++waiting[t.rec->opts.tenant()];
      if (st == TaskState::kScheduled && !t.rec->decided) {  // not ended, awaiting its letter
        ++scheduled;
        // Never late: the core queues a scheduled task at the first tick at or after its due
        // time, and the model ticks whenever the clock passes next_deadline().
        MODEL_CHECK(world_.due_ms.count(id) == 1 && world_.now / kOneMs < world_.due_ms.at(id),
                    "task " << id << " still scheduled past its not_before");
      }
      // Every open task is somewhere the core will get back to: found by id (queue, retry
      // heap, a ring, a backlog, or waiting for its letter), never stranded.
      MODEL_CHECK(core_->find_task(id) == t.rec, "open task " << id << " is nowhere");
    }
    if (auto cap = opts_.flow.type_concurrency.find("echo");
        cap != opts_.flow.type_concurrency.end()) {
      // Ring entries: the cap bounds them, except those dispatched before a reconfigure set it.
      MODEL_CHECK(s.in_flight <= cap->second || reconfigured_flow_,
                  s.in_flight << " echo tasks in the rings, over the cap of " << cap->second);
    }
    MODEL_CHECK(scheduled == s.scheduled,
                scheduled << " tasks scheduled but stats say " << s.scheduled);
    for (const char* tenant : {"", "a", "b", "c"}) {
      MODEL_CHECK(tenant_counts_.waiting(tenant) == waiting[tenant],
                  "tenant '" << tenant << "' counted " << tenant_counts_.waiting(tenant)
                             << " waiting, but " << waiting[tenant] << " are");
    }
    MODEL_CHECK(fn_broken_.empty(), fn_broken_);
    MODEL_CHECK(core_->idle() == (open == 0),
                "idle() says " << core_->idle() << " with " << open << " open tasks");
    MODEL_CHECK(s.letters_pending == letters_.size(), "letters pending disagree");
    if (autoscale_) {
      MODEL_CHECK(s.target_workers >= opts_.worker_bounds.min &&
                      s.target_workers <= opts_.worker_bounds.max,
                  "target " << s.target_workers << " outside the bounds");
    }
  }

  void trace(const std::string& what) {
    if (trace_.size() >= 80) trace_.pop_front();
    trace_.push_back(std::to_string((world_.now / kOneMs) % 100000) + " " + what);
  }

  World world_;
  std::deque<std::string> trace_;
  std::uint64_t seed_;
  PoolOptions opts_;
  std::atomic<std::size_t> admitted_{0};
  core::TenantCounts tenant_counts_;
  bool reconfigured_flow_ = false;  // entries dispatched before may exceed a new cap
  std::string fn_broken_;           // what the dispatch function found broken (it cannot throw it)
  bool autoscale_ = false;
  std::int64_t last_autoscale_up_ns_ = INT64_MIN / 4;
  std::unique_ptr<core::PoolCore> core_;
  std::map<std::uint64_t, Task> tasks_;
  std::vector<std::uint64_t> letters_;
  bool durable_letters_ = false;
  std::uint64_t next_id_ = 1;
  std::uint64_t spawn_limit_ = 64;
};

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

}  // namespace

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::uint64_t kDefaultSchedules = 250;
#else
constexpr std::uint64_t kDefaultSchedules = 2000;
#endif

TEST_CASE("random schedules never strand, duplicate or wedge a task (model test)") {
  const std::uint64_t schedules = env_u64("SANDPOOL_MODEL_SCHEDULES", kDefaultSchedules);
  const std::uint64_t first_seed = env_u64("SANDPOOL_MODEL_SEED", 1);
  const int steps = static_cast<int>(env_u64("SANDPOOL_MODEL_STEPS", 300));
  std::uint64_t failures = 0;
  std::map<std::string, std::uint64_t> kinds;  // each kind of failure, with its first seed
  for (std::uint64_t seed = first_seed; seed < first_seed + schedules; ++seed) {
    try {
      Model(seed).run(steps);
    } catch (const Broken& e) {
      ++failures;
      kinds.try_emplace(e.what(), seed);
    }
  }
  std::string report;
  for (const auto& [what, seed] : kinds) {
    report += "seed " + std::to_string(seed) + ": " + what +
              " (rerun: SANDPOOL_MODEL_SEED=" + std::to_string(seed) +
              " SANDPOOL_MODEL_SCHEDULES=1)\n";
  }
  INFO(report);
  CHECK(failures == 0);
}
