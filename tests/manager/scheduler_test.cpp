// The Scheduler with a hand-moved clock, a submitter that keeps idempotency keys as poold's
// submit path does (one task per key), and the real SQLite store of last slots in a scratch
// directory for the restart cases.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <sandpool/schedule/schedule_store.hpp>
#include <sandpool/schedule/scheduler.hpp>

namespace {

using sandpool::CatchUp;
using sandpool::CivilTime;
using sandpool::FiredSlot;
using sandpool::Overlap;
using sandpool::Scheduler;
using sandpool::ScheduleSpec;

std::int64_t utc_s(int y, int mo, int d, int h, int mi, int s = 0) {
  return sandpool::civil_as_utc(CivilTime{y, mo, d, h, mi, s});
}

class HandClock final : public sandpool::ScheduleClock {
 public:
  std::int64_t now_ms() const override { return now_ms_; }
  void set_s(std::int64_t s) { now_ms_ = s * 1000; }
  void set_ms(std::int64_t ms) { now_ms_ = ms; }

 private:
  std::int64_t now_ms_ = 0;
};

// One task per idempotency key, as poold's submit path gives; tasks stay open until ended.
class KeyedSubmitter final : public sandpool::SlotSubmitter {
 public:
  sandpool::Result<sandpool::SlotAnswer> submit(const ScheduleSpec& spec, const std::string& key,
                                                std::optional<std::int64_t> slot_s) override {
    ++calls;
    slots.push_back(slot_s);
    if (refuse) return sandpool::Status::error(sandpool::Code::kQueueFull, "queue full");
    if (!paused_by.empty()) return sandpool::SlotAnswer{0, paused_by, true};
    auto it = by_key.find(key);
    if (it != by_key.end()) return sandpool::SlotAnswer{it->second, lost_to};
    if (!lost_to.empty()) return sandpool::Status::invalid("the winner made no task");
    const std::uint64_t id = next_id++;
    by_key.emplace(key, id);
    keys.push_back(key);
    types.push_back(spec.task.type);
    open.insert(id);
    return sandpool::SlotAnswer{id, ""};
  }
  bool task_open(std::uint64_t id) override { return open.count(id) != 0; }

  std::map<std::string, std::uint64_t> by_key;
  std::vector<std::string> keys;  // one per task made, in order
  std::vector<std::string> types;
  std::set<std::uint64_t> open;
  std::uint64_t next_id = 1;
  std::vector<std::optional<std::int64_t>> slots;  // each call's slot (nullopt: run_now)
  int calls = 0;
  bool refuse = false;
  // Set: an existing key answers as a claim that node won (a Redis pool's slot claim).
  std::string lost_to;
  // Set: every slot answers that this node paused the schedule in the cluster.
  std::string paused_by;
};

class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/sandpool_sched_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string db() const { return path_ + "/dead_letters.db"; }

 private:
  std::string path_;
};

ScheduleSpec spec(const std::string& name, const std::string& expression) {
  ScheduleSpec s;
  s.name = name;
  s.expression = expression;
  s.task.type = "echo";
  s.payload = "tick";
  return s;
}

std::string key(const std::string& name, std::int64_t slot) {
  return sandpool::schedule_slot_key(name, slot);
}

std::unique_ptr<sandpool::SqliteScheduleStore> open_store(const ScratchDir& dir) {
  auto store = sandpool::SqliteScheduleStore::open(dir.db());
  REQUIRE(store.is_ok());
  return std::move(*store);
}

}  // namespace

TEST_CASE("an every-minute schedule fires one task per slot, keyed by the slot") {
  HandClock clock;
  KeyedSubmitter sub;
  Scheduler s(clock, sub, nullptr);
  clock.set_s(utc_s(2026, 5, 13, 10, 0, 30));
  REQUIRE(s.add(spec("minutely", "*/1 * * * *")).is_ok());
  CHECK(s.tick() == utc_s(2026, 5, 13, 10, 1) * 1000);
  CHECK(sub.calls == 0);
  clock.set_s(utc_s(2026, 5, 13, 10, 1));
  CHECK(s.tick() == utc_s(2026, 5, 13, 10, 2) * 1000);
  CHECK(s.tick() == utc_s(2026, 5, 13, 10, 2) * 1000);  // the same instant: nothing again
  clock.set_s(utc_s(2026, 5, 13, 10, 2, 5));
  (void)s.tick();
  CHECK(sub.keys == std::vector<std::string>{key("minutely", utc_s(2026, 5, 13, 10, 1)),
                                             key("minutely", utc_s(2026, 5, 13, 10, 2))});
  const auto state = s.find("minutely");
  REQUIRE(state);
  CHECK(state->fired == 2);
  CHECK(state->skipped == 0);
  CHECK(state->last->slot_s == utc_s(2026, 5, 13, 10, 2));
  CHECK(state->next_s == utc_s(2026, 5, 13, 10, 3));
}

