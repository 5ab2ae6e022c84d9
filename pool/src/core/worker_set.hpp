// WorkerSet: a pool's workers and the bookkeeping that is about the set rather than one task:
// the worker target, slots (the lowest free one, workers started per slot), the launch spec's
// generation and the rolling restart that replaces stale workers one at a time, restart
// intensity (crash_loop) with the respawn backoff it and init failures impose, and the hung
// workers whose backtrace is awaited. It decides which worker goes next (a shrink, a rolling
// restart) and when a replacement may start; PoolCore carries it out (WorkerControl commands,
// a drain's tasks back to the queue), so the Worker records it hands out are PoolCore's to
// change (worker_state.hpp), and their membership is the set's.
//
// Thread-safety: none; the pool's loop thread owns it. Times are CLOCK_MONOTONIC ns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "core/worker_state.hpp"
#include "supervision/restart_intensity.hpp"

namespace sandpool::core {

class WorkerSet {
 public:
  using Map = std::map<WorkerId, Worker>;  // ascending id: round-robin order

  WorkerSet(std::uint32_t target, supervision::RestartIntensity::Limits limits);

  // ---- membership ----
  Map::iterator begin() { return workers_.begin(); }
  Map::iterator end() { return workers_.end(); }
  Map::const_iterator begin() const { return workers_.begin(); }
  Map::const_iterator end() const { return workers_.end(); }
  bool empty() const { return workers_.empty(); }
  std::size_t size() const { return workers_.size(); }
  // Null when `id` is not (or no longer) here.
  Worker* find(WorkerId id);
  // Takes in a worker just spawned: stamps it with the current generation, the lowest slot no
  // live worker holds and how many were started in that slot before it. Returns it.
  Worker& add(Worker w);
  // Takes a worker that exited out of the set (empty when it is not here).
  Map::node_type extract(WorkerId id) { return workers_.extract(id); }
  std::size_t live() const;   // starting or ready: what counts toward the target
  std::size_t ready() const;  // ready
  bool any_starting() const;

  // ---- the target ----
  std::uint32_t target() const { return target_; }
  void set_target(std::uint32_t n) { target_ = n; }
  // The worker a shrink lets go first: a starting one, then the longest idle, then the least
  // loaded; null when none is live.
  Worker* pick_to_shrink();

  // ---- generations and the rolling restart ----
  // Returns true iff `w` was started with an older launch spec than the current one.
  bool stale(const Worker& w) const { return w.generation != generation_; }
  // The launch spec changed: every ready worker started before is marked to be replaced in
  // its turn, and a rolling restart starts when there is one. Returns how many.
  std::size_t new_generation();
  // Marks every ready worker to be replaced in its turn (a rolling restart of all).
  void mark_all_for_replacement();
  bool rolling_restart() const { return rolling_; }
  void set_rolling_restart(bool on) { rolling_ = on; }
  // The rolling restart's next step: kReplace with the next marked worker (its mark taken),
  // kWait while it cannot go on (not rolling, a replacement still starting, a respawn
  // backoff held), kFinished once no worker is left marked (the restart is over).
  struct RollingStep {
    enum class Kind : std::uint8_t { kWait, kReplace, kFinished };
    Kind kind = Kind::kWait;
    Worker* worker = nullptr;
  };
  RollingStep next_replacement();

  // ---- restart intensity and the respawn backoff ----
  void set_intensity_limits(supervision::RestartIntensity::Limits limits) {
    intensity_.set_limits(limits);
  }
  bool crash_loop() const { return intensity_.crash_loop(); }
  // Counts an unexpected exit; in crash_loop, the next respawn waits its backoff. Returns true
  // iff this exit entered crash_loop.
  bool note_restart(std::int64_t now);
  // Unexpected exits within the restart window, as of the last note_restart.
  std::size_t recent_restarts() const { return intensity_.recent(); }
  // In crash_loop: the first ready worker up for stable_after takes the pool out of it;
  // returns it (null when none did, or not in crash_loop).
  const Worker* note_stable(std::int64_t now);
  // A worker died before it was ready; returns the consecutive init failures so far.
  std::uint32_t note_init_failure() { return ++init_failures_; }
  // A worker became ready: the init failures in a row end.
  void note_ready() { init_failures_ = 0; }
  std::uint32_t init_failures() const { return init_failures_; }
  // Holds the respawn for the init-failure backoff: 100 ms doubling per failure in a row,
  // at most 5 s.
  void back_off_init_failure(std::int64_t now);
  // Whether a backoff holds the respawn, and until when (0: none).
  bool respawn_held() const { return respawn_due_ns_ != 0; }
  std::int64_t respawn_due_ns() const { return respawn_due_ns_; }
  // Returns true iff a held respawn is due at `now`, and releases it.
  bool take_due_respawn(std::int64_t now);
  // Drops a held respawn (the pool failed: nothing respawns).
  void cancel_respawn() { respawn_due_ns_ = 0; }

  // ---- backtraces awaited from hung workers (Killing::backtrace_due_ns) ----
  void await_backtrace() { ++backtraces_awaited_; }
  void backtrace_collected() { --backtraces_awaited_; }
  std::size_t backtraces_awaited() const { return backtraces_awaited_; }

 private:
  std::uint32_t free_slot() const;

  Map workers_;
  std::uint32_t target_ = 0;
  std::uint64_t generation_ = 0;            // bumped when the launch spec changes
  std::vector<std::uint64_t> slot_starts_;  // workers started per slot so far
  bool rolling_ = false;
  supervision::RestartIntensity intensity_;
  std::uint32_t init_failures_ = 0;  // consecutive
  std::int64_t respawn_due_ns_ = 0;  // 0: none held
  std::size_t backtraces_awaited_ = 0;
};

}  // namespace sandpool::core
