// PoolCore driven by hand: the tests play the workers through a FakeWorkerControl and move
// the clock themselves, so every scheduling decision is checked without a process.
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "core/pool_core.hpp"
#include "pool_core_harness.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::core::PoolCore;
using sandpool::core::TaskPtr;
using sandpool::core::TaskRecord;
using sandpool::testing::account;
using sandpool::testing::FakeWorkerControl;
using sandpool::testing::Harness;
using sandpool::testing::kMs;

TEST_CASE("a pool starts the configured number of workers and dispatches once they are ready") {
  Harness h;
  CHECK(h.ctl.spawned.size() == 2);
  auto t = h.submit();
  CHECK(t->state == TaskState::kQueued);  // nobody ready yet
  h.ready_all();
  CHECK(t->state == TaskState::kDispatched);
  CHECK(h.admitted == 0);
  REQUIRE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kOk, "P"));
  CHECK(t->state == TaskState::kCompleted);
  CHECK(t->done == 1);
  auto a = account(t);
  CHECK(a.result == "P");
  REQUIRE(a.history.size() == 1);
  CHECK(a.history[0].outcome == Outcome::kOk);
  CHECK(h.core->idle());
}

TEST_CASE("no worker holds more tasks in its ring than the pool's concurrency") {
  Harness h;
  h.ready_all();
  for (int i = 0; i < 10; ++i) h.submit();
  for (auto& [w, fw] : h.ctl.workers) CHECK(fw.ring.size() == 2);
  CHECK(h.core->stats().queued == 6);
  CHECK(h.admitted == 6);
}

TEST_CASE("a crash mid-task retries that task and requeues the unstarted ones without an attempt") {
  Harness h;
  h.ready_all();
  auto a = h.submit();
  auto b = h.submit();
  auto c = h.submit();
  const auto w = h.holder(a->id);
  REQUIRE(h.holder(c->id) == w);  // round-robin: a and c share a worker
  h.ctl.workers[w].started = a->id;
  h.exit(w, ExitStatus{false, 0, SIGSEGV});
  auto acc = account(a);
  REQUIRE(acc.history.size() == 1);
  CHECK(acc.history[0].outcome == Outcome::kLost);
  CHECK(acc.history[0].error.find("SIGSEGV") != std::string::npos);
  CHECK(account(c).history.empty());
  CHECK(h.ctl.spawned.size() == 3);  // replaced at once
  h.core->on_ready(h.ctl.spawned.back(), h.now);
  h.advance(0ms);
  // a is retried as attempt 2; c goes out again as attempt 1.
  const auto w2 = h.holder(a->id);
  REQUIRE(w2 != 0);
  auto& fw = h.ctl.workers[w2];
  auto pos = std::find(fw.ring.rbegin(), fw.ring.rend(), a->id) - fw.ring.rbegin();
  CHECK(fw.attempts[fw.attempts.size() - 1 - pos] == 2);
  CHECK(h.core->stats().restarts == 1);
  (void)b;
}

TEST_CASE("a task that always crashes is dead-lettered after retries+1 lost attempts") {
  Harness h;
  h.ready_all();
  auto t = h.submit();
  for (int attempt = 1; attempt <= 4; ++attempt) {
    h.advance(0ms);
    const auto w = h.holder(t->id);
    REQUIRE(w != 0);
    h.ctl.workers[w].started = t->id;
    h.exit(w, ExitStatus{false, 0, SIGSEGV});
    h.core->on_ready(h.ctl.spawned.back(), h.now);
  }
  CHECK(t->state == TaskState::kDeadLettered);
  auto a = account(t);
  CHECK(a.reason == DeadReason::kRetriesExhausted);
  CHECK(a.history.size() == 4);
  for (auto& at : a.history) CHECK(at.outcome == Outcome::kLost);
  REQUIRE(h.core->dead_letters().size() == 1);
  CHECK(h.core->dead_letters().front().id == t->id);
}

TEST_CASE("SP_FAIL is permanent: dead-lettered after one attempt") {
  Harness h;
  h.ready_all();
  auto t = h.submit();
  REQUIRE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kFail));
  CHECK(t->state == TaskState::kDeadLettered);
  CHECK(account(t).reason == DeadReason::kPermanent);
  CHECK(account(t).history.size() == 1);
  CHECK(account(t).history[0].outcome == Outcome::kFailed);
}

