// PoolCore's lifecycle defects (issue 11) and its distrust of worker-written words (issue 12,
// item 1), each pinned by a sentence: the worker states and their deadlines, who pays for a
// death, cancels and withdrawals, restart intensity, reconfigure, a failed pool, letters.
#include <catch2/catch.hpp>

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "core/pool_core.hpp"
#include "pool_core_harness.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::core::TaskPtr;
using sandpool::testing::account;
using sandpool::testing::Harness;
using sandpool::testing::kMs;

namespace {

PoolOptions one_worker() {
  PoolOptions o = Harness::defaults();
  o.workers = 1;
  return o;
}

}  // namespace

// ---- worker states and their deadlines -------------------------------------------------

TEST_CASE("a worker that does not exit within stop_timeout of Stop is killed") {
  PoolOptions o = Harness::defaults();
  o.stop_timeout = 300ms;
  Harness h(o);
  h.ready_all();
  h.core->scale(1, h.now);
  const core::WorkerId stopped = h.ctl.workers[1].stop_sent ? 1 : 2;
  REQUIRE(h.ctl.workers[stopped].stop_sent);
  h.run_for(290ms);
  CHECK_FALSE(h.ctl.workers[stopped].killed);  // its shutdown hook still has time
  h.run_for(20ms);
  CHECK(h.ctl.workers[stopped].killed);
  h.exit(stopped, ExitStatus{false, 0, SIGKILL});
  CHECK(h.core->stats().restarts == 0);  // asked to stop: neither a restart nor a crash
  CHECK_FALSE(h.core->stats().crash_loop);
}

TEST_CASE("close finishes even when every worker ignores Stop") {
  PoolOptions o = Harness::defaults();
  o.stop_timeout = 200ms;
  Harness h(o);
  h.ready_all();
  h.core->close(h.now);
  for (auto& [w, fw] : h.ctl.workers) REQUIRE(fw.stop_sent);
  h.run_for(210ms);
  for (auto id : std::vector<core::WorkerId>(h.ctl.spawned)) {
    CHECK(h.ctl.workers[id].killed);
    h.exit(id, ExitStatus{false, 0, SIGKILL});
  }
  CHECK(h.core->wound_down());
}

TEST_CASE("a second Ready from a worker breaks the protocol") {
  Harness h;
  CHECK(h.core->on_ready(1, h.now));
  CHECK_FALSE(h.core->on_ready(1, h.now));
  h.core->on_protocol_error(1, "a second Ready");
  CHECK(h.ctl.workers[1].killed);
}

// ---- reconfigure -------------------------------------------------------------------------

TEST_CASE("a reconfigure that lowers recycle.max_tasks recycles idle workers past it") {
  Harness h(one_worker());
  h.ready_all();
  for (int i = 0; i < 20; ++i) {
    auto t = h.submit();
    REQUIRE(h.result(1, t->id, ipc::TaskStatus::kOk));
  }
  PoolOptions next = h.opts;
  next.recycle_max_tasks = 10;
  h.core->reconfigure(next, false, h.now);
  CHECK(h.ctl.workers[1].stop_sent);  // idle, past the limit: drained and stopped
  REQUIRE(h.ctl.spawned.size() == 2);
  h.exit(1, ExitStatus{true, 0, 0});
  h.core->on_ready(2, h.now);
  auto t = h.submit();
  CHECK(h.holder(t->id) == 2);  // the next task runs: nothing is accepted and stranded
}

