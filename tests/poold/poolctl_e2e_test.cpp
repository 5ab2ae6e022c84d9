// End to end: the real poolctl binary against a real poold, every command, checking what a
// user sees (output and exit codes). poold runs on a scratch config, state dir and socket.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "command_runner.hpp"
#include "poold_process.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

using nlohmann::json;

std::string poolctl_path() { return std::string(SANDPOOL_BIN_DIR) + "/poolctl"; }

struct Ctl {
  std::string socket;
  CommandResult operator()(std::vector<std::string> args, const std::string& input = {}) const {
    args.insert(args.begin(), {"--socket", socket});
    return run_command(poolctl_path(), args, input);
  }
  json json_of(std::vector<std::string> args) const {
    args.push_back("--json");
    auto r = (*this)(args);
    INFO("poolctl " << args[0] << ": " << r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
  }
};

// The entry of pool `name` in a `status --json` reply.
json pool_of(const json& status, const std::string& name) {
  for (const auto& p : status["pools"]) {
    if (p["name"] == name) return p;
  }
  FAIL("no pool " << name << " in " << status.dump());
  return {};
}

std::string pools() {
  return "pools:\n" + pool_yaml("echo", "echo", "", "{min: 1, max: 4, initial: 2}") +
         pool_yaml("upper", "upper") + pool_yaml("fail", "fail") +
         pool_yaml("sleep", "sleep", "    task_defaults: {timeout: 30s}\n");
}

}  // namespace

TEST_CASE("poolctl drives a real poold: status, submit, task, batch, stats, workers") {
  PooldFixture f(pools());
  Ctl ctl{f.socket};
  auto status = ctl({"status"});
  CHECK(status.exit_code == 0);
  CHECK(status.out.find("upper") != std::string::npos);
  CHECK(ctl.json_of({"status"})["pools"].size() == 4);

  auto waited = ctl({"submit", "upper", "hello", "--wait"});
  CHECK(waited.exit_code == 0);
  CHECK(waited.out.find("HELLO") != std::string::npos);
  auto from_stdin = ctl({"submit", "upper", "-", "--wait"}, "piped");
  CHECK(from_stdin.out.find("PIPED") != std::string::npos);

  const json submitted = ctl.json_of({"submit", "echo", "x", "--idempotency-key", "k1"});
  const std::uint64_t id = submitted["id"];
  const json again = ctl.json_of({"submit", "echo", "x", "--idempotency-key", "k1"});
  CHECK(again["id"] == id);
  CHECK(again["existing"] == true);
  auto task = ctl({"task", std::to_string(id)});
  CHECK(task.exit_code == 0);
  CHECK(task.out.find(std::to_string(id)) != std::string::npos);
  CHECK(ctl({"task", "999999999"}).exit_code == 1);

  auto batch = ctl({"batch", "echo", "2000", "--payload-size", "16"});
  CHECK(batch.exit_code == 0);
  CHECK(batch.out.find("2000 of 2000") != std::string::npos);

  const json stats = ctl.json_of({"stats", "echo"});
  REQUIRE(stats["pools"].size() == 1);
  CHECK(stats["pools"][0]["name"] == "echo");
  const json workers = ctl.json_of({"workers", "echo"});
  CHECK(workers["workers"].size() == 2);
  CHECK(workers["workers"][0].contains("last_beat_ms"));

  auto failed = ctl({"submit", "fail", "nope", "--wait"});
  CHECK(failed.exit_code == 1);  // the task did not complete
  CHECK(ctl({"submit", "nosuchtype", "x"}).exit_code == 1);
  CHECK(ctl({"frobnicate"}).exit_code == 2);
}

TEST_CASE("poolctl batch larger than the queue waits for room and gets every task in") {
  // 20,000 tasks into a queue of 500: one request of 2,000 already overflows it, so poolctl
  // must pause and resend the refused part (docs/poolctl.md, "batch").
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo", "    queue: {capacity: 500}\n",
                                        "{min: 1, max: 2, initial: 2}"));
  Ctl ctl{f.socket};
  const json summary = ctl.json_of({"batch", "echo", "20000", "--payload-size", "8"});
  CHECK(summary["accepted"] == 20000);
  CHECK(summary["refused"] == 0);
  CHECK(summary["resubmitted"].get<std::uint64_t>() > 0);
}

