// `wait` by task id through a real poold (docs/protocol.md, "Operations"): the C++ client's
// Client::wait and the real poolctl's `wait ID [--wait-timeout D]`.
#include <signal.h>

#include <catch2/catch.hpp>

#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command_runner.hpp"
#include "poold_process.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

using nlohmann::json;

std::string wait_pools() {
  // Heartbeats missed while a test holds a worker stopped are no reason to replace it.
  return "pools:\n" +
         pool_yaml("sleep", "sleep",
                   "    task_defaults: {timeout: 120s}\n"
                   "    health: {missed_heartbeats: 2400}\n") +
         pool_yaml("fail", "fail");
}

CommandResult poolctl(const PooldFixture& f, std::vector<std::string> args) {
  args.insert(args.begin(), {"--socket", f.socket});
  return run_command(std::string(SANDPOOL_BIN_DIR) + "/poolctl", args);
}

}  // namespace

TEST_CASE("poold: wait answers once the task ends, with its result, every waiter of it") {
  PooldFixture f(wait_pools());
  Client submitter = f.connect();
  // The pool's one worker is stopped before the task is submitted, so the task cannot end
  // before both waits are taken (a task of a fixed length could end first, and its waits be
  // answered at once, waiting for nothing). Submitted without waiting, on another
  // connection: the waiters only know its id.
  auto w = as_json(submitter.workers("sleep"));
  REQUIRE(w);
  REQUIRE((*w)["workers"].size() == 1);
  const int pid = (*w)["workers"][0]["pid"];
  REQUIRE(::kill(pid, SIGSTOP) == 0);
  auto s = submitter.submit(task("sleep", "200"));
  REQUIRE(s);
  Client a = f.connect();
  Client b = f.connect();
  std::promise<Result<Reply>> answers[2];
  for (int i = 0; i < 2; ++i) {
    Client& waiter = i == 0 ? a : b;
    REQUIRE(raw_start(waiter, "wait", {{"id", s->id}}, {}, {},
                      [&answers, i](Result<Reply> r) { answers[i].set_value(std::move(r)); }));
    // The reads run one at a time in arrival order (docs/protocol.md): once this read of
    // the connection is answered, its wait was taken before it.
    auto now = waiter.task(s->id);
    REQUIRE(now);
    CHECK_FALSE(now->state == "completed");
  }
  auto first = answers[0].get_future();
  auto second = answers[1].get_future();
  CHECK(first.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);
  CHECK(second.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);

  REQUIRE(::kill(pid, SIGCONT) == 0);
  for (auto* answer : {&first, &second}) {
    REQUIRE(answer->wait_for(kPatience) == std::future_status::ready);
    auto r = answer->get();
    REQUIRE(r);
    const json t = r->body;
    INFO(t.dump());
    CHECK(t["id"] == s->id);
    CHECK(t["state"] == "completed");
    CHECK(t["attempts"] == 1);
    CHECK(r->blob == "slept 200 ms");
  }
  // A task that already ended: its account at once, with its result.
  auto again = a.wait(s->id);
  REQUIRE(again);
  CHECK(again->state == "completed");
  CHECK(again->result == "slept 200 ms");
  CHECK(account_json(*again)["attempts"] == 1);
}

TEST_CASE("poold: wait answers the tasks of a batch and a failed task's account too") {
  PooldFixture f(wait_pools());
  Client c = f.connect();
  auto batch = c.submit_batch({task("sleep", "1200"), task("sleep", "1")});
  REQUIRE(batch);
  REQUIRE(batch->size() == 2);
  auto t = c.wait((*batch)[0].id);
  REQUIRE(t);
  CHECK(t->state == "completed");
  CHECK(t->result == "slept 1200 ms");

  auto failing = c.submit(task("fail", "no"));
  REQUIRE(failing);
  auto dead = c.wait(failing->id);
  REQUIRE(dead);
  CHECK(dead->state == "dead_lettered");
  CHECK_FALSE(dead->reason.empty());
}

