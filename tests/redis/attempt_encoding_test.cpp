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
