// The pool core with a custom dispatch function (PoolOptions::dispatch_function) and the
// built-ins least-rss and by-key, driven by hand through a FakeWorkerControl.
#include <catch2/catch.hpp>

#include <csignal>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "pool_core_harness.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::Harness;
using sandpool::testing::kMs;

namespace {

// Harness options with a dispatch function, three workers of concurrency 2.
PoolOptions custom_dispatch_options(DispatchFunction fn) {
  PoolOptions o = Harness::defaults();
  o.workers = 3;
  o.dispatch_function = std::move(fn);
  return o;
}

}  // namespace

TEST_CASE("a dispatch function sees the workers and the task and picks the worker") {
  std::vector<WorkerView> seen;
  TaskView task;
  std::string tenant, key, type;
  Harness h(custom_dispatch_options(
      [&](std::span<const WorkerView> workers, const TaskView& t) -> std::optional<std::size_t> {
        seen.assign(workers.begin(), workers.end());
        task = t;
        tenant = t.tenant;
        key = t.key;
        type = t.type;
        return workers.size() - 1;  // always the last
      }));
  h.ctl.workers[2].rss = 5u << 20;
  h.ready_all();
  h.advance(300ms);  // a sweep samples the RSS; uptime 300 ms
  SubmitOptions so;
  so.tenant = "acme";
  so.key = "user-7";
  so.priority = 2;
  auto t = h.submit(so);
  REQUIRE(seen.size() == 3);
  CHECK(h.holder(t->id) == seen.back().id);
  CHECK(tenant == "acme");
  CHECK(key == "user-7");
  CHECK(type == "echo");
  CHECK(task.payload_bytes == 1);
  CHECK(task.priority == 2);
  CHECK(task.attempt == 1);
  int homes = 0;
  for (const WorkerView& v : seen) {
    CHECK(v.ready);
    CHECK(v.capacity == 2);
    CHECK(v.in_flight == 0);
    CHECK(v.uptime >= 300ms);
    homes += v.key_home ? 1 : 0;
    if (v.id == 2) CHECK(v.rss_bytes == 5u << 20);
  }
  CHECK(homes == 1);  // the key has exactly one affinity home
  auto u = h.submit();
  CHECK(seen.back().in_flight == 1);  // the last worker holds t
  CHECK(h.holder(u->id) == seen.back().id);
  CHECK(h.core->metrics().dispatch_function.calls == 2);
  CHECK(h.core->metrics().dispatch_function.errors == 0);
}

TEST_CASE("a dispatch function that says queue it leaves the task queued until asked again") {
  bool hold = true;
  Harness h(custom_dispatch_options(
      [&](std::span<const WorkerView>, const TaskView&) -> std::optional<std::size_t> {
        if (hold) return std::nullopt;
        return 0;
      }));
  h.ready_all();
  auto t = h.submit();
  CHECK(t->state == TaskState::kQueued);
  CHECK(h.core->stats().queued == 1);
  hold = false;
  h.advance(300ms);  // the next tick asks again
  CHECK(t->state == TaskState::kDispatched);
  CHECK(h.holder(t->id) == 1);
}

TEST_CASE(
    "a dispatch function that throws is contained: the built-in strategy chooses, counted and "
    "logged once per 10 s") {
  int calls = 0;
  Harness h(custom_dispatch_options(
      [&](std::span<const WorkerView>, const TaskView&) -> std::optional<std::size_t> {
        ++calls;
        throw std::runtime_error("no idea");
      }));
  std::vector<std::string> logs;
  h.core->set_log([&](int, const std::string& text) { logs.push_back(text); });
  h.ready_all();
  std::vector<core::TaskPtr> tasks;
  for (int i = 0; i < 3; ++i) tasks.push_back(h.submit());
  for (const auto& t : tasks) CHECK(t->state == TaskState::kDispatched);
  // Round-robin, the pool's built-in: one task per worker.
  CHECK(h.holder(tasks[0]->id) != h.holder(tasks[1]->id));
  CHECK(h.holder(tasks[1]->id) != h.holder(tasks[2]->id));
  CHECK(calls == 3);
  const auto m = h.core->metrics().dispatch_function;
  CHECK(m.calls == 3);
  CHECK(m.errors == 3);
  REQUIRE(logs.size() == 1);
  CHECK(logs[0].find("dispatch function threw: no idea") != std::string::npos);
  CHECK(logs[0].find("round-robin chose instead") != std::string::npos);
  for (const auto& t : tasks) REQUIRE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kOk));
  h.advance(10001ms);
  h.submit();
  REQUIRE(logs.size() == 2);
  CHECK(logs[1].find("and 2 more since the last such line") != std::string::npos);
}

TEST_CASE(
    "a dispatch function that names a busy, starting or missing worker gets the built-in's "
    "choice") {
  std::size_t answer = 0;
  PoolOptions o = custom_dispatch_options(
      [&](std::span<const WorkerView>, const TaskView&) -> std::optional<std::size_t> {
        return answer;
      });
  o.concurrency = 1;
  Harness h(o);
  h.core->on_ready(1, h.now);
  h.core->on_ready(2, h.now);  // worker 3 still starting
  auto a = h.submit();
  CHECK(h.holder(a->id) == 1);
  auto b = h.submit();  // worker 1 is full now: the built-in picks worker 2
  CHECK(h.holder(b->id) == 2);
  CHECK(h.core->metrics().dispatch_function.invalid == 1);
  h.result(1, a->id, ipc::TaskStatus::kOk);
  answer = 2;  // the starting one
  auto c = h.submit();
  CHECK(h.holder(c->id) == 1);
  answer = 7;  // out of range
  h.result(1, c->id, ipc::TaskStatus::kOk);
  auto d = h.submit();
  CHECK(h.holder(d->id) == 1);
  CHECK(h.core->metrics().dispatch_function.invalid == 3);
  CHECK(h.core->metrics().dispatch_function.errors == 0);
}