TEST_CASE(
    "tasks accepted before max_payload was lowered end permanent instead of reaching a worker") {
  Harness h;  // nobody ready: the tasks wait
  h.admitted++;
  auto big = core::TaskRecord::make(h.next_id++, "echo", std::string(1000, 'x'), SubmitOptions{});
  h.core->submit(big, h.now);
  auto small = h.submit();
  PoolOptions next = h.opts;
  next.max_payload = 100;
  h.core->reconfigure(next, true, h.now);
  h.ready_all();
  h.advance(0ms);
  CHECK(big->state == TaskState::kDeadLettered);
  CHECK(account(big).reason == DeadReason::kPermanent);
  CHECK(account(big).error.find("exceeds max_payload (100 bytes)") != std::string::npos);
  for (auto& [w, fw] : h.ctl.workers) {
    CHECK(std::find(fw.ring.begin(), fw.ring.end(), big->id) == fw.ring.end());
  }
  CHECK(h.holder(small->id) != 0);
  CHECK(h.admitted == 0);
}

TEST_CASE("a worker is recycled before it reaches its lifetime RLIMIT_CPU") {
  PoolOptions o = one_worker();
  o.timeout = 1000ms;  // worker_cpu_seconds: the 60 s floor
  REQUIRE(worker_cpu_seconds(o) == 60);
  Harness h(o);
  h.ready_all();
  h.ctl.workers[1].cpu_ns = 47'000'000'000;
  h.run_for(300ms);
  CHECK_FALSE(h.ctl.workers[1].stop_sent);
  h.ctl.workers[1].cpu_ns = 49'000'000'000;  // past 80% of 60 s
  h.run_for(300ms);
  CHECK(h.ctl.workers[1].stop_sent);
  CHECK(h.ctl.spawned.size() == 2);
  CHECK(h.core->stats().recycled == 1);
}

TEST_CASE("a worker up for recycle.max_age is recycled, one worker per heartbeat interval") {
  PoolOptions o = Harness::defaults();  // two workers, started together
  o.heartbeat_interval = 500ms;
  o.recycle_max_age = 2000ms;
  Harness h(o);
  h.ready_all();
  h.run_for(1900ms);
  CHECK_FALSE(h.ctl.workers[1].stop_sent);
  CHECK_FALSE(h.ctl.workers[2].stop_sent);
  h.run_for(300ms);  // the sweep at 2 s
  CHECK(h.ctl.workers[1].stop_sent + h.ctl.workers[2].stop_sent == 1);
  CHECK(h.core->stats().recycled == 1);
  CHECK(h.ctl.spawned.size() == 3);  // its replacement
  h.run_for(400ms);                  // the next sweep, one interval later
  CHECK(h.ctl.workers[1].stop_sent);
  CHECK(h.ctl.workers[2].stop_sent);
  CHECK(h.core->stats().recycled == 2);
}

// ---- a failed pool -----------------------------------------------------------------------

TEST_CASE("a task that asks for a retry after its pool failed is dead-lettered, not stranded") {
  PoolOptions o = Harness::defaults();
  o.max_restarts = 100;
  o.timeout = 600s;  // the ready worker keeps its task while the other keeps failing
  o.retry.base = 50ms;
  Harness h(o);
  h.core->on_ready(1, h.now);
  auto t = h.submit();
  REQUIRE(h.holder(t->id) == 1);
  for (std::uint32_t i = 0; i < o.max_init_failures; ++i) {
    h.exit(h.ctl.spawned.back(), ExitStatus{true, 67, 0});
    h.advance(6000ms);
  }
  REQUIRE(h.core->failed());
  REQUIRE_FALSE(is_terminal(t->state));  // still running on the ready worker
  REQUIRE(h.result(1, t->id, ipc::TaskStatus::kRetry));
  h.advance(100ms);  // past any backoff: it must not wait for a worker that never comes
  CHECK(t->state == TaskState::kDeadLettered);
  CHECK(account(t).reason == DeadReason::kCrashLoop);
  CHECK(h.core->idle());
  h.core->close(h.now);
  REQUIRE(h.ctl.workers[1].stop_sent);
  h.exit(1, ExitStatus{true, 0, 0});
  CHECK(h.core->wound_down());
}

