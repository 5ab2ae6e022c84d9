// Workers that crash, fail, hang or get killed, through a real Pool: every accepted task
// still ends in exactly one terminal state, with its history.
#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::holding_pool_options;
using sandpool::testing::kPatience;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;
using sandpool::testing::wait_running;

TEST_CASE("a task that always crashes its worker is dead-lettered after retries+1 lost attempts") {
  PoolOptions o = pool_options("crash", 1);
  o.retries = 2;
  auto pool = make_pool(o);
  auto r = run(*pool, pool->task_types().front(), "boom");
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kRetriesExhausted);
  REQUIRE(r.attempts() == 3);
  for (const auto& a : r.history) {
    CHECK(a.outcome == Outcome::kLost);
    CHECK(a.error.find("SIGSEGV") != std::string::npos);
  }
  // Each crash was a different process, and the pool replaced every one.
  CHECK(r.history[0].worker_pid != r.history[1].worker_pid);
  CHECK(pool->stats().restarts == 3);
  CHECK(pool->dead_letters().size() == 1);
  // The pool still serves after the crashes.
  CHECK(pool->workers().size() == 1);
}

TEST_CASE("a task that exhausts its worker's address space is resource_limit: memory, retried") {
  PoolOptions o = pool_options("alloc", 1);
  o.sandbox.limits.address_space = 256ull << 20;
  o.retries = 1;
  o.retry.base = 1ms;
  auto pool = make_pool(o);
  auto r = run(*pool, "alloc", "1024");  // more than the limit: every attempt runs out
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kRetriesExhausted);
  REQUIRE(r.attempts() == 2);
  for (const auto& a : r.history) {
    INFO(a.error);
    CHECK(a.outcome == Outcome::kResourceLimit);
    CHECK(a.error.rfind("resource_limit: memory", 0) == 0);
  }
  CHECK(r.history[0].worker_pid != r.history[1].worker_pid);  // an exhausted worker is replaced
  // What fits still runs, on the replacement.
  CHECK(run(*pool, "alloc", "16").state == TaskState::kCompleted);
}

TEST_CASE("a plain crash under a memory limit is still lost, naming its signal") {
  PoolOptions o = pool_options("crash", 1);
  o.sandbox.limits.address_space = 256ull << 20;
  o.retries = 0;
  auto pool = make_pool(o);
  auto r = run(*pool, pool->task_types().front(), "boom");
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kLost);
  CHECK(r.history[0].error.find("SIGSEGV") != std::string::npos);
}

TEST_CASE("a task that asks for a retry completes on its second attempt") {
  auto pool = make_pool(pool_options("flaky", 1));
  auto r = run(*pool, pool->task_types().front(), "x");
  CHECK(r.state == TaskState::kCompleted);
  REQUIRE(r.attempts() == 2);
  CHECK(r.history[0].outcome == Outcome::kError);
  CHECK(r.history[1].outcome == Outcome::kOk);
}

TEST_CASE("SP_FAIL dead-letters the task after one attempt, with the plugin's message") {
  auto pool = make_pool(pool_options("fail", 1));
  auto r = run(*pool, pool->task_types().front(), "x");
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kPermanent);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kFailed);
  CHECK_FALSE(r.error.empty());
}

TEST_CASE("a task past its timeout has its worker killed and replaced, and is retried") {
  PoolOptions o = pool_options("sleep", 1);
  o.retries = 1;
  auto pool = make_pool(o);
  SubmitOptions so;
  so.timeout = 200ms;
  auto r = run(*pool, "sleep", "60000", so);
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kRetriesExhausted);
  REQUIRE(r.attempts() == 2);
  CHECK(r.history[0].outcome == Outcome::kTimedOut);
  CHECK(r.history[0].error.find("timed out") != std::string::npos);
  // The replacement serves.
  CHECK(run(*pool, "sleep", "1").state == TaskState::kCompleted);
}

TEST_CASE("a worker killed from outside mid-task is replaced and the task retried to completion") {
  // The first attempt runs until its worker dies: the kill finds it running, however slow.
  auto pool = make_pool(holding_pool_options(1));
  auto t = pool->submit("configurable", "hold");
  REQUIRE(t);
  wait_running(*t);
  const auto pid = pool->workers().at(0).pid;
  REQUIRE(pid > 0);
  REQUIRE(::kill(pid, SIGKILL) == 0);
  REQUIRE(t->wait_for(kPatience));
  auto r = t->wait();
  CHECK(r.state == TaskState::kCompleted);
  REQUIRE(r.attempts() == 2);
  CHECK(r.history[0].outcome == Outcome::kLost);
  CHECK(r.history[0].worker_pid == pid);
  CHECK(r.history[1].worker_pid != pid);
}