TEST_CASE("a slow dispatch function call is timed, counted and logged") {
  Harness* self = nullptr;
  PoolOptions o = custom_dispatch_options(
      [&](std::span<const WorkerView>, const TaskView& t) -> std::optional<std::size_t> {
        self->ctl.elapsed_clock_ns += t.id == 1 ? 5'000'000 : 100'000;  // 5 ms, then 100 us
        return 0;
      });
  o.dispatch_function_slow = 1000us;
  Harness h(o);
  self = &h;
  std::vector<std::string> logs;
  h.core->set_log([&](int, const std::string& text) { logs.push_back(text); });
  h.ready_all();
  h.submit();
  h.submit();
  const auto m = h.core->metrics().dispatch_function;
  CHECK(m.calls == 2);
  CHECK(m.slow == 1);
  CHECK(m.time.count() == 2);
  CHECK(m.time.sum_ns() == 5'100'000);
  REQUIRE(logs.size() == 1);
  CHECK(logs[0].find("dispatch function took 5000 us") != std::string::npos);
}

TEST_CASE("least-rss sends tasks to the worker with the smallest RSS, sampled by the sweep") {
  PoolOptions o = Harness::defaults();
  o.workers = 3;
  o.concurrency = 4;
  o.dispatch = DispatchStrategy::kLeastRss;
  Harness h(o);
  h.ctl.workers[1].rss = 300u << 20;
  h.ctl.workers[2].rss = 100u << 20;
  h.ctl.workers[3].rss = 200u << 20;
  h.ready_all();  // sampled when ready
  auto a = h.submit();
  CHECK(h.holder(a->id) == 2);
  h.ctl.workers[2].rss = 900u << 20;  // grows: seen at the next sweep, not before
  auto b = h.submit();
  CHECK(h.holder(b->id) == 2);
  h.advance(300ms);
  auto c = h.submit();
  CHECK(h.holder(c->id) == 3);
}

TEST_CASE("by-key keeps a key on its slot across a worker's replacement") {
  PoolOptions o = Harness::defaults();
  o.workers = 3;
  o.concurrency = 4;
  o.dispatch = DispatchStrategy::kByKey;
  Harness h(o);
  h.ready_all();
  SubmitOptions so;
  so.key = "user-7";
  auto a = h.submit(so);
  const core::WorkerId home = h.holder(a->id);
  REQUIRE(home != 0);
  REQUIRE(h.result(home, a->id, ipc::TaskStatus::kOk));
  h.exit(home, ExitStatus{false, 0, SIGKILL});  // replaced in the same slot
  const core::WorkerId replacement = h.ctl.spawned.back();
  REQUIRE(replacement != home);
  auto b = h.submit(so);  // the replacement is starting: the key's next worker takes it
  CHECK(h.holder(b->id) != 0);
  CHECK(h.holder(b->id) != replacement);
  h.core->on_ready(replacement, h.now);
  auto c = h.submit(so);
  CHECK(h.holder(c->id) == replacement);
}

// The loop's batches (PoolCore::begin_batch): nothing is sent before end_batch(). A batch of
// submits goes to the workers the core would have chosen submit by submit, for each strategy
// that chooses among the workers with room only; a batch of results frees its slots
// together, so the queued tasks go out in queue order to workers with room.
TEST_CASE("a batch of submits or results is dispatched once at its end") {
  const DispatchStrategy strategy =
      GENERATE(DispatchStrategy::kRoundRobin, DispatchStrategy::kLeastLoaded,
               DispatchStrategy::kRandom, DispatchStrategy::kLeastRss, DispatchStrategy::kByKey);
  PoolOptions o = Harness::defaults();
  o.workers = 4;
  o.concurrency = 3;
  o.dispatch = strategy;
  Harness each(o), batched(o);
  each.ready_all();
  batched.ready_all();
  auto keyed = [](int i) {
    SubmitOptions so;
    so.key = "k" + std::to_string(i % 5);
    return so;
  };
  // 16 submits for 12 slots: 4 stay queued.
  for (int i = 0; i < 16; ++i) each.submit(keyed(i));
  batched.core->begin_batch();
  for (int i = 0; i < 16; ++i) batched.submit(keyed(i));
  CHECK(batched.ctl.sends.empty());
  batched.core->end_batch(batched.now);
  REQUIRE(each.ctl.sends.size() == 12);
  CHECK(batched.ctl.sends == each.ctl.sends);
  // Five results, from the workers' fronts: the queued four go out at the batch's end.
  const std::vector<std::pair<core::WorkerId, std::uint64_t>> done(batched.ctl.sends.begin(),
                                                                   batched.ctl.sends.begin() + 5);
  batched.core->begin_batch();
  for (const auto& [w, id] : done) REQUIRE(batched.result(w, id, ipc::TaskStatus::kOk));
  CHECK(batched.ctl.sends.size() == 12);
  batched.core->end_batch(batched.now);
  REQUIRE(batched.ctl.sends.size() == 16);
  std::map<core::WorkerId, int> in_ring;
  for (const auto& [w, id] : batched.ctl.sends) ++in_ring[w];
  for (const auto& [w, id] : done) --in_ring[w];
  for (const auto& [w, n] : in_ring) CHECK(n <= 3);
  for (std::size_t i = 12; i < 16; ++i) CHECK(batched.ctl.sends[i].second == 13 + (i - 12));
  CHECK(batched.core->stats().completed == 5);
}