TEST_CASE("poold: a wait whose own timeout passes first answers the task as it is, still open") {
  PooldFixture f(wait_pools());
  Client c = f.connect();
  auto s = c.submit(task("sleep", "600000"));
  REQUIRE(s);
  REQUIRE(wait_task_state(c, s->id, "running"));
  auto t = c.wait(s->id, std::chrono::milliseconds(200));
  REQUIRE(t);
  CHECK(t->id == s->id);
  CHECK(t->state == "running");  // not terminal: the task goes on
  // Zero: the account at once.
  auto now = c.wait(s->id, std::chrono::milliseconds(0));
  REQUIRE(now);
  CHECK(now->state == "running");

  // A wait without a timeout still answers once the task ends (here: cancelled).
  Client other = f.connect();
  auto waiting = std::async(std::launch::async, [&] { return other.wait(s->id); });
  auto cancelled = as_json(c.cancel(s->id));
  REQUIRE(cancelled);
  auto ended = waiting.get();
  REQUIRE(ended);
  CHECK(ended->state == "cancelled");
}

TEST_CASE("poold: wait refuses an unknown task and a malformed id, naming the field") {
  PooldFixture f(wait_pools());
  Client c = f.connect();
  auto unknown = c.wait(42);
  REQUIRE_FALSE(unknown);
  CHECK(error_code_of(unknown.status()) == "not_found");
  CHECK(unknown.status().message() == "not_found: no task 42");

  auto bad = raw_call(c, "wait", {{"id", "seven"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.status().message() == "bad_request: field \"id\": expected an unsigned integer");
  auto missing = raw_call(c, "wait", json::object());
  REQUIRE_FALSE(missing);
  CHECK(missing.status().message() ==
        "bad_request: field \"id\": missing, expected an unsigned integer");
  auto bad_timeout = raw_call(c, "wait", {{"id", 1}, {"timeout_ms", -1}});
  REQUIRE_FALSE(bad_timeout);
  CHECK(bad_timeout.status().message() ==
        "bad_request: field \"timeout_ms\": expected a duration in ms (an unsigned integer, at "
        "most a year: 31622400000)");
  // The same reader for the pool controls.
  auto scale = raw_call(c, "scale", {{"pool", "sleep"}, {"workers", 1.5}});
  REQUIRE_FALSE(scale);
  CHECK(scale.status().message() ==
        "bad_request: field \"workers\": expected an integer from 0 to 4294967295");
}

TEST_CASE("poolctl wait prints the result, or the state when --wait-timeout passes first") {
  PooldFixture f(wait_pools());
  Client c = f.connect();
  auto quick = c.submit(task("sleep", "300"));
  REQUIRE(quick);
  const std::string quick_id = std::to_string(quick->id);
  auto done = poolctl(f, {"wait", quick_id});
  INFO(done.err);
  CHECK(done.exit_code == 0);
  CHECK(done.out == "slept 300 ms\n");
  auto as_json = poolctl(f, {"wait", quick_id, "--json"});
  CHECK(as_json.exit_code == 0);
  const json account = json::parse(as_json.out);
  CHECK(account["state"] == "completed");
  CHECK(account["result"] == "slept 300 ms");

  auto slow = c.submit(task("sleep", "600000"));
  REQUIRE(slow);
  const std::string slow_id = std::to_string(slow->id);
  REQUIRE(wait_task_state(c, slow->id, "running"));
  auto timed_out = poolctl(f, {"wait", slow_id, "--wait-timeout", "100ms"});
  CHECK(timed_out.exit_code == 1);
  CHECK(timed_out.out == "task " + slow_id + " running\n");
  REQUIRE(c.cancel(slow->id));
  auto cancelled = poolctl(f, {"wait", slow_id});
  CHECK(cancelled.exit_code == 1);
  CHECK(cancelled.out.rfind("task " + slow_id + " cancelled", 0) == 0);

  auto unknown = poolctl(f, {"wait", "42"});
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err.find("not_found") != std::string::npos);
  CHECK(poolctl(f, {"wait", "42", "--wait-timeout", "soon"}).exit_code == 2);
}

}  // namespace sandpool::testing