TEST_CASE("tasks put back from a dead ring in a failed pool are dead-lettered") {
  PoolOptions o = Harness::defaults();
  o.max_restarts = 100;
  o.timeout = 600s;  // the ready worker's tasks stay in its ring meanwhile
  Harness h(o);
  h.core->on_ready(1, h.now);  // worker 2 keeps starting and failing
  auto a = h.submit();
  auto b = h.submit();
  REQUIRE(h.holder(b->id) == 1);
  for (std::uint32_t i = 0; i < o.max_init_failures; ++i) {
    const auto w = h.ctl.spawned.back();
    h.exit(w, ExitStatus{true, 67, 0});
    h.advance(6000ms);
  }
  REQUIRE(h.core->failed());
  // The last ready worker dies: the front pays, the task behind it would wait forever.
  h.exit(1, ExitStatus{false, 0, SIGSEGV});
  CHECK(is_terminal(a->state));
  CHECK(b->state == TaskState::kDeadLettered);
  CHECK(account(b).reason == DeadReason::kCrashLoop);
  h.advance(60s);
  CHECK(h.core->idle());
  h.core->close(h.now);
  CHECK(h.core->wound_down());
}

// ---- admission ---------------------------------------------------------------------------

TEST_CASE("cancelling a task waiting in an affinity backlog gives its queue slot back") {
  PoolOptions o = Harness::defaults();
  o.dispatch = DispatchStrategy::kAffinity;
  o.concurrency = 1;
  Harness h(o);
  h.ready_all();
  SubmitOptions keyed;
  keyed.key = "k";
  auto first = h.submit(keyed);
  auto waiting = h.submit(keyed);
  REQUIRE(h.holder(waiting->id) == 0);  // in its worker's backlog
  REQUIRE(h.admitted == 1);
  CHECK(h.core->cancel(waiting, h.now));
  CHECK(waiting->state == TaskState::kCancelled);
  CHECK(h.admitted == 0);
  (void)first;
}

TEST_CASE("a task going back to the queue counts toward the queue's capacity again") {
  Harness h(one_worker());
  h.ready_all();
  auto a = h.submit();
  auto c = h.submit();
  REQUIRE(h.holder(c->id) == 1);
  CHECK(h.admitted == 0);
  h.exit(1, ExitStatus{false, 0, SIGSEGV});
  CHECK(h.admitted == 1);  // c waits again for the replacement (a waits for its retry)
  CHECK(h.core->stats().queued == 1);
  CHECK(a->state == TaskState::kRetryWait);
}

// ---- cancels and withdrawals ---------------------------------------------------------------

TEST_CASE("a second cancel on the same worker does not take back the first") {
  PoolOptions o = one_worker();
  o.concurrency = 3;
  Harness h(o);
  h.ready_all();
  auto running = h.submit();
  auto second = h.submit();
  REQUIRE(h.core->cancel(running, h.now));
  CHECK(h.ctl.workers[1].cancel_flag == running->id);
  REQUIRE(h.core->cancel(second, h.now));
  CHECK(h.ctl.workers[1].cancel_flag == running->id);  // the running one stays flagged
  CHECK(h.ctl.workers[1].cancels == std::vector<std::uint64_t>{running->id, second->id});
  h.advance(1100ms);  // the running one ignored its flag past cancel_grace
  REQUIRE(h.ctl.workers[1].killed);
  h.exit(1, ExitStatus{false, 0, SIGKILL});
  CHECK(running->state == TaskState::kCancelled);
  CHECK(second->state == TaskState::kCancelled);
  CHECK(h.core->stats().restarts == 1);
  CHECK_FALSE(h.core->stats().crash_loop);
}

TEST_CASE("a cancelled task behind the front gets its flag once it reaches the front") {
  PoolOptions o = one_worker();
  o.concurrency = 2;
  Harness h(o);
  h.ready_all();
  auto first = h.submit();
  auto second = h.submit();
  REQUIRE(h.core->cancel(second, h.now));
  CHECK(h.ctl.workers[1].cancel_flag == 0);
  REQUIRE(h.result(1, first->id, ipc::TaskStatus::kOk));
  // The worker may have started it before our Cancel arrived: its handler must see the flag.
  CHECK(h.ctl.workers[1].cancel_flag == second->id);
  REQUIRE(h.result(1, second->id, ipc::TaskStatus::kCancelled));
  CHECK(second->state == TaskState::kCancelled);
}

