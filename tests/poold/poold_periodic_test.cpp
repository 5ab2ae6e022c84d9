// Periodic schedules (docs/schedules.md) through a real poold with its journal: a
// `*/1 * * * *` schedule and an `@every 2s` one fire on time through a restart and a reload,
// one task per slot. A minute is too long to wait: the test moves poold's schedule clock
// through SANDPOOL_TEST_CLOCK_OFFSET_FILE (docs/development.md), and waits for each slot's
// task as poold reports it (`tasks`, `task`: the task's idempotency key names its slot).
#include <httplib.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>

#include <sandpool/base/wall_clock.hpp>
#include "command_runner.hpp"

#include "poold_process.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

std::int64_t wall_s() { return wall_clock_ms() / 1000; }

// The slot tasks poold holds in memory, by task id: their idempotency keys.
class SlotTasks {
 public:
  // Reads every task poold lists (and has not read yet); returns false on a failed call.
  bool refresh(Client& c) {
    ops::TaskListArgs args;
    args.limit = 1000;
    auto list = c.call<ops::TaskList>(args);
    if (!list) return false;
    for (const auto& t : list->tasks) {
      if (keys_.count(t.id) != 0) continue;
      auto account = c.task(t.id);
      if (!account || !account->account.submitted) continue;  // from an earlier run
      keys_[t.id] = account->account.submitted->idempotency_key;
    }
    return true;
  }
  // Waits until a task with `key` is listed.
  bool wait_key(Client& c, const std::string& key) {
    const auto until = std::chrono::steady_clock::now() + kPatience;
    while (std::chrono::steady_clock::now() < until) {
      if (refresh(c) && count(key) > 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  std::size_t count(const std::string& key) const {
    std::size_t n = 0;
    for (const auto& [id, k] : keys_) n += k == key;
    return n;
  }
  std::vector<std::string> keys_with(const std::string& prefix) const {
    std::vector<std::string> out;
    for (const auto& [id, k] : keys_) {
      if (k.rfind(prefix, 0) == 0) out.push_back(k);
    }
    return out;
  }
  const std::map<std::uint64_t, std::string>& all() const { return keys_; }

 private:
  std::map<std::uint64_t, std::string> keys_;
};

std::string key(const std::string& name, std::int64_t slot) {
  return "sandpool-schedule-" + name + "-" + std::to_string(slot);
}

std::string periodic_yaml(const std::string& often_payload) {
  return "pools:\n" + pool_yaml("echo", "echo") +
         "schedules:\n"
         "  - {name: minutely, cron: \"*/1 * * * *\", type: echo, payload: m}\n"
         "  - {name: often, every: 2s, type: echo, payload: " +
         often_payload + "}\n";
}

}  // namespace

TEST_CASE("poold: */1 and @every 2s schedules fire once per slot through a restart and a reload") {
  TempDir dir;
  const auto config = dir.path / "poold.yaml";
  const auto offset_file = dir.path / "clock_offset";
  const std::string socket = (dir.path / "poold.sock").string();
  write_file(config, service_yaml(dir.path) + periodic_yaml("o"));
  // Puts poold's schedule clock `before` seconds ahead of... the minute after the next one,
  // minus `before`: returns that minute (the slot that fires `before` seconds from now).
  auto aim_at_next_minute = [&](std::int64_t before) {
    const std::int64_t now = wall_s();
    std::int64_t offset = 0;
    {
      std::ifstream in(offset_file);
      in >> offset;
    }
    const std::int64_t clock = now + offset;
    const std::int64_t minute = (clock / 60 + 1) * 60;
    write_file(offset_file, std::to_string(minute - before - now) + "\n");
    return minute;
  };
  write_file(offset_file, "0\n");
  const std::vector<std::string> env{"SANDPOOL_TEST_CLOCK_OFFSET_FILE=" + offset_file.string()};
  SlotTasks slots;

  std::optional<PooldProcess> poold;
  poold.emplace(config, std::vector<std::string>{}, env);
  REQUIRE(poold->wait_ready());
  auto c = Client::connect(socket);
  REQUIRE(c);
  const std::int64_t m1 = aim_at_next_minute(3);
  INFO(poold->output());
  REQUIRE(slots.wait_key(*c, key("minutely", m1)));

  // A restart within the minute that fired: nothing fires twice.
  poold->signal(SIGTERM);
  REQUIRE(poold->wait_exit() == 0);
  poold.emplace(config, std::vector<std::string>{}, env);
  REQUIRE(poold->wait_ready());
  c = Client::connect(socket);
  REQUIRE(c);
  const std::int64_t m2 = aim_at_next_minute(3);
  REQUIRE(slots.wait_key(*c, key("minutely", m2)));

  // A reload that changes one schedule and keeps the other.
  write_file(config, service_yaml(dir.path) + periodic_yaml("changed"));
  auto reloaded = c->reload();
  REQUIRE(reloaded);
  const std::int64_t m3 = aim_at_next_minute(3);
  REQUIRE(slots.wait_key(*c, key("minutely", m3)));
  // And @every 2s fires after the reload too, on an even second.
  const std::size_t often_before = slots.keys_with("sandpool-schedule-often-").size();
  REQUIRE(poll_until([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return slots.refresh(*c) && slots.keys_with("sandpool-schedule-often-").size() > often_before;
  }));

  // One task per slot: every key names one task; the minute slots are the three aimed at
  // (the ones before m1 were never reached: the clock only moved forward past them).
  std::set<std::string> distinct;
  for (const auto& [id, k] : slots.all()) {
    INFO(k);
    CHECK(slots.count(k) == 1);
    distinct.insert(k);
  }
  CHECK(slots.keys_with("sandpool-schedule-minutely-") ==
        std::vector<std::string>{key("minutely", m1), key("minutely", m2), key("minutely", m3)});
  for (const std::string& k : slots.keys_with("sandpool-schedule-often-")) {
    const std::int64_t slot = std::stoll(k.substr(std::string("sandpool-schedule-often-").size()));
    CHECK(slot % 2 == 0);
  }
  CHECK(poold->output().find("existing=true") == std::string::npos);

  // /metrics counts the fired slots of this run (since the restart: m2 and m3) and the next.
  httplib::Client http("127.0.0.1", metrics_port(*poold));
  http.set_read_timeout(30, 0);
  auto scraped = http.Get("/metrics");
  REQUIRE(scraped);
  CHECK(scraped->body.find("\nsandpool_schedule_fired_total{schedule=\"minutely\"} 2\n") !=
        std::string::npos);
  CHECK(scraped->body.find("\nsandpool_schedule_skipped_total{schedule=\"often\"} ") !=
        std::string::npos);
  CHECK(
      scraped->body.find("\nsandpool_schedule_next_fire_timestamp_seconds{schedule=\"minutely\"} " +
                         std::to_string(m3 + 60) + "\n") != std::string::npos);
}

TEST_CASE("poolctl schedule lists, shows, pauses, resumes and runs a schedule now") {
  const std::string schedules =
      "schedules:\n"
      "  - {name: often, every: 2s, type: echo, payload: o}\n"
      "  - {name: nightly, cron: \"0 3 * * *\", type: echo, payload: n, overlap: skip}\n";
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo") + schedules);
  auto poolctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", f.socket});
    return run_command(std::string(SANDPOOL_BIN_DIR) + "/poolctl", args);
  };
  auto shown = [&](const std::string& name) {
    auto r = poolctl({"--json", "schedule", "show", name});
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
  };

  auto list = poolctl({"--json", "schedule", "list"});
  REQUIRE(list.exit_code == 0);
  const auto listed = nlohmann::json::parse(list.out)["schedules"];
  REQUIRE(listed.size() == 2);
  CHECK(listed[0]["name"] == "nightly");
  CHECK(listed[0]["expression"] == "0 3 * * *");
  CHECK(listed[0]["overlap"] == "skip");
  CHECK(listed[1]["expression"] == "@every 2s");
  CHECK(listed[1]["next_s"].get<std::int64_t>() % 2 == 0);
  // status has them too.
  auto status = poolctl({"--json", "status"});
  REQUIRE(status.exit_code == 0);
  const auto in_status = nlohmann::json::parse(status.out)["schedules"];
  REQUIRE(in_status.size() == 2);
  CHECK(in_status[0]["name"] == "nightly");
  CHECK(in_status[1]["name"] == "often");
  auto human = poolctl({"schedule", "list"});
  CHECK(human.exit_code == 0);
  CHECK_THAT(human.out, Catch::Contains("nightly"));

  REQUIRE(poolctl({"schedule", "pause", "often"}).exit_code == 0);
  auto paused = shown("often");
  CHECK(paused["paused"] == true);
  CHECK_FALSE(paused.contains("next_s"));
  // A reload that leaves the schedule's paused key alone keeps the pause.
  REQUIRE(poolctl({"reload"}).exit_code == 0);
  CHECK(shown("often")["paused"] == true);
  REQUIRE(poolctl({"schedule", "resume", "often"}).exit_code == 0);
  CHECK(shown("often")["paused"] == false);
  CHECK(shown("often").contains("next_s"));

  auto run = poolctl({"--json", "schedule", "run-now", "nightly"});
  REQUIRE(run.exit_code == 0);
  const std::uint64_t id = nlohmann::json::parse(run.out)["id"];
  Client c = f.connect();
  REQUIRE(wait_task_state(c, id, "completed"));
  auto account = c.task(id);
  REQUIRE(account);
  REQUIRE(account->account.submitted);
  CHECK_THAT(account->account.submitted->idempotency_key,
             Catch::StartsWith("sandpool-schedule-nightly-run-"));

  auto unknown = poolctl({"schedule", "show", "nope"});
  CHECK(unknown.exit_code == 1);
  CHECK_THAT(unknown.err, Catch::Contains("no schedule nope"));
}

}  // namespace sandpool::testing

