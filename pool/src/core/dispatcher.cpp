#include "core/dispatcher.hpp"

#include <functional>
#include <string>

namespace sandpool::core {
namespace {

bool has_room(const Candidate& c) { return c.in_flight < c.capacity; }

// splitmix64 finaliser: mixes the key's hash with the worker id for rendezvous hashing.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a: a key's hash that does not depend on the standard library's std::hash, so by-key
// sends a key to the same slot across builds and restarts.
std::uint64_t fnv1a(std::string_view key) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : key) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

Choice Dispatcher::choose(std::span<const Candidate> workers, std::string_view key) {
  if (workers.empty()) return {};
  switch (strategy_) {
    case DispatchStrategy::kRoundRobin:
      return round_robin(workers);
    case DispatchStrategy::kLeastLoaded:
      return least_loaded(workers);
    case DispatchStrategy::kRandom:
      return random(workers);
    case DispatchStrategy::kAffinity:
      return key.empty() ? least_loaded(workers) : affinity(workers, key);
    case DispatchStrategy::kLeastRss:
      return least_rss(workers);
    case DispatchStrategy::kByKey:
      return key.empty() ? least_loaded(workers) : by_key(workers, key);
  }
  return {};
}

Choice Dispatcher::round_robin(std::span<const Candidate> workers) {
  // Candidates come in ascending id order: start after the last id chosen, wrap once.
  const int n = static_cast<int>(workers.size());
  int start = 0;
  while (start < n && workers[start].worker_id <= last_id_) ++start;
  for (int k = 0; k < n; ++k) {
    const int i = (start + k) % n;
    if (has_room(workers[i])) {
      last_id_ = workers[i].worker_id;
      return {i, false};
    }
  }
  return {};
}

// Of the workers with room, the one `better(c, best)` ranks first, scanning from just past
// the last pick so that ties rotate; remembered as the last pick.
template <class Better>
Choice Dispatcher::best_with_room(std::span<const Candidate> workers, Better better) {
  const int n = static_cast<int>(workers.size());
  int start = 0;
  while (start < n && workers[start].worker_id <= last_id_) ++start;
  int best = -1;
  for (int k = 0; k < n; ++k) {
    const int i = (start + k) % n;
    if (!has_room(workers[i])) continue;
    if (best < 0 || better(workers[i], workers[best])) best = i;
  }
  if (best >= 0) last_id_ = workers[best].worker_id;
  return {best, false};
}

namespace {
// in_flight/capacity of `a` below that of `b`, without division: a/b < c/d <=> a*d < c*b.
bool less_loaded(const Candidate& a, const Candidate& b) {
  return std::uint64_t{a.in_flight} * b.capacity < std::uint64_t{b.in_flight} * a.capacity;
}
}  // namespace

Choice Dispatcher::least_loaded(std::span<const Candidate> workers) {
  return best_with_room(workers,
                        [](const Candidate& c, const Candidate& b) { return less_loaded(c, b); });
}

Choice Dispatcher::random(std::span<const Candidate> workers) {
  int with_room = 0;
  for (const auto& c : workers) with_room += has_room(c) ? 1 : 0;
  if (with_room == 0) return {};
  std::uniform_int_distribution<int> pick(0, with_room - 1);
  int nth = pick(rng_);
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
    if (!has_room(workers[i])) continue;
    if (nth-- == 0) return {i, false};
  }
  return {};
}

int Dispatcher::affinity_home(std::span<const Candidate> workers, std::string_view key) {
  const std::uint64_t h = std::hash<std::string_view>{}(key);
  int best = -1;
  std::uint64_t best_score = 0;
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
    const std::uint64_t score = mix(h ^ mix(workers[i].worker_id));
    if (best < 0 || score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

Choice Dispatcher::affinity(std::span<const Candidate> workers, std::string_view key) {
  const int best = affinity_home(workers, key);
  if (!has_room(workers[best])) return {best, true};
  return {best, false};
}

Choice Dispatcher::least_rss(std::span<const Candidate> workers) {
  // The smallest RSS; equal ones (none sampled yet: 0) by load.
  return best_with_room(workers, [](const Candidate& c, const Candidate& b) {
    return c.rss_bytes != b.rss_bytes ? c.rss_bytes < b.rss_bytes : less_loaded(c, b);
  });
}

Choice Dispatcher::by_key(std::span<const Candidate> workers, std::string_view key) {
  // Rendezvous hashing over the slots: the key's score for each slot, the highest with room
  // wins. Only the candidates are scored (one per live slot), so no ring is kept.
  const std::uint64_t h = fnv1a(key);
  int best = -1;
  std::uint64_t best_score = 0;
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
    if (!has_room(workers[i])) continue;
    const std::uint64_t score = mix(h ^ mix(0x736c6f74ull + workers[i].slot));
    if (best < 0 || score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return {best, false};
}

}  // namespace sandpool::core
