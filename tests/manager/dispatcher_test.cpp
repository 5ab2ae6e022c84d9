#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "core/dispatcher.hpp"

using namespace sandpool;
using sandpool::core::Candidate;
using sandpool::core::Dispatcher;

TEST_CASE("round-robin cycles through the workers and skips full ones") {
  Dispatcher d(DispatchStrategy::kRoundRobin, 1);
  std::vector<Candidate> w = {{1, 0, 2}, {2, 0, 2}, {3, 0, 2}};
  std::vector<int> picks;
  for (int i = 0; i < 4; ++i) picks.push_back(d.choose(w, "").index);
  CHECK(picks == std::vector<int>{0, 1, 2, 0});
  w[1].in_flight = 2;  // full
  CHECK(d.choose(w, "").index == 2);
  CHECK(d.choose(w, "").index == 0);
  CHECK(d.choose(w, "").index == 2);
}

TEST_CASE("nobody is chosen when every worker is full") {
  auto s = GENERATE(DispatchStrategy::kRoundRobin, DispatchStrategy::kLeastLoaded,
                    DispatchStrategy::kRandom);
  Dispatcher d(s, 7);
  std::vector<Candidate> w = {{1, 4, 4}, {2, 4, 4}};
  CHECK(d.choose(w, "").index == -1);
}

TEST_CASE("least-loaded picks the lowest share of capacity in use") {
  Dispatcher d(DispatchStrategy::kLeastLoaded, 1);
  std::vector<Candidate> w = {{1, 3, 4}, {2, 1, 4}, {3, 2, 4}};
  CHECK(d.choose(w, "").index == 1);
  w[1].in_flight = 4;
  CHECK(d.choose(w, "").index == 2);
}

TEST_CASE("random only picks workers with room, and all of them eventually") {
  Dispatcher d(DispatchStrategy::kRandom, 42);
  std::vector<Candidate> w = {{1, 0, 1}, {2, 1, 1}, {3, 0, 1}};
  std::map<int, int> seen;
  for (int i = 0; i < 200; ++i) seen[d.choose(w, "").index]++;
  CHECK(seen.count(1) == 0);
  CHECK(seen[0] > 0);
  CHECK(seen[2] > 0);
}

TEST_CASE("affinity sends a key to the same live worker, and only its keys move when it dies") {
  Dispatcher d(DispatchStrategy::kAffinity, 1);
  std::vector<Candidate> w = {{1, 0, 100}, {2, 0, 100}, {3, 0, 100}};
  std::map<std::string, std::uint64_t> owner;
  for (int k = 0; k < 60; ++k) {
    const std::string key = "k" + std::to_string(k);
    const int first = d.choose(w, key).index;
    CHECK(d.choose(w, key).index == first);
    owner[key] = w[first].worker_id;
  }
  std::vector<Candidate> without2 = {{1, 0, 100}, {3, 0, 100}};
  int moved = 0;
  for (auto& [key, id] : owner) {
    const std::uint64_t now = without2[d.choose(without2, key).index].worker_id;
    if (id != 2) CHECK(now == id);
    moved += now != id;
  }
  CHECK(moved > 0);
}

TEST_CASE("affinity keeps a task for its full worker instead of sending it elsewhere") {
  Dispatcher d(DispatchStrategy::kAffinity, 1);
  std::vector<Candidate> w = {{1, 0, 1}, {2, 0, 1}};
  const int owner = d.choose(w, "user-7").index;
  w[owner].in_flight = 1;
  auto c = d.choose(w, "user-7");
  CHECK(c.index == owner);
  CHECK(c.must_wait);
  CHECK_FALSE(d.choose(w, "").must_wait);  // no key: least-loaded
}
