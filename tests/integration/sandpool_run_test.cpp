// sandpool-run driven as a user would: stdin in, lines out, exit codes.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <set>

#include <sandpool/dead_letters.hpp>
#include "command_runner.hpp"
#include "test_support.hpp"

using sandpool::testing::CommandResult;
using sandpool::testing::plugin;
using sandpool::testing::run_command;

namespace {

CommandResult sandpool_run(std::vector<std::string> args, const std::string& input = {}) {
  args.insert(args.begin(), {"--worker", SANDPOOL_WORKER_PATH});
  return run_command(SANDPOOL_BIN_DIR "/sandpool-run", args, input);
}

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::istringstream ss(out);
  for (std::string line; std::getline(ss, line);) v.push_back(nlohmann::json::parse(line));
  return v;
}

}  // namespace

TEST_CASE("sandpool-run uppercases each stdin line and prints JSON in input order") {
  auto r = sandpool_run({"--plugin", plugin("upper"), "--json"}, "a\nb\n");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["line"] == 1);
  CHECK(lines[0]["result"] == "A");
  CHECK(lines[0]["state"] == "completed");
  CHECK(lines[0]["attempts"] == 1);
  CHECK(lines[0]["error"].is_null());
  CHECK(lines[0]["id"].is_number_unsigned());
  CHECK(lines[1]["line"] == 2);
  CHECK(lines[1]["result"] == "B");
  CHECK_FALSE(lines[0].contains("reason"));
}

TEST_CASE("sandpool-run strips a trailing CR and treats an empty line as an empty payload") {
  auto r = sandpool_run({"--plugin", plugin("echo")}, "x\r\n\ny\n");
  CHECK(r.exit_code == 0);
  CHECK(r.out == "1\tcompleted\tx\n2\tcompleted\t\n3\tcompleted\ty\n");
}

TEST_CASE("sandpool-run takes one payload with --payload") {
  auto r = sandpool_run({"--plugin", plugin("upper"), "--payload", "shout"});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "1\tcompleted\tSHOUT\n");
}

TEST_CASE("sandpool-run prints a result that is not UTF-8 as base64") {
  auto r = sandpool_run({"--plugin", plugin("echo"), "--json"}, std::string("\xff\xfe", 2) + "\n");
  CHECK(r.exit_code == 0);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  CHECK_FALSE(lines[0].contains("result"));
  CHECK(lines[0]["result_base64"] == "//4=");
}

TEST_CASE("sandpool-run exits 1 when a task did not complete, with the reason") {
  auto r = sandpool_run({"--plugin", plugin("fail"), "--json"}, "x\n");
  CHECK(r.exit_code == 1);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["state"] == "dead_lettered");
  CHECK(lines[0]["reason"] == "permanent");
  CHECK(lines[0]["error"].is_string());
}

TEST_CASE("sandpool-run applies --timeout with units and --retries") {
  auto r = sandpool_run(
      {"--plugin", plugin("sleep"), "--timeout", "200ms", "--retries", "1", "--json"}, "60000\n");
  CHECK(r.exit_code == 1);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["reason"] == "retries_exhausted");
  CHECK(lines[0]["attempts"] == 2);
  // The history says what happened to each attempt, and where a timed-out worker was: inside
  // the plugin's handler. (The default 100 ms grace is short on a loaded machine, so an
  // attempt may lack its backtrace; the pool tests prove the capture with a longer one.)
  const auto& history = lines[0]["history"];
  REQUIRE(history.size() == 2);
  for (const auto& a : history) {
    CHECK(a["number"].is_number());
    CHECK(a["outcome"] == "timed_out");
    CHECK(a["error"].get<std::string>().find("timed out after 200 ms") == 0);
    CHECK(a["worker_pid"].get<int>() > 0);
    if (!a.contains("backtrace")) continue;
    CHECK(a["backtrace"].get<std::string>().find("sp_plugin_handle+0x") != std::string::npos);
    CHECK(a["backtrace"].get<std::string>().find("(libsleep.so)") != std::string::npos);
  }
}

TEST_CASE("sandpool-run prints no history for a task that completed on its first attempt") {
  auto r = sandpool_run({"--plugin", plugin("upper"), "--json"}, "a\n");
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  CHECK_FALSE(lines[0].contains("history"));
}

