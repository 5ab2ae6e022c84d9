// The request/reply commands of the real poolctl against a scripted service: human output,
// --json, what poolctl sent, and the exit codes (0 ok, 1 failed, 2 usage, 3 unreachable).
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "poolctl_runner.hpp"
#include "scripted_service.hpp"

using namespace sandpool::testing;
using nlohmann::json;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A listening Unix socket nobody serves. Owns the socket; the file goes with the TempDir.
class SilentListener {
 public:
  explicit SilentListener(std::string path) : path_(std::move(path)) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    REQUIRE(path_.size() < sizeof addr.sun_path);
    std::memcpy(addr.sun_path, path_.data(), path_.size());
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 64) == 0);
  }
  ~SilentListener() { ::close(fd_); }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  const std::string& path() const { return path_; }
  // How many connections were made to it so far (accepting, and closing, each).
  int connections() {
    int n = 0;
    for (int c; (c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; ++n) ::close(c);
    return n;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// A table line's cells: columns are two or more spaces apart, a header may hold one.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < line.size()) {
    std::size_t end = line.find("  ", i);
    if (end == std::string::npos) end = line.size();
    out.push_back(line.substr(i, end - i));
    i = line.find_first_not_of(' ', end);
  }
  return out;
}

// The cells of line `n` (0: the header) of poolctl's output.
std::vector<std::string> row(const std::string& out, std::size_t n) {
  std::istringstream in(out);
  std::string line;
  for (std::size_t i = 0; i <= n; ++i) REQUIRE(std::getline(in, line));
  return cells(line);
}

using Cells = std::vector<std::string>;

}  // namespace

TEST_CASE("status prints the service and its pools, or one JSON object") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"status"});
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "pid:"));
  CHECK(contains(r.out, "4242"));
  CHECK(contains(r.out, "default"));
  auto j = poolctl(service.socket(), {"--json", "status"});
  REQUIRE(j.exit_code == 0);
  CHECK(json::parse(j.out)["pools"][0]["name"] == "default");
}

TEST_CASE(
    "workers shows pid, state, tasks, RSS, CPU, uptime, restarts and last beat, and only those") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"workers"});
  REQUIRE(r.exit_code == 0);
  CHECK(row(r.out, 0) == Cells{"POOL", "PID", "STATE", "TASKS DONE", "IN FLIGHT", "RSS", "CPU",
                               "UPTIME", "RESTARTS", "LAST BEAT"});
  const Cells first = row(r.out, 1);
  REQUIRE(first.size() == 10);
  CHECK(Cells(first.begin(), first.end() - 1) ==
        Cells{"default", "4101", "ready", "1234", "1", "3.0 MiB", "2.5s", "1h02m", "2"});
  CHECK(contains(first.back(), "ago"));
  CHECK_FALSE(contains(r.out, "seccomp"));
  auto j = poolctl(service.socket(), {"workers", "default", "--json"});
  REQUIRE(j.exit_code == 0);
  CHECK(json::parse(j.out)["workers"].size() == 2);
  CHECK(service.requests("workers").back().args["pool"] == "default");
  auto missing = poolctl(service.socket(), {"workers", "nope"});
  CHECK(missing.exit_code == 1);
  CHECK(contains(missing.err, "no pool named nope"));
}

TEST_CASE("workers --wide adds the slot and the whole isolation string, and --json is unchanged") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"workers", "--wide"});
  REQUIRE(r.exit_code == 0);
  CHECK(row(r.out, 0) == Cells{"POOL", "SLOT", "PID", "STATE", "TASKS DONE", "IN FLIGHT", "RSS",
                               "CPU", "UPTIME", "RESTARTS", "LAST BEAT", "ISOLATION"});
  const std::string isolation =
      "ns:user,pid,net,ipc,uts,mnt+rlimits+uid:65534+caps:none+landlock:v7+seccomp:strict+"
      "cgroup:v1";
  CHECK(row(r.out, 2).back() == isolation);
  CHECK(row(r.out, 2)[1] == "1");
  auto j = poolctl(service.socket(), {"workers", "--wide", "--json"});
  REQUIRE(j.exit_code == 0);
  // The same reply with or without --wide (but for last_beat_ms: each reply is made anew).
  auto without_beats = [](const std::string& out) {
    json w = json::parse(out)["workers"];
    for (json& e : w) e.erase("last_beat_ms");
    return w;
  };
  CHECK(without_beats(j.out)[0]["isolation"] == isolation);
  CHECK(without_beats(j.out) ==
        without_beats(poolctl(service.socket(), {"--json", "workers"}).out));
}

TEST_CASE(
    "stats shows state, workers, queued, in flight, completed, dead-lettered and p50/p99, and only "
    "those") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"stats", "default"});
  REQUIRE(r.exit_code == 0);
  CHECK(row(r.out, 0) == Cells{"NAME", "STATE", "WORKERS", "QUEUED", "IN FLIGHT", "COMPLETED",
                               "DEAD LETTERED", "LATENCY P50", "LATENCY P99"});
  CHECK(row(r.out, 1) == Cells{"default", "running", "2", "0", "1", "1000", "1", "1.5ms", "12ms"});
  CHECK(service.requests("stats").back().args["pool"] == "default");
}