TEST_CASE("an @every 2s schedule fires on each even second, once") {
  HandClock clock;
  KeyedSubmitter sub;
  Scheduler s(clock, sub, nullptr);
  clock.set_ms(1000 * 1000 + 500);
  REQUIRE(s.add(spec("often", "@every 2s")).is_ok());
  for (std::int64_t ms = 1000 * 1000 + 500; ms <= 1010 * 1000; ms += 250) {
    clock.set_ms(ms);
    (void)s.tick();
  }
  std::vector<std::string> expected;
  for (std::int64_t t = 1002; t <= 1010; t += 2) expected.push_back(key("often", t));
  CHECK(sub.keys == expected);
}

TEST_CASE("a late tick fires the latest due slot and counts the others skipped") {
  HandClock clock;
  KeyedSubmitter sub;
  Scheduler s(clock, sub, nullptr);
  clock.set_s(1000);
  REQUIRE(s.add(spec("often", "@every 2s")).is_ok());
  clock.set_s(1011);  // 1002 .. 1010 are due; 1010 is on time
  (void)s.tick();
  CHECK(sub.keys == std::vector<std::string>{key("often", 1010)});
  CHECK(s.find("often")->skipped == 4);
}

TEST_CASE("a restart resumes from the kept slot and fires an on-time slot once") {
  ScratchDir dir;
  HandClock clock;
  KeyedSubmitter sub;
  {
    auto store = open_store(dir);
    Scheduler s(clock, sub, store.get());
    clock.set_s(utc_s(2026, 5, 13, 10, 0, 30));
    REQUIRE(s.add(spec("minutely", "* * * * *")).is_ok());
    clock.set_s(utc_s(2026, 5, 13, 10, 1, 1));
    (void)s.tick();
  }
  // Down for four minutes; up again 10 s after the 10:05 slot.
  clock.set_s(utc_s(2026, 5, 13, 10, 5, 10));
  auto store = open_store(dir);
  Scheduler s(clock, sub, store.get());
  REQUIRE(s.add(spec("minutely", "* * * * *")).is_ok());
  CHECK(s.find("minutely")->last->slot_s == utc_s(2026, 5, 13, 10, 1));
  (void)s.tick();
  (void)s.tick();
  CHECK(sub.keys == std::vector<std::string>{key("minutely", utc_s(2026, 5, 13, 10, 1)),
                                             key("minutely", utc_s(2026, 5, 13, 10, 5))});
  CHECK(s.find("minutely")->skipped == 3);  // 10:02, 10:03, 10:04
}

TEST_CASE("a restart within a fired slot fires nothing again") {
  ScratchDir dir;
  HandClock clock;
  KeyedSubmitter sub;
  clock.set_s(utc_s(2026, 5, 13, 10, 0, 30));
  for (int run = 0; run < 3; ++run) {
    auto store = open_store(dir);
    Scheduler s(clock, sub, store.get());
    REQUIRE(s.add(spec("minutely", "* * * * *")).is_ok());
    clock.set_s(utc_s(2026, 5, 13, 10, 1, 5 + run * 10));
    (void)s.tick();
  }
  CHECK(sub.calls == 1);
  CHECK(sub.keys.size() == 1);
}

TEST_CASE("two schedulers firing one slot make one task (the slot's idempotency key)") {
  // Two nodes, or a restart that lost the record of a slot it had submitted: the submit path
  // is the same, and so is the key.
  HandClock clock;
  KeyedSubmitter sub;
  Scheduler a(clock, sub, nullptr);
  Scheduler b(clock, sub, nullptr);
  clock.set_s(utc_s(2026, 5, 13, 10, 0, 30));
  REQUIRE(a.add(spec("minutely", "* * * * *")).is_ok());
  REQUIRE(b.add(spec("minutely", "* * * * *")).is_ok());
  clock.set_s(utc_s(2026, 5, 13, 10, 1, 2));
  (void)a.tick();
  (void)b.tick();
  CHECK(sub.calls == 2);
  CHECK(sub.keys == std::vector<std::string>{key("minutely", utc_s(2026, 5, 13, 10, 1))});
  CHECK(a.find("minutely")->last->task_id == b.find("minutely")->last->task_id);
}