namespace sandpool::testing {

TEST_CASE("poolctl schedule add and remove at run time: kept across a restart, and the YAML wins") {
  const std::string yaml_head = "pools:\n" + pool_yaml("echo", "echo") +
                                "schedules:\n"
                                "  - {name: nightly, cron: \"0 3 * * *\", type: echo}\n";
  PooldFixture f(yaml_head);
  auto poolctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", f.socket});
    return run_command(std::string(SANDPOOL_BIN_DIR) + "/poolctl", args);
  };
  auto restart = [&] {
    f.poold->signal(SIGTERM);
    REQUIRE(f.poold->wait_exit() == 0);
    f.start();
  };
  auto names = [&] {
    auto r = poolctl({"--json", "schedule", "list"});
    REQUIRE(r.exit_code == 0);
    std::vector<std::string> out;
    const auto listed = nlohmann::json::parse(r.out);
    for (const auto& s : listed["schedules"]) out.push_back(s["name"]);
    return out;
  };

  auto added = poolctl({"--json", "schedule", "add", "often", "--every", "2s", "--type", "echo",
                        "--payload", "x", "--overlap", "skip"});
  INFO(added.err);
  REQUIRE(added.exit_code == 0);
  const auto shown = nlohmann::json::parse(added.out);
  CHECK(shown["expression"] == "@every 2s");
  CHECK(shown["overlap"] == "skip");
  CHECK(shown["next_s"].get<std::int64_t>() % 2 == 0);
  auto again = poolctl({"schedule", "add", "often", "--every", "3s", "--type", "echo"});
  CHECK(again.exit_code == 1);
  CHECK_THAT(again.err, Catch::Contains("schedule often exists"));
  auto bad = poolctl({"schedule", "add", "bad", "--cron", "61 * * * *", "--type", "echo"});
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.err, Catch::Contains("minute field, position 1"));
  auto yaml_add = poolctl({"schedule", "add", "nightly", "--every", "2s", "--type", "echo"});
  CHECK(yaml_add.exit_code == 1);
  CHECK_THAT(yaml_add.err, Catch::Contains("declared in the YAML"));
  auto yaml_remove = poolctl({"schedule", "remove", "nightly"});
  CHECK(yaml_remove.exit_code == 1);
  CHECK_THAT(yaml_remove.err, Catch::Contains("declared in the YAML"));
  // It fires.
  Client c = f.connect();
  REQUIRE(poll_until([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto s = c.call<ops::ScheduleShow>(ops::ScheduleNameArgs{"often"});
    return s && s->fired > 0;
  }));

  // Kept across a restart.
  restart();
  CHECK(names() == std::vector<std::string>{"nightly", "often"});
  REQUIRE(poolctl({"schedule", "remove", "often"}).exit_code == 0);
  CHECK(poolctl({"schedule", "show", "often"}).exit_code == 1);
  CHECK(poolctl({"schedule", "remove", "often"}).exit_code == 1);
  restart();
  CHECK(names() == std::vector<std::string>{"nightly"});

  // A run-time schedule whose name the YAML then declares becomes the YAML's, for good.
  REQUIRE(poolctl({"schedule", "add", "weekly", "--cron", "@weekly", "--type", "echo"}).exit_code ==
          0);
  write_file(f.config, service_yaml(f.dir.path) + yaml_head +
                           "  - {name: weekly, cron: \"0 4 * * 1\", type: echo}\n");
  REQUIRE(poolctl({"reload"}).exit_code == 0);
  auto weekly = poolctl({"--json", "schedule", "show", "weekly"});
  REQUIRE(weekly.exit_code == 0);
  CHECK(nlohmann::json::parse(weekly.out)["expression"] == "0 4 * * 1");
  // Gone from the YAML, it is gone: its run-time row was dropped.
  write_file(f.config, service_yaml(f.dir.path) + yaml_head);
  REQUIRE(poolctl({"reload"}).exit_code == 0);
  restart();
  CHECK(names() == std::vector<std::string>{"nightly"});
}

}  // namespace sandpool::testing