TEST_CASE("a cancel goes to the worker running the task, not the one it was withdrawn from") {
  PoolOptions o = Harness::defaults();
  o.concurrency = 2;
  o.retry.base = 0ms;
  Harness h(o);
  h.ready_all();
  SubmitOptions quick;
  quick.timeout = 10ms;
  auto slow = h.submit();
  auto other = h.submit();
  auto t = h.submit(quick);
  const auto first = h.holder(t->id);
  REQUIRE(first == h.holder(slow->id));
  h.advance(20ms);  // t times out behind slow: withdrawn from `first`, retried
  REQUIRE(account(t).history.size() == 1);
  h.advance(0ms);
  const auto second = h.holder(t->id);
  REQUIRE(second != 0);
  REQUIRE(h.ctl.workers[first].cancels == std::vector<std::uint64_t>{t->id});
  REQUIRE(h.core->cancel(t, h.now));
  CHECK(h.ctl.workers[first].cancels.size() == 1);
  CHECK(h.ctl.workers[second].cancels.back() == t->id);
  (void)other;
}

TEST_CASE("a withdrawn task its worker runs anyway is bounded: the worker is killed") {
  PoolOptions o = one_worker();
  o.concurrency = 2;
  o.cancel_grace = 500ms;
  Harness h(o);
  h.ready_all();
  SubmitOptions quick;
  quick.timeout = 10ms;
  auto slow = h.submit();
  auto t = h.submit(quick);
  h.advance(20ms);  // withdrawn while it waits behind `slow`
  REQUIRE(account(t).history.size() == 1);
  REQUIRE(h.result(1, slow->id, ipc::TaskStatus::kOk));
  // The worker had already started t before the Cancel: it is at the front, flagged, and
  // gets cancel_grace to drop it.
  CHECK(h.ctl.workers[1].cancel_flag == t->id);
  h.advance(490ms);
  CHECK_FALSE(h.ctl.workers[1].killed);
  h.advance(20ms);
  REQUIRE(h.ctl.workers[1].killed);
  h.exit(1, ExitStatus{false, 0, SIGKILL});
  CHECK(account(t).history.size() == 1);  // its attempt ended once, at the withdrawal
  CHECK_FALSE(h.core->stats().crash_loop);
}

// ---- worker-written words do not decide --------------------------------------------------

TEST_CASE("a worker that says it is idle while its front task passes its deadline is killed") {
  Harness h;
  h.ready_all();
  auto t = h.submit();
  const auto w = h.holder(t->id);
  h.ctl.workers[w].started = 0;  // the handler wrote 0 into the header, and keeps beating
  h.advance(1001ms);
  REQUIRE(h.ctl.workers[w].killed);  // not abandoned with the worker kept
  h.exit(w, ExitStatus{false, 0, SIGKILL});
  REQUIRE(account(t).history.size() == 1);
  CHECK(account(t).history[0].outcome == Outcome::kTimedOut);
}

TEST_CASE("the CPU of the front task is metered whatever the worker says it runs") {
  PoolOptions o = Harness::defaults();
  o.cpu_time = 100ms;
  o.timeout = 10000ms;
  Harness h(o);
  h.ready_all();
  auto t = h.submit();
  const auto w = h.holder(t->id);
  h.ctl.workers[w].started = 0;  // a lie
  h.core->observe_running();
  h.ctl.workers[w].cpu_ns += 150 * kMs;
  h.run_for(300ms);
  REQUIRE(h.ctl.workers[w].killed);
  h.exit(w, ExitStatus{false, 0, SIGKILL});
  CHECK(account(t).history.at(0).outcome == Outcome::kResourceLimit);
}