TEST_CASE("SP_RETRY waits out the backoff before the next attempt") {
  PoolOptions o = Harness::defaults();
  o.retry.base = 100ms;
  Harness h(o);
  h.ready_all();
  auto t = h.submit();
  REQUIRE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kRetry));
  CHECK(t->state == TaskState::kRetryWait);
  CHECK(h.core->next_deadline() <= h.now + 100 * kMs);
  h.advance(101ms);
  CHECK(t->state == TaskState::kDispatched);
  REQUIRE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kOk));
  CHECK(account(t).history.size() == 2);
  CHECK(account(t).history[0].outcome == Outcome::kError);
}

TEST_CASE("SP_LIMIT ends the attempt as resource_limit with the handler's text, and retries it") {
  PoolOptions o = Harness::defaults();
  o.retry.base = 100ms;
  Harness h(o);
  h.ready_all();
  auto t = h.submit();
  const auto w = h.holder(t->id);
  REQUIRE(h.result(w, t->id, ipc::TaskStatus::kLimit));
  CHECK(t->state == TaskState::kRetryWait);
  CHECK_FALSE(h.ctl.workers[w].killed);  // the worker stopped the handler itself: it stays
  REQUIRE(account(t).history.size() == 1);
  CHECK(account(t).history[0].outcome == Outcome::kResourceLimit);
  CHECK(account(t).history[0].error == "handler said no");
  h.advance(101ms);
  CHECK(t->state == TaskState::kDispatched);
}

TEST_CASE("a running task past its timeout kills its worker and is retried as timed_out") {
  Harness h;
  h.ready_all();
  auto t = h.submit();
  const auto w = h.holder(t->id);
  h.ctl.workers[w].started = t->id;
  h.advance(999ms);
  CHECK_FALSE(h.ctl.workers[w].killed);
  h.advance(2ms);
  CHECK(h.ctl.workers[w].killed);
  h.exit(w, ExitStatus{false, 0, SIGKILL});
  auto a = account(t);
  REQUIRE(a.history.size() == 1);
  CHECK(a.history[0].outcome == Outcome::kTimedOut);
  CHECK(t->state == TaskState::kRetryWait);
}

TEST_CASE("a task that times out waiting in a ring is withdrawn without killing the worker") {
  Harness h;
  h.ready_all();
  SubmitOptions quick;
  quick.timeout = 10ms;
  auto slow = h.submit();
  auto other = h.submit();  // goes to the second worker
  auto waiting = h.submit(quick);
  const auto w = h.holder(waiting->id);
  REQUIRE(w == h.holder(slow->id));
  h.ctl.workers[w].started = slow->id;
  h.advance(20ms);
  CHECK_FALSE(h.ctl.workers[w].killed);
  CHECK(h.ctl.workers[w].cancels == std::vector<std::uint64_t>{waiting->id});
  CHECK(account(waiting).history.at(0).outcome == Outcome::kTimedOut);
  // The worker's acknowledgement of the withdrawn task is accepted and ignored.
  CHECK(h.result(w, waiting->id, ipc::TaskStatus::kCancelled));
  CHECK(waiting->state != TaskState::kCancelled);
  (void)other;
}

TEST_CASE("cancelling a queued task ends it at once") {
  Harness h;  // no worker ready: everything stays queued
  auto t = h.submit();
  CHECK(h.core->cancel(t, h.now));
  CHECK(t->state == TaskState::kCancelled);
  CHECK(account(t).cancel_reason == CancelReason::kUser);
  CHECK(h.admitted == 0);
  CHECK_FALSE(h.core->cancel(t, h.now));
}

TEST_CASE("a running task asked to cancel that ignores it is killed after the grace period") {
  Harness h;
  h.ready_all();
  auto t = h.submit();
  const auto w = h.holder(t->id);
  h.ctl.workers[w].started = t->id;
  CHECK(h.core->cancel(t, h.now));
  CHECK(h.ctl.workers[w].cancels == std::vector<std::uint64_t>{t->id});
  h.advance(500ms);
  CHECK_FALSE(h.ctl.workers[w].killed);
  h.advance(600ms);
  CHECK(h.ctl.workers[w].killed);
  h.exit(w, ExitStatus{false, 0, SIGKILL});
  CHECK(t->state == TaskState::kCancelled);
}