TEST_CASE("stats --wide shows every field the service sends, and --json is the reply unchanged") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"stats", "-w"});
  REQUIRE(r.exit_code == 0);
  const Cells headers = row(r.out, 0);
  CHECK(headers == Cells{"NAME",
                         "STATE",
                         "WORKERS",
                         "QUEUED",
                         "IN FLIGHT",
                         "COMPLETED",
                         "DEAD LETTERED",
                         "LATENCY P50",
                         "LATENCY P99",
                         "CANCELLED",
                         "CRASH LOOP",
                         "EXPIRED",
                         "HEARTBEAT KILLS",
                         "LATENCY P90",
                         "LETTERS PENDING",
                         "LOST",
                         "OUTPUT DROPPED",
                         "QUEUE WAIT P50",
                         "QUEUE WAIT P99",
                         "RECYCLED",
                         "RESTARTS",
                         "RETRIED",
                         "RETRY WAIT",
                         "SCHEDULED",
                         "SUBMITTED",
                         "TARGET WORKERS",
                         "THROTTLED"});
  CHECK(row(r.out, 1).size() == headers.size());
  // --json prints the service's reply as it came, with or without --wide (the second
  // stats call of this service: its counters moved by one call's worth).
  auto j = poolctl(service.socket(), {"stats", "--wide", "--json"});
  REQUIRE(j.exit_code == 0);
  const json pool = json::parse(j.out)["pools"][0];
  CHECK(pool.size() == 25);
  CHECK(pool["tenants"].is_array());
  CHECK(pool["completed"] == 2000);
  CHECK(pool["queue_wait_ms"] == json{{"p50", 0.25}, {"p99", 3}});
  auto plain = poolctl(service.socket(), {"--json", "stats"});
  REQUIRE(plain.exit_code == 0);
  CHECK(json::parse(plain.out)["pools"][0].size() == 25);
}

TEST_CASE(
    "task shows state, attempts, the history and its backtraces, and fails on an unknown id") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"task", "7"});
  REQUIRE(r.exit_code == 0);
  for (const char* part : {"dead_lettered", "retries_exhausted", "history:", "OUTCOME", "timeout",
                           "4102", "backtrace of attempt 2:", "  #0 spin_forever"}) {
    CHECK(contains(r.out, part));
  }
  auto j = poolctl(service.socket(), {"--json", "task", "7"});
  REQUIRE(j.exit_code == 0);
  CHECK(json::parse(j.out)["history"].size() == 2);
  auto missing = poolctl(service.socket(), {"task", "404"});
  CHECK(missing.exit_code == 1);
  CHECK(contains(missing.err, "not_found"));
}

TEST_CASE("cancel, scale, strategy, drain, resume and restart send their arguments") {
  TempDir dir;
  ScriptedService service(dir.path());
  CHECK(poolctl(service.socket(), {"cancel", "9"}).exit_code == 0);
  CHECK(service.requests("cancel").back().args["id"] == 9);
  auto scale = poolctl(service.socket(), {"scale", "default", "4"});
  CHECK(scale.exit_code == 0);
  CHECK(contains(scale.out, "scaling to 4 workers"));
  CHECK(service.requests("scale").back().args["workers"] == 4);
  CHECK(poolctl(service.socket(), {"scale", "nope", "4"}).exit_code == 1);
  CHECK(poolctl(service.socket(), {"strategy", "default", "least-loaded"}).exit_code == 0);
  CHECK(service.requests("strategy").back().args["strategy"] == "least-loaded");
  CHECK(poolctl(service.socket(), {"drain", "default"}).exit_code == 0);
  CHECK(poolctl(service.socket(), {"resume", "default"}).exit_code == 0);
  CHECK(service.requests("drain").size() == 1);
  CHECK(service.requests("resume").size() == 1);
  CHECK(poolctl(service.socket(), {"restart", "default", "--rolling"}).exit_code == 0);
  CHECK(service.requests("restart").back().args["rolling"] == true);
  auto j = poolctl(service.socket(), {"restart", "default", "--json"});
  CHECK(j.exit_code == 0);
  CHECK(json::parse(j.out).is_object());
  CHECK(service.requests("restart").back().args["rolling"] == false);
}

TEST_CASE("kill-worker takes signal names and numbers and fails on an unknown worker") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto signal_sent = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"kill-worker", "default", "4101"};
    args.insert(args.end(), extra.begin(), extra.end());
    REQUIRE(poolctl(service.socket(), args).exit_code == 0);
    return service.requests("kill_worker").back().args["signal"].get<int>();
  };
  CHECK(signal_sent({}) == 9);
  CHECK(signal_sent({"--signal", "TERM"}) == 15);
  CHECK(signal_sent({"--signal", "SIGSEGV"}) == 11);
  CHECK(signal_sent({"--signal", "2"}) == 2);
  CHECK(
      poolctl(service.socket(), {"kill-worker", "default", "4101", "--signal", "NOPE"}).exit_code ==
      2);
  CHECK(poolctl(service.socket(), {"kill-worker", "default", "999"}).exit_code == 1);
}