namespace sandpool::testing {

TEST_CASE(
    "a schedule paused at run time stays paused through a restart, until its YAML key changes") {
  const std::string pools = "pools:\n" + pool_yaml("echo", "echo");
  const std::string yaml = pools +
                           "schedules:\n"
                           "  - {name: often, every: 2s, type: echo}\n"
                           "  - {name: nightly, cron: \"0 3 * * *\", type: echo}\n";
  PooldFixture f(yaml);
  auto poolctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", f.socket});
    return run_command(std::string(SANDPOOL_BIN_DIR) + "/poolctl", args);
  };
  auto shown = [&](const std::string& name) {
    auto r = poolctl({"--json", "schedule", "show", name});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
  };
  auto restart = [&] {
    f.poold->signal(SIGTERM);
    REQUIRE(f.poold->wait_exit() == 0);
    f.start();
  };

  // A YAML schedule and one added at run time, both paused at run time.
  REQUIRE(poolctl({"schedule", "add", "added", "--every", "2s", "--type", "echo"}).exit_code == 0);
  REQUIRE(poolctl({"schedule", "pause", "often"}).exit_code == 0);
  REQUIRE(poolctl({"schedule", "pause", "added"}).exit_code == 0);
  restart();
  for (const std::string name : {"often", "added"}) {
    INFO(name);
    const auto s = shown(name);
    CHECK(s["paused"] == true);
    CHECK_FALSE(s.contains("next_s"));
    CHECK(s["fired"] == 0);
  }
  CHECK(shown("nightly")["paused"] == false);