TEST_CASE("a slot another node claimed is neither fired nor skipped here, and is kept as done") {
  // A Redis pool's slot: the claim in Redis answers the winner's task and name.
  ScratchDir dir;
  HandClock clock;
  KeyedSubmitter sub;
  auto store = open_store(dir);
  Scheduler winner(clock, sub, nullptr);
  Scheduler loser(clock, sub, store.get());
  clock.set_s(1000);
  REQUIRE(winner.add(spec("often", "@every 2s")).is_ok());
  REQUIRE(loser.add(spec("often", "@every 2s")).is_ok());
  clock.set_s(1002);
  (void)winner.tick();
  sub.lost_to = "n0";
  (void)loser.tick();
  CHECK(sub.slots == std::vector<std::optional<std::int64_t>>{1002, 1002});
  CHECK(sub.keys == std::vector<std::string>{key("often", 1002)});
  CHECK(winner.find("often")->fired == 1);
  CHECK(winner.find("often")->last_outcome == "fired");
  const auto lost = loser.find("often");
  CHECK(lost->fired == 0);
  CHECK(lost->skipped == 0);
  CHECK(lost->last_outcome == "claimed by node n0");
  REQUIRE(lost->last);
  CHECK(lost->last->task_id == winner.find("often")->last->task_id);
  // Kept: a restart of the loser resumes after that slot.
  auto kept = store->last_fired("often");
  REQUIRE(kept.is_ok());
  REQUIRE(kept->has_value());
  CHECK((*kept)->slot_s == 1002);
}

TEST_CASE("missed slots beyond the grace: skip drops them, run_once fires the latest once") {
  auto [policy, fires] =
      GENERATE(table<CatchUp, bool>({{CatchUp::kSkip, false}, {CatchUp::kRunOnce, true}}));
  ScratchDir dir;
  HandClock clock;
  KeyedSubmitter sub;
  auto store = open_store(dir);
  ScheduleSpec hourly = spec("hourly", "0 * * * *");
  hourly.catch_up = policy;
  clock.set_s(utc_s(2026, 5, 13, 9, 59));
  {
    Scheduler s(clock, sub, store.get());
    REQUIRE(s.add(hourly).is_ok());
    clock.set_s(utc_s(2026, 5, 13, 10, 0, 1));
    (void)s.tick();
  }
  REQUIRE(sub.keys.size() == 1);
  clock.set_s(utc_s(2026, 5, 13, 13, 2));  // 11:00, 12:00, 13:00 went by while down
  Scheduler s(clock, sub, store.get());
  REQUIRE(s.add(hourly).is_ok());
  CHECK(s.tick() == utc_s(2026, 5, 13, 14, 0) * 1000);
  if (fires) {
    CHECK(sub.keys.back() == key("hourly", utc_s(2026, 5, 13, 13, 0)));
    CHECK(s.find("hourly")->skipped == 2);
  } else {
    CHECK(sub.keys.size() == 1);
    CHECK(s.find("hourly")->skipped == 3);
  }
}

TEST_CASE("overlap skip drops a slot while the last task is open, allow fires it") {
  auto [policy, expected] =
      GENERATE(table<Overlap, std::size_t>({{Overlap::kSkip, 1}, {Overlap::kAllow, 2}}));
  HandClock clock;
  KeyedSubmitter sub;
  Scheduler s(clock, sub, nullptr);
  auto sp = spec("often", "@every 10s");
  sp.overlap = policy;
  clock.set_s(1000);
  REQUIRE(s.add(sp).is_ok());
  clock.set_s(1010);
  (void)s.tick();
  clock.set_s(1020);
  (void)s.tick();  // task 1 is still open
  CHECK(sub.keys.size() == expected);
  CHECK(s.find("often")->skipped == (policy == Overlap::kSkip ? 1u : 0u));
}