TEST_CASE("dlq list, show, replay and purge go through the service") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto list = poolctl(service.socket(), {"dlq", "list", "--pool", "default", "--limit", "1"});
  REQUIRE(list.exit_code == 0);
  CHECK(contains(list.out, "retries_exhausted"));
  CHECK(contains(list.out, "1m00s ago"));
  CHECK(contains(list.out, "more: --cursor 1"));
  CHECK(service.requests("dlq_list").back().args["pool"] == "default");
  auto show = poolctl(service.socket(), {"dlq", "show", "1"});
  REQUIRE(show.exit_code == 0);
  CHECK(contains(show.out, "the payload"));
  auto show_json = poolctl(service.socket(), {"--json", "dlq", "show", "1"});
  CHECK(json::parse(show_json.out)["payload"] == "the payload");
  CHECK(poolctl(service.socket(), {"dlq", "show", "5"}).exit_code == 1);
  auto replay = poolctl(service.socket(), {"dlq", "replay", "1"});
  CHECK(replay.exit_code == 0);
  CHECK(contains(replay.out, "1 dead letters replayed"));
  CHECK(poolctl(service.socket(), {"dlq", "replay", "--all"}).exit_code == 0);
  CHECK(service.requests("dlq_replay").back().args["all"] == true);
  auto left = poolctl(service.socket(), {"dlq", "replay", "--reason", "shutdown"});
  CHECK(left.exit_code == 0);
  CHECK(contains(left.out, "2 dead letters replayed"));
  CHECK(contains(left.out, "1 not replayed (left in place): invalid_argument: task 7 is live"));
  CHECK(service.requests("dlq_replay").back().args["filter"]["reason"] == "shutdown");
  auto purge = poolctl(service.socket(), {"dlq", "purge", "--older-than", "168h"});
  CHECK(purge.exit_code == 0);
  CHECK(service.requests("dlq_purge").back().args["older_than_ms"] == 168 * 3600000LL);
  CHECK(poolctl(service.socket(), {"dlq", "replay"}).exit_code == 2);
  CHECK(poolctl(service.socket(), {"dlq", "purge", "1", "--all"}).exit_code == 2);
}

TEST_CASE("dlq list through the service shows first the letter id that show takes") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto list = poolctl(service.socket(), {"dlq", "list"});
  REQUIRE(list.exit_code == 0);
  std::istringstream lines(list.out);
  std::string header, row, first_header, first_cell;
  REQUIRE(std::getline(lines, header));
  REQUIRE(std::getline(lines, row));
  std::istringstream(header) >> first_header;
  std::istringstream(row) >> first_cell;
  CHECK(first_header == "ID");
  CHECK(first_cell == "1");  // the letter id (the scripted letter's task is 7)
  CHECK_FALSE(contains(header, "LETTER ID"));
  CHECK(poolctl(service.socket(), {"dlq", "show", first_cell}).exit_code == 0);
}

TEST_CASE("reload prints what changed and shutdown sends its timeout") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto reload = poolctl(service.socket(), {"reload"});
  CHECK(reload.exit_code == 0);
  CHECK(contains(reload.out, "images"));
  CHECK(poolctl(service.socket(), {"shutdown", "--timeout", "5s"}).exit_code == 0);
  CHECK(service.requests("shutdown").back().args["timeout_ms"] == 5000);
}

TEST_CASE("a bad command line exits 2 without contacting the service") {
  TempDir dir;
  // A socket that listens but never answers: any connection poolctl made would wait in its
  // backlog, and poolctl itself would hang on the hello until its timeout.
  SilentListener service(dir.path() + "/poold.sock");
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"frobnicate"},
      {"scale", "default"},
      {"scale", "default", "many"},
      {"task"},
      {"shutdown", "--timeout", "soon"},
      {"top", "--interval", "-1s"},
      {"batch", "noop"},
      {"batch", "noop", "10", "--payload-size", "huge"},
      {"submit", "echo", "text", "--file", "/etc/hostname"},
      {"submit", "echo", "--file", dir.path() + "/missing"},
      {"submit", "echo", "x", "--timeout", "0ms"},
      {"submit", "echo", "x", "--timeout", "0.4ms"},  // rounds to 0
      {"submit", "echo", "x", "--retries", "4294967296"},
      {"dlq"},
      {"status", "--no-such-flag"}};
  for (const auto& args : bad) {
    INFO("poolctl " << json(args).dump());
    CHECK(poolctl(service.path(), args).exit_code == 2);
  }
  CHECK(poolctl(service.path(), {"--help"}).exit_code == 0);
  CHECK(service.connections() == 0);
}

TEST_CASE("an unreachable service exits 3 and names the socket") {
  TempDir dir;
  auto missing = poolctl(dir.path() + "/absent.sock", {"status"});
  CHECK(missing.exit_code == 3);
  CHECK(contains(missing.err, dir.path() + "/absent.sock"));
  std::ofstream(dir.path() + "/file.sock") << "not a socket";
  CHECK(poolctl(dir.path() + "/file.sock", {"workers"}).exit_code == 3);
}
