// Reloads applied to running pools (docs/operations.md, "Reload"): workers and dispatch in
// place; new limits through a rolling restart (new pids that carry the new rlimit, no task
// lost); a removed pool's leftovers dead-lettered `pool_removed`.
#include <catch2/catch.hpp>
#include <fstream>
#include <future>
#include <set>
#include <sstream>

#include "event_watcher.hpp"
#include "poold_process.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

using nlohmann::json;

// Submits `n` waited tasks; the futures hold their final accounts.
std::vector<std::future<Result<TaskReply>>> submit_waited(Client& c, const SubmitRequest& t,
                                                          int n) {
  std::vector<std::future<Result<TaskReply>>> out;
  for (int i = 0; i < n; ++i) {
    auto p = std::make_shared<std::promise<Result<TaskReply>>>();
    out.push_back(p->get_future());
    REQUIRE(c.submit_async(t, [p](Result<TaskReply> r) { p->set_value(std::move(r)); }).is_ok());
  }
  return out;
}

void require_all_completed(std::vector<std::future<Result<TaskReply>>>& waits) {
  for (auto& w : waits) {
    REQUIRE(w.wait_for(kPatience) == std::future_status::ready);
    auto r = w.get();
    REQUIRE(r);
    CHECK(r->state == "completed");
  }
}

std::set<int> pids_of(const json& workers) {
  std::set<int> out;
  for (const auto& w : workers["workers"]) out.insert(w["pid"].get<int>());
  return out;
}

// The soft "Max open files" limit of a process, from /proc/PID/limits.
std::string open_files_limit(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/limits");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream fields(line.substr(std::string("Max open files").size()));
    std::string soft;
    fields >> soft;
    return soft;
  }
  return "";
}

json pool_status(Client& c, const std::string& name) {
  auto s = as_json(c.status());
  REQUIRE(s);
  for (const auto& p : (*s)["pools"]) {
    if (p["name"] == name) return p;
  }
  FAIL("no pool " << name << " in status");
  return {};
}

TEST_CASE("poold: a reload of workers and dispatch applies to the running pool, tasks kept") {
  const std::string before = pool_yaml("sleep", "sleep", "    concurrency: 1\n");
  PooldFixture f("pools:\n" + before);
  Client c = f.connect();
  auto old_workers = as_json(c.workers("sleep"));
  REQUIRE(old_workers);
  const std::set<int> old_pids = pids_of(*old_workers);
  REQUIRE(old_pids.size() == 1);
  // The only worker holds a task until the test cancels it: three more wait in the queue
  // through the reload.
  auto holder = c.submit(task("sleep", "600000"));
  REQUIRE(holder);
  REQUIRE(wait_task_state(c, holder->id, "running"));
  auto waits = submit_waited(c, task("sleep", "1"), 3);
  REQUIRE(poll_until([&] { return pool_status(c, "sleep")["queued"].get<int>() >= 2; }));
  CHECK(pool_status(c, "sleep")["dispatch"] == "round-robin");

  write_file(f.config,
             service_yaml(f.dir.path) + "pools:\n" +
                 pool_yaml("sleep", "sleep", "    concurrency: 1\n    dispatch: least-loaded\n",
                           "{min: 1, max: 4, initial: 2}"));
  auto applied = as_json(c.reload());
  REQUIRE(applied);
  CHECK((*applied)["replaced"].empty());
  REQUIRE((*applied)["reconfigured"].size() == 1);
  CHECK((*applied)["reconfigured"][0] == json{{"pool", "sleep"}, {"rolling_restart", false}});
  CHECK((*applied)["scaled"][0] == json{{"pool", "sleep"}, {"workers", 2}});
  CHECK((*applied)["strategy_changed"][0] == "sleep");

  const json status = pool_status(c, "sleep");
  CHECK(status["target_workers"] == 2);
  CHECK(status["dispatch"] == "least-loaded");
  auto now_workers = as_json(c.workers("sleep"));
  REQUIRE(now_workers);
  for (int pid : old_pids) CHECK(pids_of(*now_workers).count(pid) == 1);  // not replaced
  CHECK(c.task(holder->id)->state == "running");  // on the same worker, untouched
  require_all_completed(waits);                   // on the worker the reload added
  REQUIRE(as_json(c.cancel(holder->id)));
  REQUIRE(wait_task_state(c, holder->id, "cancelled"));
  auto stats = as_json(c.stats("sleep"));
  REQUIRE(stats);
  CHECK((*stats)["pools"][0]["submitted"] == 4);  // the same pool: its counters go on
  CHECK((*stats)["pools"][0]["completed"] == 3);
  CHECK((*stats)["pools"][0]["cancelled"] == 1);
}

