// poold's graceful stop from a client's side: once it is shutting down every new submit is
// refused `closed`, while a task already in flight runs to its end within shutdown_timeout
// and its result still reaches the client that waits for it.
#include <signal.h>

#include <catch2/catch.hpp>
#include <future>

#include "poold_process.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

TEST_CASE("poold: submits during shutdown get closed while an in-flight task reaches its waiter") {
  // One worker; a long shutdown_timeout and heartbeat allowance, so nothing but the test ends
  // the task below.
  PooldFixture f("pools:\n" + pool_yaml("sleep", "sleep",
                                        "    concurrency: 1\n"
                                        "    health: {missed_heartbeats: 2400}\n"
                                        "    task_defaults: {timeout: 10m}\n"),
                 "  shutdown_timeout: 10m\n");
  Client c = f.connect();
  Client late = f.connect();  // connected before the stop: it stays served until poold exits

  auto waited = std::make_shared<std::promise<Result<TaskReply>>>();
  auto reply = waited->get_future();
  REQUIRE(c.submit_async(task("sleep", "200"), [waited](Result<TaskReply> r) {
             waited->set_value(std::move(r));
           }).is_ok());
  // In the worker's hands; the worker is then stopped so the task cannot end before the test
  // has seen poold refuse work.
  int pid = 0;
  REQUIRE(poll_until([&] {
    auto w = as_json(c.workers("sleep"));
    REQUIRE(w);
    if ((*w)["workers"].size() != 1 || (*w)["workers"][0]["in_flight"] != 1) return false;
    pid = (*w)["workers"][0]["pid"];
    return true;
  }));
  REQUIRE(::kill(pid, SIGSTOP) == 0);

  f.poold->signal(SIGTERM);
  // The service's own line, logged once it refuses submits (main's "signal 15: shutting
  // down" comes before that, and a submit between the two would still be taken).
  REQUIRE(f.poold->wait_for_output("shutting down timeout_ms="));
  auto refused = late.submit(task("sleep", "1"));
  REQUIRE_FALSE(refused);
  CHECK(error_code_of(refused.status()) == "closed");
  auto refused_waited = late.submit_wait(task("sleep", "1"));
  REQUIRE_FALSE(refused_waited);
  CHECK(error_code_of(refused_waited.status()) == "closed");
  auto batch = late.submit_batch({task("sleep", "1"), task("sleep", "2")});
  if (batch) {
    for (const Submitted& s : *batch) CHECK(s.status.code() == Code::kClosed);
  } else {
    CHECK(error_code_of(batch.status()) == "closed");
  }
  CHECK(reply.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);

  REQUIRE(::kill(pid, SIGCONT) == 0);
  REQUIRE(reply.wait_for(kPatience) == std::future_status::ready);
  auto r = reply.get();
  REQUIRE(r);
  CHECK(r->state == "completed");
  CHECK(r->result == "slept 200 ms");
  CHECK(f.poold->wait_exit() == 0);
  CHECK(f.poold->wait_for_output("pool stopped pool=sleep kept_unfinished=0"));
}

}  // namespace
}  // namespace sandpool::testing
