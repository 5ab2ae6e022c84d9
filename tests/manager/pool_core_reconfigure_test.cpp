// PoolCore::reconfigure and worker slots, hand-driven: a new launch spec rolls the workers
// one at a time without failing or dropping a task; other changes apply in place; a
// replacement inherits its predecessor's slot and counts the slot's restarts.
#include <catch2/catch.hpp>

#include <csignal>

#include "pool_core_harness.hpp"

namespace sandpool::testing {
namespace {

using core::TaskPtr;

WorkerInfo info_of(Harness& h, core::WorkerId id) {
  const std::int32_t pid = h.ctl.pid(id);
  for (const WorkerInfo& w : h.core->workers(h.now)) {
    if (w.pid == pid) return w;
  }
  FAIL("no worker with pid " << pid);
  return {};
}

// Answers every task sent to worker `w` and not answered yet, including those the answers
// let in, until it gets no more.
void serve(Harness& h, core::WorkerId w, std::size_t& answered) {
  while (answered < h.ctl.workers[w].ring.size()) {
    const std::uint64_t id = h.ctl.workers[w].ring[answered++];
    REQUIRE(h.result(w, id, ipc::TaskStatus::kOk));
  }
}

TEST_CASE("a new launch spec replaces every worker one at a time, keeping every task") {
  Harness h;
  h.ready_all();
  std::vector<TaskPtr> tasks;
  for (int i = 0; i < 6; ++i) tasks.push_back(h.submit());  // 2 rings of 2, 2 queued
  CHECK(h.core->stats().queued == 2);

  h.core->reconfigure(h.opts, /*replace_workers=*/true, h.now);
  CHECK(h.core->rolling_restart());
  // Worker 1 drains (its ring first) while one replacement starts; worker 2 keeps serving.
  REQUIRE(h.ctl.spawned.size() == 3);
  CHECK_FALSE(h.ctl.workers[1].stop_sent);
  CHECK_FALSE(h.ctl.workers[2].stop_sent);
  std::size_t answered1 = 0, answered2 = 0;
  serve(h, 1, answered1);
  CHECK(answered1 == 2);
  CHECK(h.ctl.workers[1].stop_sent);
  h.exit(1, ExitStatus{true, 0, 0});
  CHECK_FALSE(h.ctl.workers[2].stop_sent);  // not before worker 3 is ready
  serve(h, 2, answered2);                   // its ring, then the queued tasks
  CHECK(answered2 == 4);
  h.core->on_ready(3, h.now);
  CHECK(h.ctl.workers[2].stop_sent);  // idle now, so stopped at once
  REQUIRE(h.ctl.spawned.size() == 4);
  h.exit(2, ExitStatus{true, 0, 0});
  h.core->on_ready(4, h.now);
  CHECK_FALSE(h.core->rolling_restart());
  CHECK(h.ctl.spawned.size() == 4);  // the new workers are not replaced again

  for (const auto& t : tasks) CHECK(t->state == TaskState::kCompleted);
  CHECK(h.core->stats().restarts == 0);
  CHECK(h.core->stats().workers == 2);
}

TEST_CASE("reconfigure without a new launch spec scales and switches strategy in place") {
  Harness h;
  h.ready_all();
  auto accepted = h.submit();
  PoolOptions next = h.opts;
  next.workers = 3;
  next.dispatch = DispatchStrategy::kLeastLoaded;
  next.timeout = 5000ms;
  h.core->reconfigure(next, /*replace_workers=*/false, h.now);
  CHECK_FALSE(h.core->rolling_restart());
  CHECK(h.ctl.spawned.size() == 3);  // one more, nobody replaced
  for (auto& [id, w] : h.ctl.workers) CHECK_FALSE(w.stop_sent);
  CHECK(h.core->stats().target_workers == 3);
  auto later = h.submit();
  CHECK(later->timeout_ns() == 5000 * kMs);     // new tasks get the new default
  CHECK(accepted->timeout_ns() == 1000 * kMs);  // accepted ones keep theirs

  next.workers = 1;
  h.core->reconfigure(next, false, h.now);
  CHECK(h.core->stats().target_workers == 1);
}

TEST_CASE("lower record bounds on reconfigure evict the oldest finished records at once") {
  Harness h;
  h.ready_all();
  std::vector<TaskPtr> done;
  for (int i = 0; i < 3; ++i) {
    auto t = h.submit();
    REQUIRE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kOk));
    done.push_back(t);
  }
  CHECK(h.core->find_task(done[0]->id) != nullptr);
  PoolOptions next = h.opts;
  next.task_records_max = 1;
  h.core->reconfigure(next, false, h.now);
  CHECK(h.core->find_task(done[0]->id) == nullptr);
  CHECK(h.core->find_task(done[1]->id) == nullptr);
  CHECK(h.core->find_task(done[2]->id) == done[2]);
}

TEST_CASE("a replacement takes its predecessor's slot and counts that slot's restarts") {
  Harness h;
  h.ready_all();
  CHECK(info_of(h, 1).slot == 0);
  CHECK(info_of(h, 2).slot == 1);
  CHECK(info_of(h, 1).restarts == 0);

  h.exit(1, ExitStatus{false, 0, SIGKILL});  // a crash: replaced at once
  REQUIRE(h.ctl.spawned.size() == 3);
  CHECK(info_of(h, 3).slot == 0);
  CHECK(info_of(h, 3).restarts == 1);
  CHECK(info_of(h, 2).restarts == 0);  // the other slot is untouched

  // A graceful replacement (a rolling restart) counts too. Worker 2 goes first (lowest
  // id); while it stops, it and its replacement share slot 1.
  h.core->on_ready(3, h.now);
  h.core->restart_workers(true, h.now);
  CHECK(h.ctl.workers[2].stop_sent);
  REQUIRE(h.ctl.spawned.size() == 4);
  CHECK(info_of(h, 2).slot == 1);
  CHECK(info_of(h, 4).slot == 1);
  CHECK(info_of(h, 4).restarts == 1);
  h.exit(2, ExitStatus{true, 0, 0});
  h.core->on_ready(4, h.now);  // then worker 3, in slot 0, whose third worker this is
  REQUIRE(h.ctl.spawned.size() == 5);
  CHECK(info_of(h, 5).slot == 0);
  CHECK(info_of(h, 5).restarts == 2);
}

}  // namespace
}  // namespace sandpool::testing