  // Resumed, it fires again; the resume is kept too.
  REQUIRE(poolctl({"schedule", "resume", "added"}).exit_code == 0);
  restart();
  CHECK(shown("added")["paused"] == false);
  Client c = f.connect();
  REQUIRE(poll_until([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto s = c.call<ops::ScheduleShow>(ops::ScheduleNameArgs{"added"});
    return s && s->fired > 0;
  }));
  CHECK(shown("often")["paused"] == true);

  // The YAML's paused key of `often` changes while poold is down: the YAML rules, and the run-time
  // pause is gone for good (the key set back, nothing comes back from it).
  f.poold->signal(SIGTERM);
  REQUIRE(f.poold->wait_exit() == 0);
  write_file(f.config, service_yaml(f.dir.path) + pools +
                           "schedules:\n"
                           "  - {name: often, every: 2s, type: echo, paused: true}\n"
                           "  - {name: nightly, cron: \"0 3 * * *\", type: echo}\n");
  f.start();
  CHECK(shown("often")["paused"] == true);
  write_file(f.config, service_yaml(f.dir.path) + yaml);
  REQUIRE(poolctl({"reload"}).exit_code == 0);
  CHECK(shown("often")["paused"] == false);
  restart();
  CHECK(shown("often")["paused"] == false);
}

}  // namespace sandpool::testing
