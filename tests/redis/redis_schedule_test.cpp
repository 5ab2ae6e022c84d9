// Schedules that fire into a Redis pool (docs/schedules.md, "Redis pools"): two poold nodes
// share the pool and both run a `*/1 * * * *` and an `@every 2s` schedule. Each slot is
// claimed in Redis with its submit, so it makes exactly one task there, through a restart of
// one node and a reload of the other; the node that won a slot counts it fired, the other
// neither fired nor skipped. A minute is too long to wait: the test moves both nodes'
// schedule clocks (one SANDPOOL_TEST_CLOCK_OFFSET_FILE, docs/development.md) and waits for
// each slot's task as Redis holds it.
#include <signal.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/base/wall_clock.hpp>

#include "poold_process.hpp"
#include "redis_server.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

std::int64_t wall_s() { return wall_clock_ms() / 1000; }

std::string slot_key(const std::string& name, std::int64_t slot) {
  return "sandpool-schedule-" + name + "-" + std::to_string(slot);
}

// A node: its own dir, socket, state and name; the shared Redis and schedule clock.
class ScheduleNode {
 public:
  ScheduleNode(const RedisServer& redis, const std::string& name,
               const std::filesystem::path& offset_file)
      : service_("  node: " + name + "\n  redis: {address: \"unix:" + redis.socket() + "\"}\n"),
        env_{"SANDPOOL_TEST_CLOCK_OFFSET_FILE=" + offset_file.string()} {
    write_config("o");
    start();
  }
  // Both schedules into the Redis pool `shared`; `often_payload` tells a reload's change.
  void write_config(const std::string& often_payload) {
    write_file(config_, service_yaml(dir_.path, service_) + "pools:\n" +
                            pool_yaml("shared", "echo", "    backend: redis\n") +
                            "schedules:\n"
                            "  - {name: minutely, cron: \"*/1 * * * *\", pool: shared, type: "
                            "echo, payload: m}\n"
                            "  - {name: often, every: 2s, pool: shared, type: echo, payload: " +
                            often_payload + "}\n");
  }
  void start() {
    poold_.emplace(config_, std::vector<std::string>{}, env_);
    if (!poold_->wait_ready()) FAIL("poold did not start:\n" << poold_->output());
  }
  void restart() {
    poold_->signal(SIGTERM);
    REQUIRE(poold_->wait_exit() == 0);
    start();
  }
  Client connect() {
    auto c = Client::connect((dir_.path / "poold.sock").string());
    if (!c) FAIL("connect: " << c.status().to_string());
    return std::move(c).value();
  }
  ops::ScheduleInfo show(const std::string& name) {
    auto shown = connect().call<ops::ScheduleShow>(ops::ScheduleNameArgs{name});
    REQUIRE(shown);
    return *shown;
  }
  std::string output() { return poold_->output(); }

 private:
  TempDir dir_;
  std::filesystem::path config_ = dir_.path / "poold.yaml";
  std::string service_;
  std::vector<std::string> env_;
  std::optional<PooldProcess> poold_;
};

// The tasks in Redis, counted by the idempotency key they were submitted under.
std::map<std::string, int> tasks_by_key(redis::Connection& c) {
  std::map<std::string, int> out;
  auto keys = c.command({"KEYS", "sandpool:task:*"});
  REQUIRE(keys);
  const std::string idem_prefix = "sandpool:idem:";
  for (const auto& k : keys->elements) {
    if (k.str.find(":attempts") != std::string::npos) continue;
    auto idem = c.command({"HGET", k.str, "idem_key"});
    REQUIRE(idem);
    if (idem->is_nil()) continue;
    REQUIRE(idem->str.rfind(idem_prefix, 0) == 0);
    ++out[idem->str.substr(idem_prefix.size())];
  }
  return out;
}

std::vector<std::int64_t> slots_of(const std::map<std::string, int>& tasks,
                                   const std::string& name) {
  const std::string prefix = "sandpool-schedule-" + name + "-";
  std::vector<std::int64_t> out;
  for (const auto& [k, n] : tasks) {
    if (k.rfind(prefix, 0) == 0) out.push_back(std::stoll(k.substr(prefix.size())));
  }
  return out;
}