TEST_CASE("tasks waiting in a dead worker's ring are requeued without an attempt") {
  PoolOptions o = holding_pool_options(1);
  o.concurrency = 4;
  auto pool = make_pool(o);
  // The first attempt runs until its worker dies: the three behind it wait in the ring.
  auto running = pool->submit("configurable", "hold");
  std::vector<Ticket> waiting;
  for (int i = 0; i < 3; ++i) waiting.push_back(*pool->submit("configurable", "x"));
  wait_running(*running);
  const auto until = std::chrono::steady_clock::now() + kPatience;
  const auto all_in_ring = [&] {
    for (const Ticket& t : waiting) {
      if (t.state() != TaskState::kDispatched) return false;
    }
    return true;
  };
  while (!all_in_ring() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(1ms);
  REQUIRE(all_in_ring());
  REQUIRE(::kill(pool->workers().at(0).pid, SIGKILL) == 0);
  pool->wait_idle();
  CHECK(running->wait().attempts() == 2);
  for (auto& t : waiting) {
    auto r = t.wait();
    CHECK(r.state == TaskState::kCompleted);
    CHECK(r.attempts() == 1);
  }
}

TEST_CASE("cancelling a queued task ends it without running it") {
  PoolOptions o = pool_options("sleep", 1);
  o.concurrency = 1;
  auto pool = make_pool(o);
  // The only worker holds a task until the test cancels it, so the next one waits queued.
  auto busy = pool->submit("sleep", "600000");
  wait_running(*busy);
  auto queued = pool->submit("sleep", "1");
  REQUIRE(queued->state() == TaskState::kQueued);
  REQUIRE(queued->cancel());
  auto r = queued->wait();
  CHECK(r.state == TaskState::kCancelled);
  CHECK(r.cancel_reason == CancelReason::kUser);
  CHECK(r.attempts() == 0);
  CHECK(busy->state() == TaskState::kRunning);
  REQUIRE(busy->cancel());
  CHECK(busy->wait().state == TaskState::kCancelled);
  CHECK(pool->stats().completed == 0);  // the cancelled one never ran
}

TEST_CASE("a running task that honours cancellation stops, and its worker survives") {
  auto pool = make_pool(pool_options("sleep", 1));
  auto t = pool->submit("sleep", "60000");
  wait_running(*t);
  const auto pid = pool->workers().at(0).pid;
  REQUIRE(t->cancel());
  REQUIRE(t->wait_for(kPatience));
  CHECK(t->wait().state == TaskState::kCancelled);
  CHECK(run(*pool, "sleep", "1").history.at(0).worker_pid == pid);
}

TEST_CASE("a hang without heartbeats times out, is retried on a new worker, with its backtrace") {
  PoolOptions o = pool_options("echo", 1);
  o.plugin_path = SANDPOOL_TEST_PLUGIN_DIR "/libhang.so";
  o.timeout = 300ms;
  o.retries = 1;
  o.retry.base = 1ms;
  o.backtrace_grace = 2000ms;  // generous: the worker answers long before it
  auto pool = make_pool(o);
  auto r = run(*pool, "hang", "");
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kRetriesExhausted);
  REQUIRE(r.attempts() == 2);
  CHECK(r.history[0].worker_pid != r.history[1].worker_pid);  // the worker was replaced
  for (const auto& a : r.history) {
    INFO(a.backtrace);
    CHECK(a.outcome == Outcome::kTimedOut);
    CHECK(a.backtrace.rfind("thread ", 0) == 0);
    CHECK(a.backtrace.find("(task thread)\n#0 hang_spin_forever+0x") != std::string::npos);
    CHECK(a.backtrace.find("(libhang.so)") != std::string::npos);
    CHECK(a.backtrace.find("sp_plugin_handle+0x") != std::string::npos);  // who called it
  }
  CHECK(pool->workers().size() == 1);
}