TEST_CASE("poolctl drives a real poold: controls, kill-worker, cancel, events, dlq, shutdown") {
  PooldFixture f(pools());
  Ctl ctl{f.socket};
  // Each command's effect, as `status`, `workers`, `task` and `dlq list` show it afterwards.
  CHECK(ctl({"scale", "echo", "3"}).exit_code == 0);
  CHECK(pool_of(ctl.json_of({"status"}), "echo")["target_workers"] == 3);
  CHECK(poll_until([&] { return ctl.json_of({"workers", "echo"})["workers"].size() == 3; }));
  CHECK(ctl({"scale", "echo", "99"}).exit_code == 1);  // past workers.max
  CHECK(pool_of(ctl.json_of({"status"}), "echo")["target_workers"] == 3);
  CHECK(pool_of(ctl.json_of({"status"}), "echo")["dispatch"] == "round-robin");
  // An unknown name is refused with the names to use, each of which is taken.
  auto unknown = ctl({"strategy", "echo", "fastest"});
  CHECK(unknown.exit_code == 1);
  REQUIRE(unknown.err.rfind("strategy: ") != std::string::npos);
  const std::string suggested = unknown.err.substr(unknown.err.rfind("strategy: ") + 10);
  std::istringstream words(suggested);
  int taken = 0;
  for (std::string w; words >> w;) {
    if (w == "or") continue;
    if (w.back() == ',') w.pop_back();
    INFO("suggested: " << suggested);
    CHECK(ctl({"strategy", "echo", w}).exit_code == 0);
    CHECK(pool_of(ctl.json_of({"status"}), "echo")["dispatch"] == w);
    ++taken;
  }
  CHECK(taken == 6);  // round-robin, least-loaded, random, affinity, least-rss, by-key
  CHECK(ctl({"strategy", "echo", "least-loaded"}).exit_code == 0);
  CHECK(pool_of(ctl.json_of({"status"}), "echo")["dispatch"] == "least-loaded");

  CHECK(ctl({"drain", "upper"}).exit_code == 0);
  CHECK(pool_of(ctl.json_of({"status"}), "upper")["state"] == "draining");
  CHECK(ctl({"submit", "upper", "x"}).exit_code == 1);
  CHECK(ctl({"resume", "upper"}).exit_code == 0);
  CHECK(pool_of(ctl.json_of({"status"}), "upper")["state"] == "running");
  CHECK(ctl({"submit", "upper", "x", "--wait"}).exit_code == 0);

  const std::set<int> upper_before = worker_pids(ctl.json_of({"workers", "upper"}));
  REQUIRE(upper_before.size() == 1);
  CHECK(ctl({"restart", "upper", "--rolling"}).exit_code == 0);
  CHECK(poll_until([&] {  // every worker replaced, the new one serving
    const json w = ctl.json_of({"workers", "upper"});
    if (w["workers"].size() != 1 || w["workers"][0]["state"] != "idle") return false;
    return upper_before.count(w["workers"][0]["pid"].get<int>()) == 0;
  }));
  CHECK(ctl({"submit", "upper", "y", "--wait"}).exit_code == 0);

  const json w = ctl.json_of({"workers", "sleep"});
  REQUIRE(w["workers"].size() == 1);
  const std::int64_t pid = w["workers"][0]["pid"];
  CHECK(ctl({"kill-worker", "sleep", std::to_string(pid), "--signal", "KILL"}).exit_code == 0);
  CHECK(poll_until([&] {
    const json now = ctl.json_of({"workers", "sleep"});
    return now["workers"].size() == 1 && now["workers"][0]["pid"] != pid;
  }));
  CHECK(ctl({"kill-worker", "sleep", "1", "--signal", "KILL"}).exit_code == 1);

  const json slow = ctl.json_of({"submit", "sleep", "60000"});
  const std::string slow_id = std::to_string(slow["id"].get<std::uint64_t>());
  CHECK(ctl({"cancel", slow_id}).exit_code == 0);
  CHECK(poll_until([&] { return ctl.json_of({"task", slow_id})["state"] == "cancelled"; }));

  auto events = ctl({"events", "--pool", "sleep", "--json"});
  CHECK(events.exit_code == 0);
  bool killed_seen = false;
  std::istringstream lines(events.out);
  for (std::string line; std::getline(lines, line);) {
    const json e = json::parse(line);
    killed_seen = killed_seen || (e["event"] == "worker_exited" && e["pid"] == pid);
  }
  CHECK(killed_seen);

  CHECK(ctl({"submit", "fail", "letter", "--wait"}).exit_code == 1);
  const json letters = ctl.json_of({"dlq", "list"});
  REQUIRE(letters["entries"].size() == 1);
  const std::uint64_t letter = letters["entries"][0]["letter_id"];
  const std::uint64_t dead_task = letters["entries"][0]["task_id"];
  auto shown = ctl({"dlq", "show", std::to_string(letter)});
  CHECK(shown.exit_code == 0);
  CHECK(shown.out.find("letter") != std::string::npos);
  CHECK(ctl({"dlq", "replay", std::to_string(letter)}).exit_code == 0);
  CHECK(ctl({"dlq", "show", std::to_string(letter)}).exit_code == 1);  // it left the store
  // The replayed task ran again (and failed again): a new letter for the same task.
  CHECK(poll_until([&] {
    const json now = ctl.json_of({"dlq", "list"});
    return now["entries"].size() == 1 && now["entries"][0]["task_id"] == dead_task &&
           now["entries"][0]["letter_id"] != letter;
  }));
  CHECK(ctl({"dlq", "purge", "--older-than", "0ms"}).exit_code == 0);
  CHECK(ctl.json_of({"dlq", "list"})["entries"].empty());

  // reload re-reads the file: a dispatch written there replaces the one set at run time.
  write_file(f.config, service_yaml(f.dir.path) + "pools:\n" +
                           pool_yaml("echo", "echo", "    dispatch: random\n",
                                     "{min: 1, max: 4, initial: 2}") +
                           pool_yaml("upper", "upper") + pool_yaml("fail", "fail") +
                           pool_yaml("sleep", "sleep", "    task_defaults: {timeout: 30s}\n"));
  CHECK(ctl({"reload"}).exit_code == 0);
  CHECK(pool_of(ctl.json_of({"status"}), "echo")["dispatch"] == "random");
  auto top = ctl({"top", "--iterations", "1"});
  CHECK(top.exit_code == 0);
  CHECK(top.out.find("echo") != std::string::npos);

  CHECK(ctl({"shutdown", "--timeout", "5s"}).exit_code == 0);
  CHECK(f.poold->wait_exit() == 0);
  CHECK(ctl({"status"}).exit_code == 3);  // nobody answers any more
}

}  // namespace sandpool::testing