// How many times `text` occurs in `log`.
std::size_t occurrences(const std::string& log, const std::string& text) {
  std::size_t n = 0;
  for (auto at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE(
    "two poold nodes on one redis pool fire each slot of */1 and @every 2s schedules once, "
    "through a restart and a reload",
    "[redis][cluster]") {
  RedisServer redis;
  TempDir clock_dir;
  const auto offset_file = clock_dir.path / "clock_offset";
  write_file(offset_file, "0\n");
  // Puts both nodes' schedule clocks `before` seconds ahead of the minute after theirs;
  // returns that minute (the slot due `before` seconds from now).
  auto aim_at_next_minute = [&](std::int64_t before) {
    const std::int64_t now = wall_s();
    std::int64_t offset = 0;
    {
      std::ifstream in(offset_file);
      in >> offset;
    }
    const std::int64_t minute = ((now + offset) / 60 + 1) * 60;
    write_file(offset_file, std::to_string(minute - before - now) + "\n");
    return minute;
  };
  ScheduleNode n0(redis, "n0", offset_file);
  ScheduleNode n1(redis, "n1", offset_file);
  auto c = redis::Connection::open(redis.endpoint());
  REQUIRE(c);
  auto outputs = [&] { return "n0:\n" + n0.output() + "\nn1:\n" + n1.output(); };

  // Waits for minute `m`'s task in Redis and for both nodes to have reached that slot (one
  // fired it, the other lost the claim); returns the winner, as the claim names it.
  auto fired_once = [&](std::int64_t m) {
    if (!poll_until([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          return tasks_by_key(*c).count(slot_key("minutely", m)) != 0;
        })) {
      FAIL("no task for minute " << m << "\n" << outputs());
    }
    if (!poll_until([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          return n0.show("minutely").last_slot_s == m && n1.show("minutely").last_slot_s == m;
        })) {
      FAIL("a node did not reach minute " << m << "\n" << outputs());
    }
    auto claim = c->command({"HMGET", "sandpool:schedule:minutely", "slot", "node", "task"});
    REQUIRE(claim);
    REQUIRE(claim->elements.size() == 3);
    CHECK(claim->elements[0].str == std::to_string(m));
    const std::string winner = claim->elements[1].str;
    REQUIRE((winner == "n0" || winner == "n1"));
    // Both nodes name the one task; the loser says whose it is.
    const auto a = n0.show("minutely");
    const auto b = n1.show("minutely");
    CHECK(a.last_task == b.last_task);
    CHECK(std::to_string(a.last_task.value_or(0)) == claim->elements[2].str);
    const auto& lost = winner == "n0" ? b : a;
    const auto& won = winner == "n0" ? a : b;
    CHECK(won.last_outcome == "fired");
    CHECK(lost.last_outcome == "claimed by node " + winner);
    return winner;
  };

  const std::int64_t m1 = aim_at_next_minute(3);
  const std::string w1 = fired_once(m1);

  // A restart of one node within the minute that fired: nothing fires twice.
  n1.restart();
  const std::int64_t m2 = aim_at_next_minute(3);
  const std::string w2 = fired_once(m2);

  // A reload of the other that changes one schedule and keeps the other.
  n0.write_config("changed");
  {
    Client admin = n0.connect();
    REQUIRE(admin.reload());
  }
  const std::int64_t m3 = aim_at_next_minute(3);
  const std::string w3 = fired_once(m3);
  // And @every 2s fires after the reload too.
  const std::size_t often_before = slots_of(tasks_by_key(*c), "often").size();
  REQUIRE(poll_until([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return slots_of(tasks_by_key(*c), "often").size() > often_before;
  }));

  // One task per slot in Redis: every key names one task; the minute slots are the three aimed
  // at; the @every 2s slots are even seconds.
  const auto tasks = tasks_by_key(*c);
  for (const auto& [k, n] : tasks) {
    INFO(k);
    CHECK(n == 1);
  }
  CHECK(slots_of(tasks, "minutely") == std::vector<std::int64_t>{m1, m2, m3});
  for (const std::int64_t slot : slots_of(tasks, "often")) CHECK(slot % 2 == 0);

  // A node counts fired the slots it won, and a lost claim neither fired nor skipped: n0 ran
  // throughout (m1, m2, m3), n1 since its restart (m2, m3).
  const auto a = n0.show("minutely");
  const auto b = n1.show("minutely");
  const auto won_by = [&](const std::string& node, std::vector<std::string> winners) {
    return static_cast<std::uint64_t>(std::count(winners.begin(), winners.end(), node));
  };
  CHECK(a.fired == won_by("n0", {w1, w2, w3}));
  CHECK(b.fired == won_by("n1", {w2, w3}));
  CHECK(a.skipped == 0);
  CHECK(b.skipped == 0);
  // The @every 2s slots the nodes fired, together, are at most the tasks Redis holds (read
  // after: a slot is counted once its task is made).
  const std::uint64_t often_fired = n0.show("often").fired + n1.show("often").fired;
  CHECK(often_fired > 0);
  CHECK(often_fired <= slots_of(tasks_by_key(*c), "often").size());
}

}  // namespace sandpool::testing

namespace sandpool::testing {

TEST_CASE(
    "a schedule of a redis pool paused on one node fires from no node until resumed on another",
    "[redis][cluster]") {
  RedisServer redis;
  TempDir clock_dir;
  const auto offset_file = clock_dir.path / "clock_offset";
  write_file(offset_file, "0\n");
  ScheduleNode n0(redis, "n0", offset_file);
  ScheduleNode n1(redis, "n1", offset_file);
  auto c = redis::Connection::open(redis.endpoint());
  REQUIRE(c);
  auto outputs = [&] { return "n0:\n" + n0.output() + "\nn1:\n" + n1.output(); };
  auto often_tasks = [&] { return slots_of(tasks_by_key(*c), "often"); };
  REQUIRE(poll_until([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return !often_tasks().empty();
  }));

  // Paused on n0: the claim hash says so, and from then on no slot of either node wins.
  auto paused = n0.connect().call<ops::SchedulePause>(ops::ScheduleNameArgs{"often"});
  REQUIRE(paused);
  CHECK(paused->paused);
  CHECK_FALSE(paused->next_s.has_value());
  const auto before = often_tasks();
  auto held = c->command({"HGET", "sandpool:schedule:often", "paused"});
  REQUIRE(held);
  CHECK(held->str == "n0");
  // Each node tries two slots after the pause (their logs say so), and wins neither.
  const std::string by_n0 = "paused_by=n0";
  if (!poll_until([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return occurrences(n0.output(), by_n0) >= 2 && occurrences(n1.output(), by_n0) >= 2;
      })) {
    FAIL("the nodes did not try two slots each while paused\n" << outputs());
  }
  CHECK(often_tasks() == before);
  for (ScheduleNode* n : {&n0, &n1}) {
    const auto shown = n->show("often");
    CHECK(shown.paused);
    CHECK(shown.last_outcome == "paused in the cluster (by node n0)");
  }

  // Resumed on n1: slots fire again, and both nodes say it is not paused once they tried one.
  auto resumed = n1.connect().call<ops::ScheduleResume>(ops::ScheduleNameArgs{"often"});
  REQUIRE(resumed);
  CHECK_FALSE(resumed->paused);
  held = c->command({"HEXISTS", "sandpool:schedule:often", "paused"});
  REQUIRE(held);
  CHECK(held->integer == 0);
  if (!poll_until([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return often_tasks().size() > before.size() && !n0.show("often").paused &&
               !n1.show("often").paused;
      })) {
    FAIL("the schedule did not fire again after the resume\n" << outputs());
  }
  for (const auto& [k, n] : tasks_by_key(*c)) {
    INFO(k);
    CHECK(n == 1);
  }
}

}  // namespace sandpool::testing