TEST_CASE("a cancelled task that returns SP_OK before the kill is completed") {
  Harness h;
  h.ready_all();
  auto t = h.submit();
  const auto w = h.holder(t->id);
  h.ctl.workers[w].started = t->id;
  h.core->cancel(t, h.now);
  REQUIRE(h.result(w, t->id, ipc::TaskStatus::kOk, "made it"));
  CHECK(t->state == TaskState::kCompleted);
  h.advance(2000ms);
  CHECK_FALSE(h.ctl.workers[w].killed);
}

TEST_CASE("a result for a task that is not in flight on that worker is a protocol error") {
  Harness h;
  h.ready_all();
  auto t = h.submit();
  const auto w = h.holder(t->id);
  const auto other = w == 1 ? 2 : 1;
  CHECK_FALSE(h.result(other, t->id, ipc::TaskStatus::kOk));
  CHECK_FALSE(h.result(w, 999, ipc::TaskStatus::kOk));
  h.core->on_protocol_error(other, "result for a task not in flight");
  CHECK(h.ctl.workers[other].killed);
}

TEST_CASE("scaling down drains a worker before stopping it, scaling up spawns") {
  Harness h;
  h.ready_all();
  auto t = h.submit();
  const auto busy = h.holder(t->id);
  h.core->scale(1, h.now);
  // The idle worker is the one chosen, and it stops at once.
  const auto idle = busy == 1 ? 2 : 1;
  CHECK(h.ctl.workers[idle].stop_sent);
  CHECK_FALSE(h.ctl.workers[busy].stop_sent);
  h.exit(idle, ExitStatus{true, 0, 0});
  CHECK(h.ctl.spawned.size() == 2);  // a worker we stopped is not replaced
  h.core->scale(3, h.now);
  CHECK(h.ctl.spawned.size() == 4);
  CHECK(h.core->stats().restarts == 0);
}

TEST_CASE("a plugin whose init keeps failing puts the pool in failed and dead-letters its tasks") {
  PoolOptions o = Harness::defaults();
  o.workers = 1;
  o.max_init_failures = 3;
  Harness h(o);
  auto t = h.submit();
  for (int i = 0; i < 3; ++i) {
    const auto w = h.ctl.spawned.back();
    h.core->on_worker_error(w, "sp_plugin_init returned 7");
    h.exit(w, ExitStatus{true, 67, 0});
    h.advance(6000ms);  // past any respawn backoff
  }
  CHECK(h.core->failed());
  CHECK(h.core->failure().find("sp_plugin_init returned 7") != std::string::npos);
  CHECK(h.ctl.spawned.size() == 3);  // bounded: no restart storm
  CHECK(t->state == TaskState::kDeadLettered);
  CHECK(account(t).reason == DeadReason::kCrashLoop);
}

TEST_CASE("an init that never finishes is killed after init_timeout") {
  PoolOptions o = Harness::defaults();
  o.init_timeout = 200ms;
  Harness h(o);
  h.advance(201ms);
  for (auto id : h.ctl.spawned) CHECK(h.ctl.workers[id].killed);
}

TEST_CASE("close finishes accepted tasks, then stops every worker") {
  Harness h;
  h.ready_all();
  auto a = h.submit();
  auto b = h.submit();
  auto c = h.submit();
  h.core->close(h.now);
  for (auto& [w, fw] : h.ctl.workers) CHECK_FALSE(fw.stop_sent);
  for (auto t : {a, b, c}) {
    h.advance(0ms);
    REQUIRE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kOk));
  }
  for (auto& [w, fw] : h.ctl.workers) CHECK(fw.stop_sent);
  for (auto id : std::vector<core::WorkerId>(h.ctl.spawned)) h.exit(id, ExitStatus{true, 0, 0});
  CHECK(h.core->wound_down());
}

