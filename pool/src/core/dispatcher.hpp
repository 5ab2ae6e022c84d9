// Chooses a worker for a task. Pure logic: the pool passes a snapshot of the workers that
// accept tasks. Loop-thread only.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string_view>

#include <sandpool/pool/pool_options.hpp>

namespace sandpool::core {

struct Candidate {
  std::uint64_t worker_id;      // stable for the worker's life
  std::uint32_t in_flight;      // tasks in its ring (a starting worker: capacity, so no room)
  std::uint32_t capacity;       // concurrency
  std::uint32_t slot = 0;       // WorkerInfo::slot (by-key hashes over these)
  std::uint64_t rss_bytes = 0;  // sampled (least-rss); 0: unknown
};

struct Choice {
  int index = -1;          // into the candidates; -1: nobody can take it now
  bool must_wait = false;  // affinity: the key's worker is full; keep the task for it
};

class Dispatcher {
 public:
  Dispatcher(DispatchStrategy strategy, std::uint64_t seed) : strategy_(strategy), rng_(seed) {}
  void set_strategy(DispatchStrategy s) { strategy_ = s; }
  DispatchStrategy strategy() const { return strategy_; }

  // round-robin: the next worker after the last one chosen that has room.
  // least-loaded: the lowest in_flight/capacity (ties: round-robin order).
  // random: uniform among those with room.
  // affinity: a task with a key goes to the same live worker while it lives (rendezvous
  // hashing over the candidates, so a dead worker's keys spread over the others and
  // nobody else's move); without a key, least-loaded.
  // least-rss: the lowest sampled RSS among those with room (ties: least-loaded's order);
  // an unknown RSS (0) counts as the lowest, so a worker not sampled yet gets tasks.
  // by-key: consistent hashing of the key over the worker slots (rendezvous hashing: each
  // key ranks the slots, and goes to the highest-ranked worker with room). A slot's
  // replacement gets its keys back; scaling from N to N+1 slots moves about 1/(N+1) of the
  // keys, all to the new slot. Unlike affinity, a key whose home is full or starting goes
  // to its next-ranked worker rather than waiting; without a key, least-loaded.
  Choice choose(std::span<const Candidate> workers, std::string_view key);

  // The index of the worker `affinity` pins `key` to (rendezvous over the worker ids); -1
  // when `workers` is empty.
  static int affinity_home(std::span<const Candidate> workers, std::string_view key);

 private:
  Choice round_robin(std::span<const Candidate> workers);
  template <class Better>
  Choice best_with_room(std::span<const Candidate> workers, Better better);
  Choice least_loaded(std::span<const Candidate> workers);
  Choice random(std::span<const Candidate> workers);
  Choice affinity(std::span<const Candidate> workers, std::string_view key);
  Choice least_rss(std::span<const Candidate> workers);
  Choice by_key(std::span<const Candidate> workers, std::string_view key);

  DispatchStrategy strategy_;
  std::mt19937_64 rng_;
  std::uint64_t last_id_ = 0;  // round-robin cursor: the worker id chosen last
};

}  // namespace sandpool::core