TEST_CASE("overlap queue holds one slot until the last task ends, then fires it") {
  HandClock clock;
  KeyedSubmitter sub;
  Scheduler s(clock, sub, nullptr);
  auto sp = spec("often", "@every 10s");
  sp.overlap = Overlap::kQueue;
  clock.set_s(1000);
  REQUIRE(s.add(sp).is_ok());
  clock.set_s(1010);
  (void)s.tick();
  clock.set_s(1020);
  (void)s.tick();
  clock.set_s(1030);
  (void)s.tick();  // 1030 replaces the held 1020
  CHECK(sub.keys.size() == 1);
  CHECK(s.find("often")->held_slot_s == 1030);
  CHECK(s.find("often")->skipped == 1);
  sub.open.clear();  // task 1 ended
  clock.set_s(1031);
  (void)s.tick();
  CHECK(sub.keys == std::vector<std::string>{key("often", 1010), key("often", 1030)});
  CHECK_FALSE(s.find("often")->held_slot_s.has_value());
}

TEST_CASE("a paused schedule fires nothing, and resumed it fires from the next slot") {
  HandClock clock;
  KeyedSubmitter sub;
  Scheduler s(clock, sub, nullptr);
  clock.set_s(1000);
  REQUIRE(s.add(spec("often", "@every 2s")).is_ok());
  REQUIRE(s.set_paused("often", true).is_ok());
  clock.set_s(1010);
  CHECK_FALSE(s.tick().has_value());
  REQUIRE(s.set_paused("often", false).is_ok());
  CHECK(s.tick() == 1012 * 1000);
  clock.set_s(1012);
  (void)s.tick();
  CHECK(sub.keys == std::vector<std::string>{key("often", 1012)});
  CHECK(s.set_paused("nope", true).code() == sandpool::Code::kNotFound);
}

TEST_CASE("a reload plans a changed schedule again and leaves an unchanged one alone") {
  HandClock clock;
  KeyedSubmitter sub;
  Scheduler s(clock, sub, nullptr);
  clock.set_s(1000);
  REQUIRE(s.put(spec("often", "@every 10s")).is_ok());
  CHECK(s.find("often")->next_s == 1010);
  clock.set_s(1003);
  REQUIRE(s.put(spec("often", "@every 10s")).is_ok());
  CHECK(s.find("often")->next_s == 1010);
  REQUIRE(s.put(spec("often", "@every 4s")).is_ok());
  CHECK(s.find("often")->next_s == 1004);
  CHECK(s.add(spec("often", "@every 4s")).code() == sandpool::Code::kInvalidArgument);
}

TEST_CASE("a removed schedule fires nothing and its kept slot is forgotten") {
  ScratchDir dir;
  HandClock clock;
  KeyedSubmitter sub;
  auto store = open_store(dir);
  Scheduler s(clock, sub, store.get());
  clock.set_s(1000);
  REQUIRE(s.add(spec("often", "@every 2s")).is_ok());
  clock.set_s(1002);
  (void)s.tick();
  REQUIRE(store->last_fired("often")->has_value());
  REQUIRE(s.remove("often").is_ok());
  CHECK_FALSE(store->last_fired("often")->has_value());
  clock.set_s(1004);
  CHECK_FALSE(s.tick().has_value());
  CHECK(sub.keys.size() == 1);
  CHECK(s.remove("often").code() == sandpool::Code::kNotFound);
}

TEST_CASE("start and end bound the slots, and @every is anchored at the start") {
  HandClock clock;
  KeyedSubmitter sub;
  Scheduler s(clock, sub, nullptr);
  auto sp = spec("window", "@every 10s");
  sp.start_s = 1005;
  sp.end_s = 1025;
  clock.set_s(1000);
  REQUIRE(s.add(sp).is_ok());
  CHECK(s.find("window")->next_s == 1005);
  for (std::int64_t t = 1005; t <= 1040; t += 5) {
    clock.set_s(t);
    (void)s.tick();
  }
  CHECK(sub.keys ==
        std::vector<std::string>{key("window", 1005), key("window", 1015), key("window", 1025)});
  CHECK_FALSE(s.find("window")->next_s.has_value());
}

