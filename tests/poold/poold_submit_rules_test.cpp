// What poold promises a submitter, through a real poold: an idempotency key outlives its
// task's record (issue 11 item 3), a waited resubmit that resolves to a replayed task is
// answered (item 11), and timeout_ms and retries are checked against their ranges at the
// wire, with nothing queued on refusal (item 9).
#include <catch2/catch.hpp>

#include <future>
#include <nlohmann/json.hpp>
#include <string>

#include "command_runner.hpp"
#include "poold_process.hpp"

namespace sandpool::testing {
namespace {

using nlohmann::json;

SubmitRequest keyed(const std::string& key, std::string payload) {
  SubmitRequest r = task("echo", std::move(payload));
  r.options.idempotency_key = key;
  return r;
}

std::uint64_t submitted(Client& c, const std::string& pool) {
  auto s = as_json(c.stats(pool));
  REQUIRE(s);
  return (*s)["pools"][0]["submitted"].get<std::uint64_t>();
}

}  // namespace

TEST_CASE(
    "poold: an idempotency key still answers once its task's record is evicted, and says "
    "when its result is no longer kept") {
  // The pool keeps 64 MiB of payloads and results: 81 tasks of 1 MB push the first out.
  // Without the journal, which would still find the task (poold_journal_test.cpp).
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo"), "  journal: off\n");
  Client c = f.connect();
  const std::string mb(1 << 20, 'x');
  auto first = c.submit_wait(keyed("K1", mb));
  REQUIRE(first);
  REQUIRE(first->state == "completed");
  for (int i = 2; i <= 81; ++i) {
    auto r = c.submit_wait(keyed("K" + std::to_string(i), mb));
    REQUIRE(r);
    REQUIRE(r->state == "completed");
  }
  REQUIRE(error_code_of(c.task(first->id).status()) == "not_found");  // the record is gone

  auto again = c.submit(keyed("K1", mb));
  REQUIRE(again);
  CHECK(again->existing);
  CHECK(again->id == first->id);
  // With wait: its final account; 81 MB of results is over the keys' 64 MiB, so the oldest
  // results went, and the reply says so.
  auto waited = c.submit_wait(keyed("K1", mb));
  REQUIRE(waited);
  CHECK(waited->id == first->id);
  CHECK(waited->state == "completed");
  CHECK(account_json(*waited).value("result_dropped", false));
  CHECK(waited->result.empty());
  auto last = c.submit_wait(keyed("K81", mb));
  REQUIRE(last);
  CHECK_FALSE(account_json(*last).value("result_dropped", false));
  CHECK(last->result == mb);
  CHECK(submitted(c, "echo") == 81);  // nothing ran twice
  auto status = as_json(c.status());
  REQUIRE(status);
  CHECK((*status)["idempotency_keys"] == 81);
  CHECK((*status)["idempotency_kept_bytes"].get<std::uint64_t>() <= 64u << 20);
}

TEST_CASE("poold: a waited resubmit whose key names a replayed task is answered when it ends") {
  // One worker taking one task at a time: the replay waits behind a blocker, still open when
  // the resubmit arrives.
  PooldFixture f("pools:\n" + pool_yaml("sleep", "sleep", "    concurrency: 1\n",
                                        "{min: 1, max: 1, initial: 1}"));
  Client c = f.connect();
  SubmitRequest slow = task("sleep", "60000");
  slow.options.idempotency_key = "K";
  slow.options.timeout = std::chrono::milliseconds(50);
  slow.options.retries = 0;
  auto dead = c.submit_wait(slow);
  REQUIRE(dead);
  REQUIRE(dead->state == "dead_lettered");
  auto letters = raw_body(c, "dlq_list", {{"pool", "sleep"}});
  REQUIRE(letters);
  REQUIRE((*letters)["entries"].size() == 1);
  const std::uint64_t letter = (*letters)["entries"][0]["letter_id"];

  REQUIRE(c.submit(task("sleep", "3000")));  // the blocker
  auto replayed = raw_body(c, "dlq_replay", {{"id", letter}});
  REQUIRE(replayed);
  REQUIRE((*replayed)["ids"][0] == dead->id);

  std::promise<Result<TaskReply>> answer;
  REQUIRE(c.submit_async(slow, [&answer](Result<TaskReply> r) { answer.set_value(std::move(r)); }));
  auto reply = answer.get_future();
  REQUIRE(reply.wait_for(kPatience) == std::future_status::ready);
  auto r = reply.get();
  REQUIRE(r);
  CHECK(r->id == dead->id);
  CHECK(r->state == "dead_lettered");  // timed out again, after 50 ms this time too
  CHECK(account_json(*r)["attempts"] == 1);
}

TEST_CASE(
    "poold: timeout_ms and retries outside their ranges are refused, naming the bounds, "
    "and nothing is queued") {
  PooldFixture f("pools:\n" +
                 pool_yaml("echo", "echo", "    task_defaults: {timeout: 5s, max_timeout: 10s}\n"));
  Client c = f.connect();
  auto refused = [&](json extra) {
    json args{{"type", "echo"}};
    args.update(extra);
    auto r = raw_call(c, "submit", args, "x");
    REQUIRE_FALSE(r);
    return r.status().message();
  };
  const std::string bounds = "1 to 10000 (1 ms to the pool's task_defaults.max_timeout)";
  CHECK(refused({{"timeout_ms", 0}}) == "bad_request: timeout_ms: 0 is outside " + bounds);
  CHECK(refused({{"timeout_ms", 10001}}) == "bad_request: timeout_ms: 10001 is outside " + bounds);
  // Not of the argument's type, or past a year (no deadline may overflow): refused by the
  // argument reader, naming the field.
  const std::string not_ms =
      "bad_request: field \"timeout_ms\": expected a duration in ms (an unsigned integer, at "
      "most a year: 31622400000)";
  CHECK(refused({{"timeout_ms", 360000000000000}}) == not_ms);
  CHECK(refused({{"timeout_ms", -5}}) == not_ms);
  CHECK(refused({{"timeout_ms", 1.5}}) == not_ms);
  const std::string not_u32 =
      "bad_request: field \"retries\": expected an integer from 0 to 4294967295";
  CHECK(refused({{"retries", 4294967296}}) == not_u32);
  CHECK(refused({{"retries", -1}}) == not_u32);
  CHECK(refused({{"priority", 2147483648}}) ==
        "bad_request: field \"priority\": expected an integer from -2147483648 to 2147483647");
  CHECK(submitted(c, "echo") == 0);

  // A batch: per task, each refusal listed; shared, refused from index 0.
  auto per_task = raw_call(
      c, "submit_batch",
      {{"payload_lens", {1, 1}},
       {"tasks",
        {{{"type", "echo"}, {"timeout_ms", 0}}, {{"type", "echo"}, {"timeout_ms", 10001}}}}},
      "ab");
  REQUIRE(per_task);
  CHECK(per_task->body["ids"] == json({0, 0}));
  REQUIRE(per_task->body["errors"].size() == 2);
  CHECK(per_task->body["errors"][0]["message"] == "timeout_ms: 0 is outside " + bounds);
  // An argument of the wrong type in any task refuses the whole request, naming the task.
  auto mistyped =
      raw_call(c, "submit_batch",
               {{"payload_lens", {1, 1}},
                {"tasks", {{{"type", "echo"}}, {{"type", "echo"}, {"retries", 4294967296}}}}},
               "ab");
  REQUIRE_FALSE(mistyped);
  CHECK(mistyped.status().message() ==
        "bad_request: tasks[1]: field \"retries\": expected an integer from 0 to 4294967295");
  CHECK(submitted(c, "echo") == 0);
  auto shared =
      raw_call(c, "submit_batch",
               {{"payload_lens", {1}}, {"defaults", {{"type", "echo"}, {"timeout_ms", 0}}}}, "a");
  REQUIRE(shared);
  CHECK(shared->body["refused_from"]["index"] == 0);
  CHECK(shared->body["refused_from"]["message"] == "timeout_ms: 0 is outside " + bounds);
  CHECK(submitted(c, "echo") == 0);

  // The bounds themselves are accepted.
  for (json ok : {json{{"timeout_ms", 1}}, json{{"timeout_ms", 10000}},
                  json{{"retries", 4294967295u}}, json{{"retries", 0}}}) {
    json args{{"type", "echo"}};
    args.update(ok);
    INFO(args.dump());
    CHECK(raw_call(c, "submit", args, "x"));
  }
  CHECK(submitted(c, "echo") == 4);

  // poolctl: the lower bound on its command line, the upper one from poold.
  const std::string poolctl = std::string(SANDPOOL_BIN_DIR) + "/poolctl";
  auto zero = run_command(
      poolctl, {"--socket", f.socket, "submit", "echo", "x", "--timeout", "0ms", "--wait"});
  CHECK(zero.exit_code == 2);
  CHECK(zero.err.find("at least 1ms") != std::string::npos);
  auto huge = run_command(
      poolctl, {"--socket", f.socket, "submit", "echo", "x", "--timeout", "100000000h", "--wait"});
  CHECK(huge.exit_code == 1);
  CHECK(huge.err.find("timeout_ms") != std::string::npos);
  CHECK(huge.err.find("at most a year") != std::string::npos);
  CHECK(submitted(c, "echo") == 4);
}

}  // namespace sandpool::testing
