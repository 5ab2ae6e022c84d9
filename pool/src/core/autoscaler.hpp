// The autoscaler's decisions (AutoscalePolicy; docs/architecture.md, "The autoscaler"): from
// the queue wait (how long the task that has waited longest for a worker has waited) and the
// ready workers' idle times, one step up or down of the worker target within WorkerBounds,
// with a cooldown between steps so that it never flaps, and when to look again. It decides
// only: PoolCore gathers what it reads (AutoscaleView), applies a step (the target, the
// `scaled` event, starting or draining workers) and asks again when next_look_ns() is due.
//
// Thread-safety: none; the pool's loop thread owns it. Times are CLOCK_MONOTONIC ns.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <sandpool/pool/pool_options.hpp>

namespace sandpool::core {

// A ready worker as the autoscaler sees it.
struct ReadyWorkerIdle {
  std::int64_t last_work_ns = 0;  // since when it has had no work (ready, or its last task)
  bool idle = false;              // its ring and backlog are empty
};

// What the autoscaler reads of the pool at a look.
struct AutoscaleView {
  std::int64_t queue_wait_ns = -1;  // the longest wait for a worker now; -1: none waits
  std::uint32_t target = 0;         // the worker target
  bool worker_starting = false;     // a worker is starting: its capacity is on the way
  bool crash_loop = false;
  bool respawn_pending = false;  // a crash backoff holds a respawn
  bool frozen = false;           // closing or failed: no step either way
  std::span<const ReadyWorkerIdle> ready;
};

// One decision: no step, or a new target and why (the log line's and the event's text).
struct AutoscaleStep {
  enum class Kind : std::uint8_t { kNone, kUp, kDown };
  Kind kind = Kind::kNone;
  std::uint32_t target = 0;  // kUp, kDown: the new target
  std::string reason;
};

class Autoscaler {
 public:
  Autoscaler(const AutoscalePolicy& policy, const WorkerBounds& bounds);

  // A reconfigure's policy and bounds (on, off, new bounds): the next look is now.
  void configure(const AutoscalePolicy& policy, const WorkerBounds& bounds, std::int64_t now);
  bool enabled() const { return policy_.enabled; }
  // `n` within the bounds.
  std::uint32_t clamp(std::uint32_t n) const;

  // The pool started: the first look is now.
  void start(std::int64_t now);
  // When the next look is due (INT64_MAX: none).
  std::int64_t next_look_ns() const { return next_ns_; }
  bool due(std::int64_t now) const { return now >= next_ns_; }
  // The queue wait at the last look (-1: none waited, or it did not look).
  std::int64_t queue_wait_ns() const { return queue_wait_ns_; }
  // How often it looks while tasks are open: a quarter of target_queue_wait, within
  // [5 ms, 100 ms].
  std::int64_t tick_ns() const;

  // A task started waiting for a worker: the next look is within a tick (now when the target
  // is 0, so that the first task of an on-demand pool starts its worker).
  void note_waiting(std::int64_t now, std::uint32_t target);
  // A manual scale set the target: it counts as a step, and the next look is within a tick.
  void note_manual_step(std::int64_t now);

  // Looks at the pool: returns the step to take (kNone when none), and records it as the
  // last step (and the last step up) for the cooldowns. Until plan_next_look(), no look is due.
  AutoscaleStep decide(std::int64_t now, const AutoscaleView& view);
  // After decide()'s step is applied: when to look again (never when decide() did not look:
  // off, closing or failed). Every tick while tasks are open (a
  // wait may pass the target); else, above min, when the next ready worker reaches
  // idle_timeout (within the cooldowns), or a tick on when none is ready yet.
  void plan_next_look(std::int64_t now, bool open_tasks, std::uint32_t target,
                      std::span<const ReadyWorkerIdle> ready);

 private:
  AutoscaleStep step_up(std::int64_t now, const AutoscaleView& view);
  AutoscaleStep step_down(std::int64_t now, const AutoscaleView& view);

  AutoscalePolicy policy_;
  WorkerBounds bounds_;
  std::int64_t next_ns_ = INT64_MAX;  // the next look
  // The last step (either way, or a manual scale) and the last step up: the cooldowns count
  // from them.
  std::int64_t last_step_ns_ = INT64_MIN / 4;
  std::int64_t last_up_ns_ = INT64_MIN / 4;
  std::int64_t queue_wait_ns_ = -1;  // the queue wait at the last look
  bool looked_ = false;              // the last decide() looked (on, not frozen)
};

}  // namespace sandpool::core
