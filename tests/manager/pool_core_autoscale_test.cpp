// The autoscaler in the pool core (AutoscalePolicy), driven by hand: queue wait up, idle
// workers down, cooldowns, min 0 on demand, crash_loop, and a manual scale in between.
#include <catch2/catch.hpp>

#include <csignal>
#include <string>
#include <vector>

#include "pool_core_harness.hpp"

using namespace sandpool;
using namespace sandpool::testing;

namespace {

struct ScaledEvent {
  std::uint32_t workers;
  std::string why;
};

// An autoscaled pool: 1..4 workers, target wait 50 ms, a step of 1, cooldown 200 ms, idle
// timeout 1 s; one task per worker at a time, so that tasks wait in the queue.
PoolOptions autoscaled_options(std::vector<ScaledEvent>* events) {
  PoolOptions o = Harness::defaults();
  o.workers = 1;
  o.concurrency = 1;
  o.worker_bounds = {1, 4};
  o.autoscale.enabled = true;
  o.autoscale.target_queue_wait = 50ms;
  o.autoscale.scale_up_step = 1;
  o.autoscale.cooldown = 200ms;
  o.autoscale.idle_timeout = 1000ms;
  o.on_event = [events](const PoolEvent& e) {
    if (e.kind == PoolEvent::Kind::kScaled) events->push_back({e.workers, std::string(e.detail)});
  };
  return o;
}

// Every worker answers the task at the front of its ring.
void autoscale_answer_all(Harness& h) {
  for (auto& [id, fw] : h.ctl.workers) {
    if (fw.gone || fw.ring.empty()) continue;
    const std::uint64_t task = fw.ring.front();
    fw.ring.erase(fw.ring.begin());
    h.result(id, task, ipc::TaskStatus::kOk);
  }
}

std::size_t autoscale_live_workers(Harness& h) {
  std::size_t n = 0;
  for (const WorkerInfo& w : h.core->workers(h.now)) {
    if (w.state == "starting" || w.state == "idle" || w.state == "busy") ++n;
  }
  return n;
}

// Workers asked to stop exit.
void autoscale_reap_stopped(Harness& h) {
  for (auto& [id, fw] : h.ctl.workers) {
    if (!fw.gone && (fw.stop_sent || fw.killed)) h.exit(id, ExitStatus{true, 0, 0});
  }
}

}  // namespace

TEST_CASE("an autoscaled pool adds a worker once the queue wait passes its target") {
  std::vector<ScaledEvent> events;
  Harness h(autoscaled_options(&events));
  h.ready_all();
  for (int i = 0; i < 8; ++i) h.submit();
  h.run_for(40ms);
  CHECK(h.core->stats().target_workers == 1);  // 40 ms waited: under the target
  h.run_for(30ms);
  REQUIRE(h.core->stats().target_workers == 2);
  REQUIRE(events.size() == 1);
  CHECK(events[0].workers == 2);
  CHECK(events[0].why.find("queue wait") != std::string::npos);
  CHECK(h.core->stats().target_reason == events[0].why);
  CHECK(h.ctl.spawned.size() == 2);
  // While the new worker starts no further step, however long the wait.
  h.run_for(300ms);
  CHECK(h.core->stats().target_workers == 2);
  h.ready_all();
  h.run_for(20ms);  // the cooldown (200 ms) is over and the queue still waits
  CHECK(h.core->stats().target_workers == 3);
  h.ready_all();
  h.run_for(100ms);  // within the cooldown of the last step
  CHECK(h.core->stats().target_workers == 3);
  h.run_for(200ms);
  CHECK(h.core->stats().target_workers == 4);
  h.ready_all();
  h.run_for(1000ms);  // workers.max
  CHECK(h.core->stats().target_workers == 4);
  CHECK(events.size() == 3);
}

TEST_CASE("idle autoscaled workers are retired after idle_timeout, down to workers.min") {
  std::vector<ScaledEvent> events;
  PoolOptions o = autoscaled_options(&events);
  o.workers = 3;
  Harness h(o);
  h.ready_all();
  h.submit();
  h.run_for(990ms);
  CHECK(h.core->stats().target_workers == 3);
  autoscale_answer_all(h);  // the worker that ran it was busy until now
  h.run_for(30ms);
  CHECK(h.core->stats().target_workers == 1);  // the two idle ones, at once
  REQUIRE(events.size() == 1);
  CHECK(events[0].why.find("idle") != std::string::npos);
  autoscale_reap_stopped(h);
  CHECK(autoscale_live_workers(h) == 1);
  h.run_for(2000ms);  // the one left is idle too, but min is 1
  CHECK(h.core->stats().target_workers == 1);
}

TEST_CASE("a pool with workers.min 0 starts a worker for its first task and retires it idle") {
  std::vector<ScaledEvent> events;
  PoolOptions o = autoscaled_options(&events);
  o.workers = 0;
  o.worker_bounds = {0, 4};
  Harness h(o);
  CHECK(h.ctl.spawned.empty());
  auto t = h.submit();
  REQUIRE(h.ctl.spawned.size() == 1);  // at once, not a target wait later
  CHECK(h.core->stats().target_workers == 1);
  h.ready_all();
  REQUIRE(h.holder(t->id) != 0);
  autoscale_answer_all(h);
  CHECK(t->state.load() == TaskState::kCompleted);
  h.run_for(990ms);
  CHECK(h.core->stats().target_workers == 1);
  h.run_for(30ms);
  CHECK(h.core->stats().target_workers == 0);
  CHECK(h.ctl.workers[1].stop_sent);
  REQUIRE(events.size() == 2);
  CHECK(events[1].workers == 0);
}

TEST_CASE("a pool in crash_loop does not scale up") {
  std::vector<ScaledEvent> events;
  PoolOptions o = autoscaled_options(&events);
  o.max_restarts = 1;
  o.restart_window = 10000ms;
  o.stable_after = 60000ms;
  Harness h(o);
  h.ready_all();
  for (int i = 0; i < 3; ++i) {  // three crashes of an idle worker: crash_loop
    const core::WorkerId w = h.ctl.spawned.back();
    h.exit(w, ExitStatus{false, 0, SIGSEGV});
    h.run_for(2000ms);
    h.ready_all();
  }
  REQUIRE(h.core->stats().crash_loop);
  for (int i = 0; i < 8; ++i) h.submit();
  h.run_for(1000ms);
  CHECK(h.core->stats().target_workers == 1);
  CHECK(events.empty());
}

TEST_CASE("a manual scale sets the target within min..max and the autoscaler goes on from it") {
  std::vector<ScaledEvent> events;
  Harness h(autoscaled_options(&events));
  h.ready_all();
  h.core->scale(9, h.now);
  CHECK(h.core->stats().target_workers == 4);  // workers.max
  CHECK(h.core->stats().target_reason == "scaled to 4");
  h.ready_all();
  h.run_for(1300ms);  // all idle: back to min after idle_timeout
  CHECK(h.core->stats().target_workers == 1);
  h.core->scale(0, h.now);
  CHECK(h.core->stats().target_workers == 1);  // workers.min
}