TEST_CASE("affinity tasks wait for their own worker while others keep flowing") {
  PoolOptions o = Harness::defaults();
  o.dispatch = DispatchStrategy::kAffinity;
  o.concurrency = 1;
  Harness h(o);
  h.ready_all();
  SubmitOptions keyed;
  keyed.key = "tenant-a";
  auto k1 = h.submit(keyed);
  auto k2 = h.submit(keyed);
  auto free = h.submit();
  const auto owner = h.holder(k1->id);
  CHECK(h.holder(k2->id) == 0);  // waits for owner
  CHECK(h.holder(free->id) != owner);
  REQUIRE(h.result(owner, k1->id, ipc::TaskStatus::kOk));
  CHECK(h.holder(k2->id) == owner);
}

TEST_CASE("affinity keeps a key for a worker that is still starting") {
  PoolOptions o = Harness::defaults();
  o.dispatch = DispatchStrategy::kAffinity;
  o.concurrency = 100;
  Harness h(o);
  h.core->on_ready(1, h.now);  // worker 2 still starting
  std::map<std::string, core::WorkerId> owner;
  std::vector<std::pair<std::string, TaskPtr>> tasks;
  for (int k = 0; k < 20; ++k) {
    SubmitOptions so;
    so.key = "key-" + std::to_string(k);
    tasks.emplace_back(so.key, h.submit(so));
  }
  h.core->on_ready(2, h.now);
  for (auto& [key, t] : tasks) owner[key] = h.holder(t->id);
  // Some keys waited for worker 2 rather than going to worker 1.
  CHECK(std::count_if(owner.begin(), owner.end(), [](auto& kv) { return kv.second == 2; }) > 0);
  for (auto& [key, t] : tasks) {
    REQUIRE(h.result(owner[key], t->id, ipc::TaskStatus::kOk));
    SubmitOptions so;
    so.key = key;
    auto again = h.submit(so);
    CHECK(h.holder(again->id) == owner[key]);
    REQUIRE(h.result(owner[key], again->id, ipc::TaskStatus::kOk));
  }
}

TEST_CASE("retry delays are spread over the whole backoff window (full jitter)") {
  PoolOptions o = Harness::defaults();
  o.retry.base = 100ms;
  o.concurrency = 100;
  Harness h(o);
  h.ready_all();
  std::vector<TaskPtr> tasks;
  for (int i = 0; i < 60; ++i) tasks.push_back(h.submit());
  for (auto& t : tasks) REQUIRE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kRetry));
  auto redispatched = [&] {
    return std::count_if(tasks.begin(), tasks.end(),
                         [](const TaskPtr& t) { return t->state == TaskState::kDispatched; });
  };
  CHECK(redispatched() == 0);
  h.advance(50ms);
  const auto half_way = redispatched();
  CHECK(half_way > 10);  // some came due early...
  CHECK(half_way < 50);  // ...and some are still waiting
  h.advance(51ms);
  CHECK(redispatched() == 60);  // none waits past the ceiling
}

TEST_CASE("a task is found by id while queued, in flight, waiting to retry and after it ended") {
  PoolOptions o = Harness::defaults();
  o.retry.base = 1000ms;
  o.timeout = 60s;
  o.task_records_max = 2;
  Harness h(o);
  auto t = h.submit();
  CHECK(h.core->find_task(t->id) == t);  // queued: nobody ready yet
  h.ready_all();
  CHECK(h.core->find_task(t->id) == t);  // in a worker's ring
  REQUIRE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kRetry));
  REQUIRE(t->state == TaskState::kRetryWait);
  CHECK(h.core->find_task(t->id) == t);
  h.run_for(1100ms);
  REQUIRE(t->state == TaskState::kDispatched);
  REQUIRE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kOk, "done"));
  REQUIRE(t->state == TaskState::kCompleted);
  CHECK(h.core->find_task(t->id) == t);  // ended, still kept
  for (int i = 0; i < 2; ++i) {
    auto u = h.submit();
    REQUIRE(h.result(h.holder(u->id), u->id, ipc::TaskStatus::kOk));
  }
  CHECK(h.core->find_task(t->id) == nullptr);  // pushed out by the two newer ones
  CHECK(h.core->find_task(12345) == nullptr);
}