TEST_CASE("sandpool-run exits 2 with a message for a plugin that cannot be loaded") {
  auto r = sandpool_run({"--plugin", "/nonexistent/libx.so"}, "a\n");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("/nonexistent/libx.so") != std::string::npos);
  CHECK(r.out.empty());
}

TEST_CASE("sandpool-run --state-dir keeps the dead letters of a local run") {
  char tmpl[] = "/tmp/sandpool-run-state-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  auto r = sandpool_run({"--plugin", plugin("fail"), "--state-dir", dir}, "one\ntwo\n");
  CHECK(r.exit_code == 1);
  sandpool::DeadLetterStoreOptions o;
  o.state_dir = dir;
  auto store = sandpool::DeadLetterStore::open(o);
  REQUIRE(store);
  auto listed = (*store)->list({}, {});
  REQUIRE(listed);
  REQUIRE(listed->letters.size() == 2);
  // Two workers: the tasks may fail in either order.
  std::set<std::string> payloads{listed->letters[0].payload, listed->letters[1].payload};
  CHECK(payloads == std::set<std::string>{"one", "two"});
  CHECK(listed->letters[0].pool == "run");
  CHECK((*store)->close().is_ok());
  std::filesystem::remove_all(dir);
}

TEST_CASE("sandpool-run exits 2 for bad usage") {
  auto args = GENERATE(std::vector<std::string>{"--bogus"},
                       std::vector<std::string>{"--plugin", "x.so", "--timeout", "soon"},
                       std::vector<std::string>{"--plugin", "x.so", "--workers", "0"});
  auto r = sandpool_run(args);
  CHECK(r.exit_code == 2);
  CHECK_FALSE(r.err.empty());
}

TEST_CASE("sandpool-run limits each worker's memory to 1 GiB by default") {
  // 1100 MiB touched: past the default limit, so the attempt ends at it, not by the timeout.
  auto r = sandpool_run({"--plugin", plugin("alloc"), "--retries", "0", "--json"}, "1100\n");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["error"].get<std::string>().rfind("resource_limit: memory", 0) == 0);
}

TEST_CASE("sandpool-run takes --memory, and 0 lifts the limit") {
  auto small = sandpool_run(
      {"--plugin", plugin("alloc"), "--memory", "64MiB", "--retries", "0", "--json"}, "128\n");
  INFO(small.out << small.err);
  REQUIRE(json_lines(small.out).size() == 1);
  CHECK(json_lines(small.out)[0]["error"].get<std::string>().rfind("resource_limit: memory", 0) ==
        0);
  auto none =
      sandpool_run({"--plugin", plugin("alloc"), "--memory", "0", "--retries", "0"}, "1100\n");
  INFO(none.out << none.err);
  CHECK(none.exit_code == 0);
  CHECK(none.out == "1\tcompleted\tallocated 1100 MiB, holding 1100 MiB\n");
}

TEST_CASE("sandpool-run takes --cpu-time, --file-size, --processes and --open-files") {
  auto r = sandpool_run({"--plugin", plugin("cpu"), "--cpu-time", "100ms", "--file-size", "1MiB",
                         "--processes", "64", "--open-files", "32", "--retries", "0", "--json"},
                        "60000\n");  // 60 s of CPU asked, 100 ms allowed
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["error"].get<std::string>().rfind("resource_limit: cpu", 0) == 0);
}

TEST_CASE("sandpool-run exits 2 for a malformed limit, naming the flag") {
  auto [flag, value] = GENERATE(table<std::string, std::string>({{"--memory", "lots"},
                                                                 {"--file-size", "-1"},
                                                                 {"--cpu-time", "soon"},
                                                                 {"--processes", "many"}}));
  auto r = sandpool_run({"--plugin", plugin("echo"), flag, value}, "a\n");
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find(flag) != std::string::npos);
}

TEST_CASE("sandpool-run refuses an unknown task type with exit 2") {
  auto r = sandpool_run({"--plugin", plugin("echo"), "--type", "nope"}, "a\n");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("nope") != std::string::npos);
}
