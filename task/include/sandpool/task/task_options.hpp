// TaskOptions: every option a task keeps, as plain data. The one definition that submit
// (SubmitOptions), the journal (JournalTask), the dead letters (DeadLetter), a Redis pool's
// stream entry (redis::StreamTask) and the control protocol (ops::SubmitArgs, the typed
// client's SubmitRequest) hold; each of those serialises it at its own edge (JSON on the wire,
// SQLite columns, Redis hash fields) and adds only what is its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <sandpool/base/wall_clock.hpp>

namespace sandpool {

struct TaskOptions {
  std::optional<std::chrono::milliseconds> timeout;    // from dispatch; default: the pool's
  std::optional<std::uint32_t> retries;                // retries after the first attempt
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
  // Whom the task is for: within a priority level the pool serves tenants by weighted fair
  // queueing (PoolOptions::tenants), and queue.max_per_tenant bounds each tenant's waiting
  // tasks. Empty: the default tenant. At most 128 bytes, printable ASCII.
  std::string tenant;

  // not_before as the journal, the wire and Redis write it (wall_ms_of()), or nullopt when
  // the task is not scheduled.
  std::optional<std::int64_t> not_before_ms() const;
  // Sets not_before from ms (nullopt: unset). Returns false, leaving it unset, when `ms` is
  // outside the system clock's range (wall_time_of_ms()): bytes from a file, a peer or Redis
  // that each edge refuses rather than overflow on.
  [[nodiscard]] bool set_not_before_ms(std::optional<std::int64_t> ms);

  bool operator==(const TaskOptions&) const = default;
};

inline std::optional<std::int64_t> TaskOptions::not_before_ms() const {
  if (!not_before) return std::nullopt;
  return wall_ms_of(*not_before);
}

inline bool TaskOptions::set_not_before_ms(std::optional<std::int64_t> ms) {
  not_before.reset();
  if (!ms) return true;
  not_before = wall_time_of_ms(*ms);
  return not_before.has_value();
}

}  // namespace sandpool