TEST_CASE(
    "a rolling restart replaces one worker at a time, the next once its replacement is ready") {
  Harness h;
  h.ready_all();
  h.core->restart_workers(true, h.now);
  // Worker 1 drains (idle: stopped at once) and one replacement starts.
  CHECK(h.ctl.workers[1].stop_sent);
  CHECK_FALSE(h.ctl.workers[2].stop_sent);
  REQUIRE(h.ctl.spawned.size() == 3);
  h.exit(1, ExitStatus{true, 0, 0});
  CHECK_FALSE(h.ctl.workers[2].stop_sent);  // still waiting for worker 3
  h.core->on_ready(3, h.now);
  CHECK(h.ctl.workers[2].stop_sent);
  REQUIRE(h.ctl.spawned.size() == 4);
  h.exit(2, ExitStatus{true, 0, 0});
  h.core->on_ready(4, h.now);
  CHECK(h.ctl.spawned.size() == 4);  // done: nobody else is replaced
  CHECK(h.core->stats().restarts == 0);
  CHECK(h.core->stats().workers == 2);
}

TEST_CASE("a restart that is not rolling replaces every worker at once without failing a task") {
  Harness h;
  h.ready_all();
  auto t = h.submit();
  const auto busy = h.holder(t->id);
  h.core->restart_workers(false, h.now);
  CHECK(h.ctl.spawned.size() == 4);
  CHECK_FALSE(h.ctl.workers[busy].stop_sent);  // finishes its task first
  REQUIRE(h.result(busy, t->id, ipc::TaskStatus::kOk));
  CHECK(h.ctl.workers[busy].stop_sent);
  CHECK(t->state == TaskState::kCompleted);
}

TEST_CASE("abandoning at shutdown dead-letters every open task and kills the busy workers") {
  Harness h;
  h.ready_all();
  std::vector<TaskPtr> tasks;
  for (int i = 0; i < 6; ++i) tasks.push_back(h.submit());  // 4 in rings, 2 queued
  const auto running = tasks[0];
  const auto w = h.holder(running->id);
  h.ctl.workers[w].started = running->id;
  h.core->close(h.now);
  CHECK(h.core->abandon_all(DeadReason::kShutdown, "shutdown: out of time", h.now) == 6);
  for (const auto& t : tasks) {
    CHECK(t->state == TaskState::kDeadLettered);
    CHECK(account(t).reason == DeadReason::kShutdown);
  }
  auto a = account(running);
  REQUIRE(a.history.size() == 1);  // the running one ends its attempt
  CHECK(a.history[0].outcome == Outcome::kLost);
  // The front of each ring is the one running (or about to), by the pool's own account.
  CHECK(account(tasks[1]).history.size() == 1);
  for (int i : {2, 3, 4, 5}) CHECK(account(tasks[static_cast<std::size_t>(i)]).history.empty());
  CHECK(h.ctl.workers[w].killed);
  h.exit(w, ExitStatus{false, 0, SIGKILL});
  CHECK(account(running).history.size() == 1);  // the exit does not end it twice
  CHECK(h.core->stats().restarts == 0);
  CHECK(h.core->stats().dead_lettered == 6);
}

TEST_CASE("lifecycle events name workers, attempts and task ends in order") {
  PoolOptions o = Harness::defaults();
  o.workers = 1;
  std::vector<std::string> seen;
  o.on_event = [&seen](const PoolEvent& e) {
    seen.push_back(std::string(to_string(e.kind)) + " " + std::to_string(e.task_id) + " " +
                   std::string(to_string(e.outcome)) + " " + std::string(e.detail));
  };
  Harness h(o);
  h.ready_all();
  auto t = h.submit();
  REQUIRE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kRetry));
  h.advance(1ms);
  h.ctl.workers[1].started = t->id;
  h.exit(1, ExitStatus{false, 0, SIGSEGV});
  std::vector<std::string> want = {
      "worker_started 0 ok ",
      "worker_ready 0 ok ",
      "attempt_ended 1 error handler said no",
      "attempt_ended 1 lost worker 1001 killed by SIGSEGV",
      "worker_exited 1 lost worker 1001 killed by SIGSEGV",
      "worker_started 0 ok ",
  };
  CHECK(seen == want);
}