TEST_CASE("a refused submit is counted skipped with its reason, and the next slot still fires") {
  HandClock clock;
  KeyedSubmitter sub;
  Scheduler s(clock, sub, nullptr);
  clock.set_s(1000);
  REQUIRE(s.add(spec("often", "@every 2s")).is_ok());
  sub.refuse = true;
  clock.set_s(1002);
  (void)s.tick();
  CHECK(s.find("often")->skipped == 1);
  CHECK_THAT(s.find("often")->last_outcome, Catch::Contains("queue full"));
  sub.refuse = false;
  clock.set_s(1004);
  (void)s.tick();
  CHECK(sub.keys == std::vector<std::string>{key("often", 1004)});
}

TEST_CASE("run_now submits outside the slots under a key of its own") {
  HandClock clock;
  KeyedSubmitter sub;
  Scheduler s(clock, sub, nullptr);
  clock.set_ms(1000500);
  REQUIRE(s.add(spec("often", "@every 1h")).is_ok());
  REQUIRE(s.run_now("often").is_ok());
  CHECK(sub.keys == std::vector<std::string>{"sandpool-schedule-often-run-1000500"});
  CHECK(sub.slots == std::vector<std::optional<std::int64_t>>{std::nullopt});
  CHECK(s.run_now("nope").status().code() == sandpool::Code::kNotFound);
}

TEST_CASE("an invalid schedule is refused naming what is wrong") {
  auto [mutate, message] = GENERATE(table<int, std::string>({
      {0, "schedule often: expression: minute field, position 1"},
      {1, "schedule often: zone: unknown time zone"},
      {2, "schedule often: type is required"},
      {3, "the scheduler's own"},
      {4, "schedule name \"a b\""},
      {5, "end is before start"},
  }));
  auto sp = spec("often", "@every 2s");
  switch (mutate) {
    case 0:
      sp.expression = "99 * * * *";
      break;
    case 1:
      sp.zone = "Mars/Olympus";
      break;
    case 2:
      sp.task.type.clear();
      break;
    case 3:
      sp.task.options.idempotency_key = "mine";
      break;
    case 4:
      sp.name = "a b";
      break;
    case 5:
      sp.start_s = 10;
      sp.end_s = 5;
      break;
  }
  HandClock clock;
  KeyedSubmitter sub;
  Scheduler s(clock, sub, nullptr);
  const auto st = s.add(sp);
  REQUIRE_FALSE(st.is_ok());
  CHECK_THAT(st.message(), Catch::Contains(message));
  CHECK(s.list().empty());
}

TEST_CASE("a pause at run time outlives a reload that leaves the declared paused key alone") {
  HandClock clock;
  KeyedSubmitter sub;
  Scheduler s(clock, sub, nullptr);
  clock.set_s(1000);
  REQUIRE(s.put(spec("often", "@every 2s")).is_ok());
  REQUIRE(s.set_paused("often", true).is_ok());
  REQUIRE(s.put(spec("often", "@every 2s")).is_ok());  // unchanged
  CHECK(s.find("often")->spec.paused);
  REQUIRE(s.put(spec("often", "@every 4s")).is_ok());  // changed, paused key the same
  CHECK(s.find("often")->spec.paused);
  CHECK_FALSE(s.find("often")->next_s.has_value());
  auto declared_paused = spec("often", "@every 4s");
  declared_paused.paused = true;
  REQUIRE(s.put(declared_paused).is_ok());
  REQUIRE(s.put(spec("often", "@every 4s")).is_ok());  // the declaration resumes it
  CHECK_FALSE(s.find("often")->spec.paused);
  CHECK(s.find("often")->next_s == 1004);
}

