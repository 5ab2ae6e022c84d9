// The journal's per-task bookkeeping tables: the writer's IdTable (retry/id_table.hpp), the
// state's open-task index (retry/journal_open_tasks.hpp) and a pool's PendingEnds
// (core/pending_ends.hpp), checked against what they replace (an unordered map, a map by id).
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <stdexcept>
#include <unordered_map>

#include "core/pending_ends.hpp"
#include "retry/id_table.hpp"
#include "retry/journal_open_tasks.hpp"

using namespace sandpool;

namespace {

core::TaskPtr tables_task(std::uint64_t id) {
  return core::TaskRecord::make(id, "t", "", SubmitOptions{});
}

}  // namespace

TEST_CASE("IdTable answers as an unordered_map over rounds of ids in and out of order",
          "[journal]") {
  IdTable<std::uint64_t> table;
  std::unordered_map<std::uint64_t, std::uint64_t> model;
  std::mt19937_64 rng(7);
  std::uint64_t base = 1;
  for (int round = 0; round < 50; ++round) {
    table.clear();
    model.clear();
    CHECK(table.empty());
    // Rounds of every size up to a few growths, mostly rising ids, some far ones and repeats.
    const std::size_t n = 1 + static_cast<std::size_t>(rng() % 5000);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint64_t id = base + i;
      if (i % 7 == 0) id = rng();
      if (i % 11 == 0) id = base + rng() % (i + 1);  // a repeat, usually
      const auto [value, inserted] = table.try_emplace(id, i);
      const auto [it, model_inserted] = model.try_emplace(id, i);
      REQUIRE(inserted == model_inserted);
      REQUIRE(*value == it->second);
    }
    REQUIRE(table.size() == model.size());
    for (const auto& [id, v] : model) {
      const std::uint64_t* found = table.find(id);
      REQUIRE(found != nullptr);
      CHECK(*found == v);
    }
    // Ids of the last round and ids never inserted are absent.
    for (std::uint64_t id = base + n; id < base + n + 4096; ++id) {
      if (model.count(id) == 0) REQUIRE(table.count(id) == 0);
    }
    base += n;
  }
}

TEST_CASE("IdTable starts empty after a clear, whatever it held", "[journal]") {
  IdSet set;
  for (std::uint64_t id = 1; id <= 3000; ++id) CHECK(set.insert(id));
  CHECK_FALSE(set.insert(42));
  set.clear();
  CHECK(set.size() == 0);
  for (std::uint64_t id = 1; id <= 3000; ++id) REQUIRE(set.count(id) == 0);
  CHECK(set.insert(42));
  CHECK(set.count(42) == 1);
  CHECK(set.count(43) == 0);
}

TEST_CASE("the journal's open tasks answer as a map by id while they grow, shrink and drain",
          "[journal]") {
  JournalOpenTasks open;
  std::unordered_map<std::uint64_t, std::int64_t> model;  // id: its submitted_ms
  std::mt19937_64 rng(11);
  auto check_all = [&] {
    REQUIRE(open.size() == model.size());
    for (const auto& [id, v] : model) {
      const OpenTask* t = open.find(id);
      REQUIRE(t != nullptr);
      REQUIRE(t->id == id);
      REQUIRE(t->submitted_ms == v);
    }
    std::size_t listed = 0;
    open.for_each([&](const OpenTask& t) {
      REQUIRE(model.count(t.id) == 1);
      ++listed;
    });
    REQUIRE(listed == model.size());
  };
  // Ids that share their low 32 bits (the slot holds a position only: the entry's id decides),
  // rising ids as a journal's are, and random ones; up to 40,000 held (several growths of the
  // index), then down to a few (it shrinks), then none (it gives its memory back), twice.
  std::uint64_t next = 1;
  for (int cycle = 0; cycle < 2; ++cycle) {
    for (int i = 0; i < 40000; ++i) {
      std::uint64_t id = next++;
      if (i % 5 == 0) id = (rng() << 32) | (id & 0xFFFFFFFFu);
      if (i % 13 == 0) id = rng() | 1;
      if (model.count(id) != 0) continue;
      open.insert(id).submitted_ms = static_cast<std::int64_t>(i);
      model[id] = i;
      if (i % 3 == 0) {  // one out now and then, not always the newest
        auto it = model.begin();
        std::advance(it, static_cast<long>(rng() % model.size()));
        open.erase(it->first);
        model.erase(it);
      }
    }
    check_all();
    for (auto it = model.begin(); model.size() > 20;) {
      open.erase(it->first);
      it = model.erase(it);
    }
    check_all();
    CHECK(open.find(next + 1) == nullptr);
    open.erase(next + 1);  // not held: nothing happens
    check_all();
    for (auto it = model.begin(); it != model.end();) {
      open.erase(it->first);
      it = model.erase(it);
    }
    check_all();
  }
}

TEST_CASE("the journal's open tasks refuse an entry past their bound", "[journal]") {
  CHECK(JournalOpenTasks::kMaxTasks == 0xFFFFFFFEu);  // 1 + a position fits a 32-bit slot
  JournalOpenTasks open(3);
  for (std::uint64_t id = 1; id <= 3; ++id) open.insert(id);
  CHECK_THROWS_AS(open.insert(4), std::length_error);
  CHECK(open.size() == 3);
  CHECK(open.find(4) == nullptr);
  open.erase(2);
  CHECK(open.insert(4).id == 4);  // a freed place is taken again
  CHECK(open.find(4) != nullptr);
  CHECK(open.find(1) != nullptr);
  CHECK(open.find(3) != nullptr);
}

TEST_CASE("PendingEnds gives back tasks answered in order and out of order", "[journal]") {
  core::PendingEnds ends;
  std::map<std::uint64_t, core::TaskPtr> model;
  for (std::uint64_t id = 1; id <= 10; ++id) {
    ends.push(tables_task(id));
    model[id] = nullptr;
  }
  // The last pushed taken back at once (its end was written within finish()).
  ends.push(tables_task(11));
  ends.pop_last();
  CHECK(ends.size() == 10);
  CHECK_FALSE(ends.find(11));

  // Out of order: 4 and 2 leave holes; in order: 1 takes the front, the holes behind it go.
  for (const std::uint64_t id : {4, 2, 1}) {
    const core::TaskPtr t = ends.take(id);
    REQUIRE(t);
    CHECK(t->id == id);
    model.erase(id);
  }
  CHECK_FALSE(ends.take(4));  // answered already
  CHECK_FALSE(ends.take(99));
  CHECK(ends.size() == model.size());
  CHECK(ends.find(3)->id == 3);
  CHECK_FALSE(ends.find(2));

  std::vector<std::uint64_t> listed;
  ends.for_each([&](const core::TaskPtr& t) { listed.push_back(t->id); });
  CHECK(listed == std::vector<std::uint64_t>{3, 5, 6, 7, 8, 9, 10});

  for (const std::uint64_t id : {3, 5, 6, 7, 8, 9, 10}) REQUIRE(ends.take(id));
  CHECK(ends.size() == 0);
  listed.clear();
  ends.for_each([&](const core::TaskPtr& t) { listed.push_back(t->id); });
  CHECK(listed.empty());
}
