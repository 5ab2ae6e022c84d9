// One task's record, shared between the pool's loop thread (which drives it) and the
// Tickets that observe it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <sandpool/base/status.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/pool/pool.hpp>
#include <sandpool/task/task.hpp>

#include "core/packed_options.hpp"

namespace sandpool::core {

// Its layout is kept small (docs/performance.md, "Memory per task"): a queued task is this
// record, its payload and a queue entry, and the allocator rounds the record (with the
// shared_ptr's control block beside it) up to a size class. What is rare lives behind a
// pointer (the options' strings and callbacks, the account until the task's first attempt
// ends), and the lock is one of a shared set (record_lock).
struct TaskRecord {
  TaskRecord(std::uint64_t task_id, std::string task_type, std::string task_payload,
             SubmitOptions options)
      : id(task_id),
        type(std::move(task_type)),
        payload(std::move(task_payload)),
        opts(std::move(options)) {
    level = opts.priority();
  }
  TaskRecord(const TaskRecord&) = delete;
  TaskRecord& operator=(const TaskRecord&) = delete;

  // Immutable after submit.
  const std::uint64_t id;
  const std::string type;
  const std::string payload;
  // Immutable after submit but for on_accepted, which its one caller (the journal's callback
  // or release_ack) takes and drops once it ran: poold's closure there is two allocations per
  // task that would otherwise live as long as the record. Nothing else reads it.
  PackedOptions opts;

  // Loop-thread only.
  std::uint32_t attempts_ended = 0;  // attempts that ran and ended (history size)
  std::uint32_t max_attempts = 1;    // 1 + retries
  std::uint32_t free_requeues = 0;   // times put back unstarted from a dead worker's ring
  // Its level in the queue (its priority, raised by aging) and since when it is there.
  std::int32_t level = 0;
  std::int64_t level_since_ns = 0;
  std::int64_t timeout_ns = 0;    // per attempt
  std::int64_t submitted_ns = 0;  // when the loop took it in (`tasks` lists it so)
  // When it entered the queue: at submit, or when due for a scheduled task (queue_ttl, queue
  // wait and latency count from here). A scheduled task is due then (due_ns()).
  std::int64_t queued_ns = 0;
  // Since when it waits for a worker (queued at submit, queued again for a retry, let through
  // a flow gate): the autoscaler's queue wait. Kept while it waits behind another in a ring.
  std::int64_t waiting_since_ns = 0;
  std::int64_t expires_ns = 0;  // queued_ns + queue_ttl; 0: never
  // Set before a cancel for a refused journal accept: the error its end reports. Null: none.
  std::unique_ptr<const std::string> cancel_why;
  bool cancel_requested = false;
  // Counted in the pool's per-tenant waiting counts (TenantCounts) while admitted. Set
  // before the loop sees the task.
  bool tenant_counted = false;
  bool admitted = true;          // counted in the pool's admission count (waiting for a worker)
  bool dispatched_once = false;  // its queue wait is recorded at the first dispatch only
  // Its end is decided: terminal, or dead-lettered with the letter being written. Nothing
  // dispatches, cancels or ends it again.
  bool decided = false;
  // In a pool with a journal: the journal holds (or is committing) the task, so its end is
  // written there before it is reported. Set before the loop sees the task (false for a
  // replay), cleared on the loop thread when the journal refuses it.
  bool journaled = false;

  // Scheduled (SubmitOptions::not_before): when it is due to be queued; 0: not scheduled.
  // Set by the loop when it takes the task in: a scheduled task's queued_ns is its due time,
  // later than its submitted_ns; any other task's is its submitted_ns.
  std::int64_t due_ns() const { return queued_ns != submitted_ns ? queued_ns : 0; }

  // Shared: state is read lock-free; done flips 0 -> 1 once, after account is final.
  std::atomic<TaskState> state{TaskState::kQueued};
  bool ack_released = false;  // guarded by mu(), see below
  std::atomic<std::uint32_t> done{0};
  // The acknowledgement (Ticket::wait_accepted). ack flips 0 -> 1 once the answer is set
  // (set_ack_status); released: submit() returned the ticket, so opts' on_accepted may be
  // called (by whichever of the journal's callback and submit() comes second).
  std::atomic<std::uint32_t> ack{0};
  // The task's account, created by its first write (an attempt's or the task's end, a
  // recovered history): a queued task has none, its account is what account_copy() builds
  // from the record. Guarded by mu(): the caller holds it, unless the account is final (done
  // is set, or the task is decided and past its last write) or the record not yet shared.
  TaskResult& account();
  // A copy of the account as it stands; the caller holds mu().
  TaskResult account_copy() const;

  // Guards account and the acknowledgement: one of a fixed set of mutexes shared by all
  // records (record_lock). Hold it for a few stores or a copy only, never while calling out
  // and never together with another record's: two records may share it.
  Mutex& mu() const;
  // The acknowledgement's answer; the caller holds mu(). Ok unless the journal refused it.
  Status ack_status() const { return ack_error ? *ack_error : Status::ok(); }
  void set_ack_status(const Status& s) { ack_error = s ? nullptr : std::make_unique<Status>(s); }

 private:
  // The account before its first write.
  TaskResult fresh_account() const;

  std::unique_ptr<Status> ack_error;     // guarded by mu(); null: ok (or not answered yet)
  std::unique_ptr<TaskResult> account_;  // see account()
};

// The mutex of the record with this id: records share kRecordLocks mutexes (lock striping),
// because a mutex per record was 40 of its bytes and its sections are a few stores long.
Mutex& record_lock(std::uint64_t id);
inline Mutex& TaskRecord::mu() const { return record_lock(id); }

using TaskPtr = std::shared_ptr<TaskRecord>;

}  // namespace sandpool::core
