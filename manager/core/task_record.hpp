// One task's record, shared between the pool's loop thread (which drives it) and the
// Tickets that observe it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <sandpool/pool.hpp>
#include <sandpool/status.hpp>
#include <sandpool/task.hpp>

namespace sandpool::core {

struct TaskRecord {
  TaskRecord(std::uint64_t task_id, std::string task_type, std::string task_payload,
             SubmitOptions options)
      : id(task_id),
        type(std::move(task_type)),
        payload(std::move(task_payload)),
        opts(std::move(options)) {
    account.id = id;
    account.type = type;
    if (opts.not_before) {
      account.not_before_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(opts.not_before->time_since_epoch())
              .count();
    }
    account.tenant = opts.tenant;
    level = opts.priority;
  }

  // Immutable after submit.
  const std::uint64_t id;
  const std::string type;
  const std::string payload;
  const SubmitOptions opts;

  // Loop-thread only.
  std::uint32_t attempts_ended = 0;  // attempts that ran and ended (history size)
  std::uint32_t max_attempts = 1;    // 1 + retries
  std::int64_t timeout_ns = 0;       // per attempt
  bool cancel_requested = false;
  std::uint32_t free_requeues = 0;  // times put back unstarted from a dead worker's ring
  std::int64_t submitted_ns = 0;    // when the loop took it in (`tasks` lists it so)
  // When it entered the queue: at submit, or when due for a scheduled task (queue_ttl, queue
  // wait and latency count from here).
  std::int64_t queued_ns = 0;
  // Since when it waits for a worker (queued at submit, queued again for a retry, let through
  // a flow gate): the autoscaler's queue wait. Kept while it waits behind another in a ring.
  std::int64_t waiting_since_ns = 0;
  std::int64_t expires_ns = 0;  // queued_ns + queue_ttl; 0: never
  // Scheduled (SubmitOptions::not_before): when it is due to be queued; 0: not scheduled.
  std::int64_t due_ns = 0;
  // Its level in the queue (its priority, raised by aging) and since when it is there.
  std::int32_t level = 0;
  std::int64_t level_since_ns = 0;
  // Counted in the pool's per-tenant waiting counts (TenantCounts) while admitted. Set
  // before the loop sees the task.
  bool tenant_counted = false;
  bool admitted = true;          // counted in the pool's admission count (waiting for a worker)
  bool dispatched_once = false;  // its queue wait is recorded at the first dispatch only
  // Its end is decided: terminal, or dead-lettered with the letter being written. Nothing
  // dispatches, cancels or ends it again.
  bool decided = false;
  // Set before a cancel for a refused journal accept: the error its end reports.
  std::string cancel_why;
  // In a pool with a journal: the journal holds (or is committing) the task, so its end is
  // written there before it is reported. Set before the loop sees the task (false for a
  // replay), cleared on the loop thread when the journal refuses it.
  bool journaled = false;

  // Shared: state is read lock-free; done flips 0 -> 1 once, after account is final.
  std::atomic<TaskState> state{TaskState::kQueued};
  std::atomic<std::uint32_t> done{0};
  mutable std::mutex mu;  // guards account and the acknowledgement below
  TaskResult account;

  // The acknowledgement (Ticket::wait_accepted). ack flips 0 -> 1 once ack_status is set;
  // released: submit() returned the ticket, so opts.on_accepted may be called (by whichever
  // of the journal's callback and submit() comes second).
  std::atomic<std::uint32_t> ack{0};
  Status ack_status;
  bool ack_released = false;
};

using TaskPtr = std::shared_ptr<TaskRecord>;

}  // namespace sandpool::core