TEST_CASE("a pause at run time is kept across a restart until the declared paused key changes") {
  ScratchDir dir;
  HandClock clock;
  KeyedSubmitter sub;
  clock.set_s(1000);
  {
    auto store = open_store(dir);
    Scheduler s(clock, sub, store.get());
    REQUIRE(s.put(spec("often", "@every 2s")).is_ok());
    REQUIRE(s.put(spec("other", "@every 2s")).is_ok());
    REQUIRE(s.set_paused("often", true).is_ok());
  }
  // A restart with the same declarations: paused still, and firing nothing.
  {
    auto store = open_store(dir);
    Scheduler s(clock, sub, store.get());
    REQUIRE(s.put(spec("often", "@every 2s")).is_ok());
    REQUIRE(s.put(spec("other", "@every 2s")).is_ok());
    CHECK(s.find("often")->spec.paused);
    CHECK_FALSE(s.find("often")->next_s.has_value());
    CHECK_FALSE(s.find("other")->spec.paused);
    clock.set_s(1002);
    (void)s.tick();
    CHECK(sub.keys == std::vector<std::string>{key("other", 1002)});
    // A changed expression with the same paused key keeps the pause, across a restart too.
    REQUIRE(s.put(spec("often", "@every 4s")).is_ok());
    CHECK(s.find("often")->spec.paused);
  }
  {
    auto store = open_store(dir);
    Scheduler s(clock, sub, store.get());
    REQUIRE(s.put(spec("often", "@every 4s")).is_ok());
    CHECK(s.find("often")->spec.paused);
    // Resumed at run time: the resume is kept as the pause was.
    REQUIRE(s.set_paused("often", false).is_ok());
  }
  {
    auto store = open_store(dir);
    Scheduler s(clock, sub, store.get());
    REQUIRE(s.put(spec("often", "@every 4s")).is_ok());
    CHECK_FALSE(s.find("often")->spec.paused);
    REQUIRE(s.set_paused("often", true).is_ok());
  }
  // The declaration's paused key changed while poold was down: the declaration rules, and the
  // kept pause is dropped for good (declared back as before, it does not come back).
  auto declared_paused = spec("often", "@every 4s");
  declared_paused.paused = true;
  {
    auto store = open_store(dir);
    Scheduler s(clock, sub, store.get());
    REQUIRE(s.put(declared_paused).is_ok());
    CHECK(s.find("often")->spec.paused);
    REQUIRE(s.set_paused("often", false).is_ok());
    CHECK(store->kept_pause("often").value() == sandpool::KeptPause{false, true});
  }
  {
    auto store = open_store(dir);
    Scheduler s(clock, sub, store.get());
    REQUIRE(s.put(spec("often", "@every 4s")).is_ok());  // declared unpaused now
    CHECK_FALSE(s.find("often")->spec.paused);
    CHECK_FALSE(store->kept_pause("often").value().has_value());
    // A pause dropped by a reload that changes the declared key, too.
    REQUIRE(s.set_paused("often", true).is_ok());
    REQUIRE(s.put(declared_paused).is_ok());
    REQUIRE(s.put(spec("often", "@every 4s")).is_ok());
    CHECK_FALSE(s.find("often")->spec.paused);
    CHECK_FALSE(store->kept_pause("often").value().has_value());
    // Removed, its pause is forgotten with its slot.
    REQUIRE(s.set_paused("often", true).is_ok());
    REQUIRE(s.remove("often").is_ok());
    CHECK_FALSE(store->kept_pause("often").value().has_value());
  }
}

TEST_CASE("a slot the cluster holds paused is neither fired nor counted, nor kept") {
  ScratchDir dir;
  HandClock clock;
  KeyedSubmitter sub;
  auto store = open_store(dir);
  Scheduler s(clock, sub, store.get());
  clock.set_s(1000);
  REQUIRE(s.add(spec("often", "@every 2s")).is_ok());
  clock.set_s(1002);
  (void)s.tick();
  REQUIRE(s.find("often")->fired == 1);
  sub.paused_by = "n0";
  clock.set_s(1004);
  CHECK(s.tick() == 1006 * 1000);  // it still ticks: a resume elsewhere is learnt by trying
  auto st = s.find("often");
  CHECK(st->cluster_paused);
  CHECK_FALSE(st->spec.paused);
  CHECK(st->last_outcome == "paused in the cluster (by node n0)");
  CHECK(st->fired == 1);
  CHECK(st->skipped == 0);
  CHECK(st->last->slot_s == 1002);
  CHECK(store->last_fired("often").value()->slot_s == 1002);
  // Resumed elsewhere: the next slot fires, and the schedule is not paused any more.
  sub.paused_by.clear();
  clock.set_s(1006);
  (void)s.tick();
  st = s.find("often");
  CHECK_FALSE(st->cluster_paused);
  CHECK(st->fired == 2);
  CHECK(sub.keys == std::vector<std::string>{key("often", 1002), key("often", 1006)});
  REQUIRE(s.set_cluster_paused("often", true).is_ok());
  CHECK(s.find("often")->cluster_paused);
  CHECK(s.set_cluster_paused("nope", true).code() == sandpool::Code::kNotFound);
}