TEST_CASE("a SIGSTOP'd hung worker never answers, the grace period bounds the wait") {
  PoolOptions o = pool_options("echo", 1);
  o.plugin_path = SANDPOOL_TEST_PLUGIN_DIR "/libhang.so";
  o.timeout = 200ms;
  o.retries = 0;
  o.backtrace_grace = 100ms;
  auto pool = make_pool(o);
  auto t = pool->submit("hang", "");
  wait_running(*t);
  REQUIRE(::kill(pool->workers().at(0).pid, SIGSTOP) == 0);
  REQUIRE(t->wait_for(kPatience));
  auto r = t->wait();
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kTimedOut);
  CHECK(r.history[0].backtrace.empty());
}

TEST_CASE("a running task that ignores cancellation is killed after the grace period") {
  PoolOptions o = pool_options("echo", 1);
  o.plugin_path = SANDPOOL_TEST_PLUGIN_DIR "/libhang.so";
  o.cancel_grace = 100ms;
  // The pool's own account of each worker exit: pid, classification, why.
  std::mutex mu;
  std::vector<std::tuple<std::int32_t, Outcome, std::string>> exits;
  o.on_event = [&](const PoolEvent& e) {
    if (e.kind != PoolEvent::Kind::kWorkerExited) return;
    std::lock_guard lock(mu);
    exits.emplace_back(e.pid, e.outcome, std::string(e.detail));
  };
  auto pool = make_pool(o);
  auto t = pool->submit("hang", "");
  wait_running(*t);
  const std::int32_t pid = pool->workers().at(0).pid;
  REQUIRE(t->cancel());
  REQUIRE(t->wait_for(kPatience));
  CHECK(t->wait().state == TaskState::kCancelled);
  // The worker spinning in the plugin was killed (its pidfd reports the exit) and replaced.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    CHECK(::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kPatience).count())) == 1);
    ::close(pidfd);
  }  // else it is gone already (ESRCH)
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (std::chrono::steady_clock::now() < until) {
    const auto ws = pool->workers();
    if (ws.size() == 1 && ws[0].pid != pid && ws[0].state == "idle") break;
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE(pool->workers().size() == 1);
  CHECK(pool->workers()[0].pid != pid);
  pool->close();
  std::lock_guard lock(mu);
  REQUIRE_FALSE(exits.empty());
  const auto& [exited, outcome, detail] = exits.front();
  INFO(detail);
  CHECK(exited == pid);
  CHECK(detail.find("grace") != std::string::npos);
}

TEST_CASE("a plugin that cannot be loaded is reported at pool creation") {
  auto [path, words] = GENERATE(table<std::string, std::string>({
      {"/nonexistent/libnothing.so", "not found"},
      {SANDPOOL_SOURCE_DIR "/README.md", "README.md"},
  }));
  PoolOptions o = pool_options("echo", 1);
  o.plugin_path = path;
  auto p = Pool::create(o);
  REQUIRE_FALSE(p);
  CHECK(p.status().code() == Code::kPlugin);
  CHECK(p.status().message().find(words) != std::string::npos);
}

TEST_CASE("a worker that scribbles on its shared region is killed, and the manager carries on") {
  PoolOptions o = pool_options("echo", 1);
  o.plugin_path = SANDPOOL_TEST_PLUGIN_DIR "/libscribble.so";
  o.retries = 1;
  auto pool = make_pool(o);
  auto r = run(*pool, "scribble", "storm");
  CHECK(r.state == TaskState::kDeadLettered);
  REQUIRE(r.attempts() == 2);
  for (const auto& a : r.history) {
    CHECK(a.outcome == Outcome::kProtocolError);
    CHECK(a.error.find("protocol_error") != std::string::npos);
  }
  // Fresh workers with fresh regions keep serving.
  CHECK(run(*pool, "scribble", "noop").state == TaskState::kCompleted);
}

TEST_CASE("a forbidden syscall ends the attempt as a sandbox_violation naming it, not retried") {
  PoolOptions o = pool_options("echo", 1);
  o.plugin_path = SANDPOOL_WH_TEST_PLUGIN_DIR "/libforbidden_syscall.so";
  auto pool = make_pool(o);
  auto r = run(*pool, pool->task_types().front(), "x");
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kPermanent);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kSandboxViolation);
  CHECK(r.history[0].error == "sandbox_violation: socket");
}
