// sandpool-run driven as a user would: stdin in, lines out, exit codes.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include <sandpool/store/dead_letters.hpp>
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
  // 1100 MiB touched: past the default limit, so the attempt ends at it, not by the timeout
  // (10 minutes: touching 1 GiB took over 30 s, the default, on a 2-core VM at load 12).
  auto r = sandpool_run(
      {"--plugin", plugin("alloc"), "--retries", "0", "--timeout", "10m", "--json"}, "1100\n");
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
  auto none = sandpool_run(
      {"--plugin", plugin("alloc"), "--memory", "0", "--retries", "0", "--timeout", "10m"},
      "1100\n");
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

namespace {

// A file under /tmp holding `bytes`, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& bytes) {
    char tmpl[] = "/tmp/sandpool-run-file-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    REQUIRE(fd >= 0);
    path_ = tmpl;
    REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }
  ~TempFile() { std::filesystem::remove(path_); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string test_plugin(const std::string& name) {
  return std::string(SANDPOOL_TEST_PLUGIN_DIR) + "/lib" + name + ".so";
}

}  // namespace

TEST_CASE("sandpool-run --payload-file sends the file's bytes unchanged, NULs and newlines too") {
  const std::string bytes("a\0b\nc\r\n\xff", 8);
  TempFile file(bytes);
  auto r = sandpool_run({"--plugin", plugin("echo"), "--payload-file", file.path(), "--json"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["result_base64"] == "YQBiCmMNCv8=");
}

TEST_CASE("sandpool-run --payload-file takes an empty file as an empty payload") {
  TempFile file("");
  auto r = sandpool_run({"--plugin", plugin("echo"), "--payload-file", file.path()});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "1\tcompleted\t\n");
}

TEST_CASE("sandpool-run --result-file writes a completed task's result there, bytes unchanged") {
  const std::string bytes("\x89PNG\0\r\n\xff", 8);
  TempFile payload(bytes);
  TempFile result("stale, to be replaced");
  auto text = sandpool_run({"--plugin", plugin("echo"), "--payload-file", payload.path(),
                            "--result-file", result.path()});
  INFO(text.err);
  CHECK(text.exit_code == 0);
  CHECK(text.out == "1\tcompleted\twrote 8 bytes to " + result.path() + "\n");
  std::ifstream in(result.path(), std::ios::binary);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == bytes);
  auto json = sandpool_run(
      {"--plugin", plugin("echo"), "--payload", "hi", "--result-file", result.path(), "--json"});
  auto lines = json_lines(json.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["result_file"] == result.path());
  CHECK(lines[0]["result_bytes"] == 2);
  CHECK_FALSE(lines[0].contains("result"));
}

TEST_CASE("sandpool-run --result-file is left alone by a task that fails, and needs one payload") {
  TempFile result("untouched");
  auto failed =
      sandpool_run({"--plugin", plugin("fail"), "--payload", "x", "--result-file", result.path()});
  CHECK(failed.exit_code == 1);
  std::ifstream in(result.path(), std::ios::binary);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "untouched");
  auto from_stdin =
      sandpool_run({"--plugin", plugin("echo"), "--result-file", result.path()}, "a\n");
  CHECK(from_stdin.exit_code == 2);
  CHECK(from_stdin.err ==
        "sandpool-run: --result-file needs one task: --payload or --payload-file\n");
  auto unwritable = sandpool_run(
      {"--plugin", plugin("echo"), "--payload", "x", "--result-file", "/nonexistent/dir/out"});
  CHECK(unwritable.exit_code == 1);
  CHECK(unwritable.err.find("--result-file: cannot write '/nonexistent/dir/out'") !=
        std::string::npos);
}

TEST_CASE("sandpool-run exits 2 for a missing --payload-file, or one given with --payload") {
  auto missing =
      sandpool_run({"--plugin", plugin("echo"), "--payload-file", "/nonexistent/payload"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("--payload-file: cannot open '/nonexistent/payload'") !=
        std::string::npos);
  TempFile file("x");
  auto both =
      sandpool_run({"--plugin", plugin("echo"), "--payload-file", file.path(), "--payload", "y"});
  CHECK(both.exit_code == 2);
  CHECK(both.out.empty());
}

TEST_CASE("sandpool-run hands --plugin-config to the plugin's init, as text or @file") {
  // two_types' init fails when its config says {"init": "fail"}.
  auto fine = sandpool_run({"--plugin", test_plugin("two_types"), "--plugin-config",
                            R"({"init": "ok"})", "--payload", "x"});
  CHECK(fine.exit_code == 0);
  CHECK(fine.out == "1\tcompleted\talpha:x\n");
  auto failing = sandpool_run({"--plugin", test_plugin("two_types"), "--plugin-config",
                               R"({"init": "fail"})", "--payload", "x"});
  CHECK(failing.exit_code != 0);
  CHECK(failing.out.find("completed") == std::string::npos);
  TempFile config(R"({ "init" : "fail" })");
  auto from_file = sandpool_run({"--plugin", test_plugin("two_types"), "--plugin-config",
                                 "@" + config.path(), "--payload", "x"});
  CHECK(from_file.exit_code != 0);
  CHECK(from_file.out.find("completed") == std::string::npos);
}

TEST_CASE("sandpool-run exits 2 for a --plugin-config that is not a JSON object") {
  auto text = GENERATE(as<std::string>{}, "{", "[1, 2]", "\"a string\"", "@/nonexistent/config");
  auto r = sandpool_run({"--plugin", plugin("echo"), "--plugin-config", text, "--payload", "x"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--plugin-config") != std::string::npos);
  CHECK(r.out.empty());
}

// The README's Python example: init reads only what --init-read declares (sandbox.init).
TEST_CASE(
    "sandpool-run runs a Python handler whose init paths are declared, and names the key "
    "when they are not") {
  char tmpl[] = "/tmp/sandpool-run-py-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::filesystem::path dir(tmpl);
  {
    std::ofstream(dir / "tasks.py") << "import json\n"
                                       "def handle(p):\n"
                                       "    return json.dumps(sorted(json.loads(p)))\n";
  }
  // The workers run as the sandbox user: the directory and module must be theirs to read.
  std::filesystem::permissions(dir, std::filesystem::perms(0755));
  std::filesystem::permissions(dir / "tasks.py", std::filesystem::perms(0644));
  const std::string config = R"({"handler": "tasks:handle", "path": [")" + dir.string() + R"("]})";
  auto declared = sandpool_run({"--plugin", plugin("python"), "--init-read", "/usr/lib/python3.11",
                                "--init-read", dir.string(), "--plugin-config", config, "--payload",
                                "[3, 1, 2]"});
  INFO(declared.err);
  CHECK(declared.exit_code == 0);
  CHECK(declared.out == "1\tcompleted\t[1, 2, 3]\n");
  auto undeclared = sandpool_run(
      {"--plugin", plugin("python"), "--plugin-config", config, "--payload", "[3, 1, 2]"});
  CHECK(undeclared.exit_code != 0);
  CHECK(undeclared.err.find("sandbox.init.read_paths") != std::string::npos);
  std::filesystem::remove_all(dir);
}
