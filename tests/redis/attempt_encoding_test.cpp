// feeder::encode, the JSON of an attempt as a task's hash records it: written by hand for
// speed, it must give the bytes nlohmann::json gives (encode_json), which readers of the
// hash (task ID, the dashboard) parse.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "redis/redis_feeder_threads.hpp"

using namespace sandpool;

TEST_CASE("an attempt is encoded as nlohmann::json encodes it, whatever its strings hold") {
  const std::string error =
      GENERATE(as<std::string>{}, "", "boom", "say \"hi\"\\ there", "tab\there\nnew line\r\b\f",
               std::string("nul\0x", 5), "\x01\x1f\x7f control", "caf\xc3\xa9 (UTF-8)",
               "bad \xff\xfe byte", "/slash/ and 'quote'");
  const std::string backtrace = GENERATE(as<std::string>{}, "", "#0 main\n#1 start", "\xe2\x82");
  Attempt a;
  a.number = 3;
  a.outcome = Outcome::kTimedOut;
  a.error = error;
  a.worker_pid = 4242;
  a.started_ms = 1765000000123;
  a.ended_ms = 1765000000456;
  a.backtrace = backtrace;
  INFO("error '" << error << "', backtrace '" << backtrace << "'");
  const std::string fast = redis::feeder::encode(a);
  CHECK(fast == redis::feeder::encode_json(a));
  const auto back = nlohmann::json::parse(fast, nullptr, false);
  REQUIRE(back.is_object());
  CHECK(back.at("number") == 3);
  CHECK(back.at("outcome") == "timed_out");
}

TEST_CASE("an attempt's negative and zero numbers are encoded as nlohmann::json encodes them") {
  Attempt a;
  a.outcome = Outcome::kOk;
  a.worker_pid = -1;
  CHECK(redis::feeder::encode(a) == redis::feeder::encode_json(a));
  CHECK(redis::feeder::encode(a) ==
        R"({"ended_ms":0,"error":"","number":0,"outcome":"ok","started_ms":0,"worker_pid":-1})");
}

TEST_CASE("an attempt with no error is stored compact, and read back as its JSON") {
  Attempt a;
  a.number = GENERATE(1u, 4000000000u);
  a.outcome = GENERATE(Outcome::kOk, Outcome::kSandboxViolation);
  a.worker_pid = GENERATE(4242, -1, 2147483647);
  a.started_ms = 1765000000123;
  a.ended_ms = a.started_ms + GENERATE(0, 1, 86400000);
  const std::string stored = redis::feeder::encode_stored(a);
  INFO(stored);
  CHECK(stored.size() <= redis::feeder::kMaxCompact);
  CHECK(stored.front() != '{');
  CHECK(redis::feeder::stored_as_json(stored) == redis::feeder::encode(a));
}

TEST_CASE("an attempt with an error or a backtrace is stored as its JSON, read back the same") {
  Attempt a;
  a.number = 2;
  a.outcome = Outcome::kTimedOut;
  a.started_ms = 5;
  a.ended_ms = 9;
  SECTION("an error") { a.error = "boom"; }
  SECTION("a backtrace") { a.backtrace = "#0 main"; }
  SECTION("an end before its start (a clock step)") { a.ended_ms = 1; }
  const std::string stored = redis::feeder::encode_stored(a);
  CHECK(stored == redis::feeder::encode(a));
  CHECK(redis::feeder::stored_as_json(stored) == stored);
}

TEST_CASE("a stored attempt that is not one of the two forms is read back as it is") {
  for (const std::string bad :
       {"", "1 ok", "1 nope 4 5 6", "1 ok 4 5 6 7", "x ok 4 5 6", "1 ok 4 5 "}) {
    CHECK(redis::feeder::stored_as_json(bad) == bad);
  }
}