TEST_CASE("poold: a reload that changes sandbox.namespaces starts a new pool, tasks kept") {
  PooldFixture f("pools:\n" + pool_yaml("sleep", "sleep", "    concurrency: 1\n"));
  Client c = f.connect();
  auto holder = c.submit(task("sleep", "600000"));
  REQUIRE(holder);
  REQUIRE(wait_task_state(c, holder->id, "running"));
  auto waits = submit_waited(c, task("sleep", "1"), 2);
  REQUIRE(poll_until([&] { return pool_status(c, "sleep")["queued"].get<int>() >= 1; }));
  write_file(f.config, service_yaml(f.dir.path) + "pools:\n" +
                           pool_yaml("sleep", "sleep",
                                     "    concurrency: 1\n"
                                     "    sandbox: {namespaces: [user, pid]}\n"));
  auto applied = as_json(c.reload());
  REQUIRE(applied);
  // Namespaces are what the pool's spawner was built from: a new pool, not a rolling restart
  // that would have kept the old namespaces while reporting the new ones.
  CHECK((*applied)["replaced"] == json::array({"sleep"}));
  CHECK((*applied)["reconfigured"].empty());
  // The old pool keeps what it accepted, found by id while it drains. (Nothing is looked up
  // in it while it delivers results: poold's find_task holds its lock across the old pool's
  // loop, which a result delivery in that loop waits for.)
  CHECK(c.task(holder->id)->state == "running");
  REQUIRE(as_json(c.cancel(holder->id)));
  require_all_completed(waits);  // the old pool ran what it had accepted
  auto w = as_json(c.workers("sleep"));
  REQUIRE(w);
  REQUIRE_FALSE((*w)["workers"].empty());
  for (const auto& worker : (*w)["workers"]) {
    CHECK(worker["isolation"].get<std::string>().rfind("ns:user,pid+", 0) == 0);
  }
}

TEST_CASE(
    "poold: a reload of limits rolls the workers: new pids with the new limit, no task lost") {
  const auto yaml = [](const std::string& open_files) {
    return pool_yaml("sleep", "sleep",
                     "    concurrency: 1\n    limits: {open_files: " + open_files + "}\n",
                     "{min: 1, max: 4, initial: 2}");
  };
  PooldFixture f("pools:\n" + yaml("64"));
  Client c = f.connect();
  EventWatcher watch(f.socket, "sleep");
  // Both started workers are ready, so past their lock-down (rlimits) steps.
  REQUIRE(watch.wait(
      [](const std::vector<json>& es) { return named(es, "worker_ready").size() == 2; }));
  auto old_workers = as_json(c.workers("sleep"));
  REQUIRE(old_workers);
  const std::set<int> old_pids = pids_of(*old_workers);
  REQUIRE(old_pids.size() == 2);
  for (int pid : old_pids) CHECK(open_files_limit(pid) == "64");
  auto waits = submit_waited(c, task("sleep", "150"), 8);

  write_file(f.config, service_yaml(f.dir.path) + "pools:\n" + yaml("96"));
  auto applied = as_json(c.reload());
  REQUIRE(applied);
  CHECK((*applied)["replaced"].empty());
  REQUIRE((*applied)["reconfigured"].size() == 1);
  CHECK((*applied)["reconfigured"][0]["rolling_restart"] == true);

  // Both old workers exit and two new ones become ready.
  std::set<int> fresh;
  REQUIRE(watch.wait([&](const std::vector<json>& es) {
    std::set<int> exited;
    fresh.clear();
    for (const auto& e : named(es, "worker_exited")) exited.insert(e["pid"].get<int>());
    for (const auto& e : named(es, "worker_ready")) {
      if (old_pids.count(e["pid"]) == 0) fresh.insert(e["pid"].get<int>());
    }
    return fresh.size() == 2 && exited == old_pids;
  }));
  require_all_completed(waits);
  auto now_workers = as_json(c.workers("sleep"));
  REQUIRE(now_workers);
  CHECK(pids_of(*now_workers) == fresh);
  for (int pid : fresh) CHECK(open_files_limit(pid) == "96");
  for (const auto& w : (*now_workers)["workers"]) CHECK(w["restarts"] == 1);  // one per slot
  auto stats = as_json(c.stats("sleep"));
  REQUIRE(stats);
  const json& s = (*stats)["pools"][0];
  CHECK(s["submitted"] == 8);
  CHECK(s["completed"] == 8);
  CHECK(s["dead_lettered"] == 0);
  CHECK(s["restarts"] == 0);  // replaced on purpose, not crashed
}

TEST_CASE("poold: a pool removed by reload dead-letters what it could not finish: pool_removed") {
  PooldFixture f("pools:\n" +
                     pool_yaml("sleep", "sleep",
                               "    concurrency: 1\n"
                               "    task_defaults: {timeout: 10m}\n") +
                     pool_yaml("echo", "echo"),
                 "  shutdown_timeout: 200ms\n");
  Client c = f.connect();
  auto running = c.submit(task("sleep", "600000"));
  auto queued = c.submit(task("sleep", "600000"));
  REQUIRE(running);
  REQUIRE(queued);

  write_file(f.config, service_yaml(f.dir.path, "  shutdown_timeout: 200ms\n") + "pools:\n" +
                           pool_yaml("echo", "echo"));
  auto applied = as_json(c.reload());
  REQUIRE(applied);
  CHECK((*applied)["removed"][0] == "sleep");
  REQUIRE(f.poold->wait_for_output("pool retired pool=sleep dead_lettered=2"));

  // The pool decided both letters when it retired; the store commits them on its own
  // thread, and a dlq read does not wait for that: wait until both are there.
  std::optional<nlohmann::json> list;
  CHECK(poll_until([&] {
    auto l = raw_body(c, "dlq_list", {{"reason", "pool_removed"}});
    if (l) list = *l;
    return l && (*l)["entries"].size() >= 2;
  }));
  REQUIRE(list);
  REQUIRE((*list)["entries"].size() == 2);
  std::set<std::uint64_t> ids;
  for (const auto& e : (*list)["entries"]) {
    ids.insert(e["task_id"].get<std::uint64_t>());
    CHECK(e["pool"] == "sleep");
  }
  CHECK(ids == std::set<std::uint64_t>{running->id, queued->id});
}

}  // namespace
}  // namespace sandpool::testing
