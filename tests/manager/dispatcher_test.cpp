#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "core/dispatcher.hpp"

using namespace sandpool;
using sandpool::core::Candidate;
using sandpool::core::Choice;
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
  auto s =
      GENERATE(DispatchStrategy::kRoundRobin, DispatchStrategy::kLeastLoaded,
               DispatchStrategy::kRandom, DispatchStrategy::kLeastRss, DispatchStrategy::kByKey);
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

TEST_CASE("least-rss picks the worker with the lowest sampled RSS that has room") {
  Dispatcher d(DispatchStrategy::kLeastRss, 1);
  std::vector<Candidate> w = {{1, 0, 2, 0, 300}, {2, 0, 2, 1, 100}, {3, 0, 2, 2, 200}};
  CHECK(d.choose(w, "").index == 1);
  w[1].in_flight = 2;  // full
  CHECK(d.choose(w, "").index == 2);
  w[2].rss_bytes = 300;  // a tie with worker 1: the less loaded wins
  w[0].in_flight = 1;
  CHECK(d.choose(w, "").index == 2);
  w[0].in_flight = 2;
  w[2].in_flight = 2;
  CHECK(d.choose(w, "").index == -1);
}

namespace {

// The slot by-key sends `key` to among `slots` idle workers (ids 100+slot).
std::uint32_t by_key_slot(std::uint32_t slots, const std::string& key) {
  Dispatcher d(DispatchStrategy::kByKey, 1);
  std::vector<Candidate> w;
  for (std::uint32_t s = 0; s < slots; ++s) w.push_back({100 + s, 0, 4, s, 0});
  const int i = d.choose(w, key).index;
  REQUIRE(i >= 0);
  return w[static_cast<std::size_t>(i)].slot;
}

}  // namespace

TEST_CASE("by-key moves about 1/(N+1) of the keys when N workers become N+1, all to the new one") {
  const std::uint32_t n = GENERATE(1u, 3u, 4u, 8u);
  constexpr int kKeys = 20000;
  int moved = 0;
  std::map<std::uint32_t, int> per_slot;
  for (int k = 0; k < kKeys; ++k) {
    const std::string key = "tenant-" + std::to_string(k);
    const std::uint32_t before = by_key_slot(n, key);
    const std::uint32_t after = by_key_slot(n + 1, key);
    per_slot[before]++;
    if (before != after) {
      ++moved;
      CHECK(after == n);  // only ever to the new slot
    }
  }
  const double expected = static_cast<double>(kKeys) / (n + 1);
  INFO(moved << " of " << kKeys << " keys moved from " << n << " to " << n + 1 << " workers");
  CHECK(moved > expected * 0.85);
  CHECK(moved < expected * 1.15);
  // And the keys spread evenly over the N slots before.
  for (const auto& [slot, count] : per_slot) CHECK(count > kKeys / static_cast<int>(n) * 0.85);
}

TEST_CASE("by-key sends a key back to its slot's replacement, and past a full home to its next") {
  Dispatcher d(DispatchStrategy::kByKey, 1);
  std::vector<Candidate> w = {{1, 0, 1, 0, 0}, {2, 0, 1, 1, 0}, {3, 0, 1, 2, 0}};
  const int home = d.choose(w, "user-7").index;
  REQUIRE(home >= 0);
  // The worker in that slot dies and is replaced (a new id, the same slot): same home.
  w[static_cast<std::size_t>(home)].worker_id = 9;
  CHECK(d.choose(w, "user-7").index == home);
  // Its home is full: the key goes to another worker at once (no waiting, unlike affinity).
  w[static_cast<std::size_t>(home)].in_flight = 1;
  const Choice c = d.choose(w, "user-7");
  CHECK(c.index >= 0);
  CHECK(c.index != home);
  CHECK_FALSE(c.must_wait);
  // Every worker full: nobody.
  for (auto& x : w) x.in_flight = 1;
  CHECK(d.choose(w, "user-7").index == -1);
}

TEST_CASE("by-key without a key is least-loaded") {
  Dispatcher d(DispatchStrategy::kByKey, 1);
  std::vector<Candidate> w = {{1, 3, 4, 0, 0}, {2, 1, 4, 1, 0}, {3, 2, 4, 2, 0}};
  CHECK(d.choose(w, "").index == 1);
}