TEST_CASE("a worker answering cancelled for a task nobody cancelled breaks the protocol") {
  Harness h;
  h.ready_all();
  auto t = h.submit();
  CHECK_FALSE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kCancelled));
  CHECK_FALSE(is_terminal(t->state));
}

// ---- restart intensity ---------------------------------------------------------------------

TEST_CASE("kills for a task's own timeout or a user's cancel never put the pool in crash_loop") {
  PoolOptions o = one_worker();
  o.max_restarts = 2;
  o.timeout = 50ms;
  o.retries = 0;
  Harness h(o);
  for (int i = 0; i < 6; ++i) {
    h.core->on_ready(h.ctl.spawned.back(), h.now);
    auto t = h.submit();
    const auto w = h.holder(t->id);
    REQUIRE(w != 0);
    if (i % 2 == 0) {
      h.advance(60ms);  // its own timeout
    } else {
      h.core->cancel(t, h.now);
      h.advance(1100ms);  // ignores the cancel
    }
    REQUIRE(h.ctl.workers[w].killed);
    h.exit(w, ExitStatus{false, 0, SIGKILL});
  }
  CHECK_FALSE(h.core->stats().crash_loop);
  CHECK(h.core->stats().restarts == 6);
}

TEST_CASE("missed heartbeats and protocol errors count toward crash_loop") {
  PoolOptions o = one_worker();
  o.max_restarts = 2;
  Harness h(o);
  for (int i = 0; i < 3; ++i) {
    const auto w = h.ctl.spawned.back();
    h.core->on_ready(w, h.now);
    if (i % 2 == 0) {
      h.core->on_protocol_error(w, "garbage");
    } else {
      h.ctl.workers[w].silent = true;
      h.run_for(1000ms);
    }
    REQUIRE(h.ctl.workers[w].killed);
    h.exit(w, ExitStatus{false, 0, SIGKILL});
  }
  CHECK(h.core->stats().crash_loop);
}

// ---- dead letters written durably ----------------------------------------------------------

TEST_CASE("a dead-lettered task ends only once its letter is written") {
  Harness h(one_worker());
  std::vector<TaskPtr> handed;
  h.core->set_dead_letter_sink([&](const TaskPtr& t) {
    handed.push_back(t);
    return true;
  });
  h.ready_all();
  std::size_t done_calls = 0;
  SubmitOptions so;
  so.on_done = [&](const TaskResult&) { ++done_calls; };
  auto t = h.submit(so);
  REQUIRE(h.result(1, t->id, ipc::TaskStatus::kFail));
  REQUIRE(handed.size() == 1);
  CHECK_FALSE(is_terminal(t->state));
  CHECK(t->done == 0);
  CHECK(account(t).dead_letter_pending);
  CHECK(h.core->stats().letters_pending == 1);
  CHECK_FALSE(h.core->idle());
  CHECK(done_calls == 0);
  CHECK_FALSE(h.core->cancel(t, h.now));  // decided: nothing changes it now
  h.core->on_letter_written(t->id, h.now);
  CHECK(t->state == TaskState::kDeadLettered);
  CHECK_FALSE(account(t).dead_letter_pending);
  CHECK(done_calls == 1);
  CHECK(h.core->idle());
  h.core->on_letter_written(t->id, h.now);  // a second word changes nothing
  CHECK(done_calls == 1);
}

TEST_CASE("a pool closes while letters are still being written, they end when written") {
  Harness h(one_worker());
  h.core->set_dead_letter_sink([](const TaskPtr&) { return true; });
  h.ready_all();
  auto t = h.submit();
  REQUIRE(h.result(1, t->id, ipc::TaskStatus::kFail));
  h.core->close(h.now);
  REQUIRE(h.ctl.workers[1].stop_sent);
  h.exit(1, ExitStatus{true, 0, 0});
  CHECK(h.core->wound_down());
  CHECK_FALSE(is_terminal(t->state));
  h.core->on_letter_written(t->id, h.now);
  CHECK(t->state == TaskState::kDeadLettered);
}
