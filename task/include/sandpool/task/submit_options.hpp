// SubmitOptions: how one task is submitted, the options the pool, its journal and its dead
// letters share (the pool's <sandpool/pool/pool.hpp> takes them; the store keeps their plain-data
// part, <sandpool/store/dead_letters.hpp> and <sandpool/store/task_journal.hpp>).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <sandpool/base/status.hpp>
#include <sandpool/task/task.hpp>

namespace sandpool {

struct SubmitOptions {
  std::optional<std::chrono::milliseconds> timeout;  // from dispatch; default: the pool's
  std::optional<std::uint32_t> retries;              // retries after the first attempt
  // Attempts the task made before it came here (elsewhere: another node of a Redis pool):
  // this pool numbers its attempts from attempts_before + 1 (the plugin's `attempt` and the
  // history say so); `retries` still counts from this pool's first. Not journaled.
  std::uint32_t attempts_before = 0;
  std::int32_t priority = 0;                           // higher first, FIFO within a level
  std::string key;                                     // affinity key (dispatch `affinity`)
  std::optional<std::chrono::milliseconds> queue_ttl;  // default: the pool's queue_ttl
  bool fail_fast = false;  // dead-letter (crash_loop) instead of waiting out a crash loop
  // The key a service deduplicates submits by (poold's idempotency keys): in a pool that
  // journals, written with the task, so that it outlives a restart. The pool itself does not
  // deduplicate.
  std::string idempotency_key;
  // A scheduled task (docs/architecture.md, "Scheduled tasks"): it is `scheduled`, outside
  // the queue though counted in queue_capacity, until this wall-clock time, then queued.
  // A time already past queues it at once. In a pool that journals it is written with the
  // task, so it outlives a restart.
  std::optional<std::chrono::system_clock::time_point> not_before;
  // The same, relative to submit: not_before = now + delay (0 .. 366 days). At most one of
  // the two; submit() turns a delay into not_before.
  std::optional<std::chrono::milliseconds> delay;
  // Whom the task is for: within a priority level the pool serves tenants by weighted fair
  // queueing (PoolOptions::tenants), and queue.max_per_tenant bounds each tenant's waiting
  // tasks. Empty: the default tenant. At most 128 bytes, printable ASCII.
  std::string tenant;
  // Called on the loop thread for each progress update (coalesced when it lags).
  std::function<void(std::uint64_t id, std::string_view data)> on_progress;
  // Called on the loop thread once, when the task is terminal. In a pool that journals,
  // once its end is committed.
  std::function<void(const TaskResult&)> on_done;
  // Called once the task is acknowledged (ok) or refused (Ticket::wait_accepted): in a pool
  // that journals, on the journal's writer thread after the commit (or on the submitting
  // thread when the commit was over before submit() returned); otherwise within submit().
  // Never called for a submit that returned an error. Keep it short; it must not block.
  std::function<void(std::uint64_t id, const Status&)> on_accepted;
};

}  // namespace sandpool
