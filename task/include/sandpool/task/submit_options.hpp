// SubmitOptions: how one task is submitted to a pool (<sandpool/pool/pool.hpp>): the options
// the task keeps (TaskOptions, <sandpool/task/task_options.hpp>, which the journal and the
// dead letters store) and this call's own (attempts_before, delay, callbacks).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <sandpool/base/status.hpp>
#include <sandpool/task/task.hpp>
#include <sandpool/task/task_options.hpp>

namespace sandpool {

// TaskOptions (what the task keeps: journaled, lettered, carried to Redis and on the wire)
// plus what belongs to one submit call: where its attempts start, a relative delay, and the
// callbacks.
struct SubmitOptions : TaskOptions {
  // Attempts the task made before it came here (elsewhere: another node of a Redis pool):
  // this pool numbers its attempts from attempts_before + 1 (the plugin's `attempt` and the
  // history say so); `retries` still counts from this pool's first. Not journaled.
  std::uint32_t attempts_before = 0;
  // not_before relative to submit: not_before = now + delay (0 .. 366 days). At most one of
  // the two; submit() turns a delay into not_before.
  std::optional<std::chrono::milliseconds> delay;
  // Called on the loop thread for each progress update (coalesced when it lags).
  std::function<void(std::uint64_t id, std::string_view data)> on_progress;
  // Called on the loop thread once, when the task is terminal. In a pool that journals,
  // once its end is committed.
  std::function<void(const TaskResult&)> on_done;
  // True: on_done is short, thread-safe and never waits on the pool, so it may also run on
  // the thread of a waiter that reads the task's result itself (Ticket::wait, wait_for,
  // read_here: the direct end, docs/architecture.md "The loop's claim"), under the loop's
  // claim. For sandpool's own callers (the Redis feeder's ends); false (the default): on_done
  // runs on the loop thread only, and a task carrying one is never ended on a waiter's thread.
  bool on_done_on_waiter = false;
  // Called once the task is acknowledged (ok) or refused (Ticket::wait_accepted): in a pool
  // that journals, on the journal's writer thread after the commit (or on the submitting
  // thread when the commit was over before submit() returned); otherwise within submit().
  // Never called for a submit that returned an error. Keep it short; it must not block.
  std::function<void(std::uint64_t id, const Status&)> on_accepted;

  // Options for submitting (again) a task that kept `kept`; the callbacks are the caller's.
  static SubmitOptions of(const TaskOptions& kept) {
    SubmitOptions o;
    static_cast<TaskOptions&>(o) = kept;
    return o;
  }
  // The options the task keeps (without this call's own).
  const TaskOptions& kept() const { return *this; }
};

}  // namespace sandpool
