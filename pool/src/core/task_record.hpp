// One task's record, shared between the pool's loop thread (which drives it) and the
// Tickets that observe it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include <sandpool/base/status.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/pool/pool.hpp>
#include <sandpool/pool/task_ref.hpp>
#include <sandpool/task/task.hpp>

#include "core/interned_types.hpp"
#include "core/packed_options.hpp"

namespace sandpool::core {

// Its layout is kept small (docs/performance.md, "Memory per task"): a queued task is this
// record and a queue entry. The record is one allocation (TaskRecord::make) with, up to
// kInlinePayloadMax bytes, its payload after it; a larger payload stays in its own
// std::string, placed there instead. Its type is an index into the interned types
// (interned_types.hpp) when the pool serves it, else (a type no pool's table holds) copied
// in front of the payload. Handles (TaskPtr) count references in the record: no
// control block. What is rare lives behind a pointer (the options' strings and callbacks, the
// account until the task's first attempt ends), and the lock is one of a shared set
// (record_lock).
struct TaskRecord {
  // Payloads up to this size are copied into the record's allocation; larger ones are moved
  // (copying them would cost more than the allocation it saves).
  static constexpr std::size_t kInlinePayloadMax = 4096;

  // The record of a new task, counted once (the handle returned).
  // `shared`: its batch's callbacks (PackedOptions).
  // `options` is moved from, not copied or moved into a parameter of its own: the submit path
  // hands it down by reference from Pool::submit's by-value parameter (docs/performance.md).
  static TaskPtr make(std::uint64_t task_id, TaskType task_type, std::string task_payload,
                      SubmitOptions&& options, const PackedOptions::Callbacks& shared = {});
  // The same with a copy of `options` (tests, and callers that keep theirs).
  static TaskPtr make(std::uint64_t task_id, TaskType task_type, std::string task_payload,
                      const SubmitOptions& options, const PackedOptions::Callbacks& shared = {}) {
    return make(task_id, task_type, std::move(task_payload), SubmitOptions(options), shared);
  }
  TaskRecord(const TaskRecord&) = delete;
  TaskRecord& operator=(const TaskRecord&) = delete;

  // Immutable after submit; valid while the record lives.
  std::string_view type() const {
    if ((type_ref_ & kTypeInline) != 0) return {tail(), inline_type_len()};
    return interned_type(type_ref_);
  }
  std::string_view payload() const {
    if (payload_len_ != kPayloadApart) return {tail() + inline_type_len(), payload_len_};
    return *payload_apart();
  }
  // The bytes of its allocation: the record, its inline type and its payload (or the
  // std::string holding it).
  std::size_t allocation_size() const;

 private:
  friend void retain_record(TaskRecord*) noexcept;
  friend void release_record(TaskRecord*) noexcept;
  friend std::uint32_t record_refs(const TaskRecord*) noexcept;
  static constexpr std::uint32_t kPayloadApart = ~std::uint32_t{0};
  // type_ref_ with this bit: the type is inline, its length the other bits; without: its
  // interned index.
  static constexpr std::uint32_t kTypeInline = std::uint32_t{1} << 31;

  TaskRecord(std::uint64_t task_id, std::uint32_t type_ref, std::uint32_t payload_len,
             SubmitOptions&& options, const PackedOptions::Callbacks& shared);
  ~TaskRecord();
  // The bytes after the record: the type if inline, then the payload or (kPayloadApart) a
  // std::string.
  const char* tail() const { return reinterpret_cast<const char*>(this + 1); }
  char* tail() { return reinterpret_cast<char*>(this + 1); }
  std::uint32_t inline_type_len() const {
    return (type_ref_ & kTypeInline) != 0 ? type_ref_ & ~kTypeInline : 0;
  }
  static std::size_t apart_offset(std::uint32_t type_len);
  const std::string* payload_apart() const {
    return std::launder(
        reinterpret_cast<const std::string*>(tail() + apart_offset(inline_type_len())));
  }

  // The fields in an order that leaves few holes (sizeof is checked below).
  std::atomic<std::uint32_t> refs_{1};  // the handles (TaskPtr) on it
  const std::uint32_t type_ref_;        // see kTypeInline

 public:
  const std::uint64_t id;
  // Immutable after submit but for on_accepted, which its one caller (the journal's callback
  // or release_ack) takes and drops once it ran: poold's closure there is two allocations per
  // task that would otherwise live as long as the record. Nothing else reads it; and but for
  // the pool's defaults, which the loop writes into it at take-in (take_defaults): the
  // task's retries, timeout and queue_ttl are read there (max_attempts(), timeout_ns(),
  // expires_ns()).
  PackedOptions opts;

  // Loop-thread only.
  std::uint32_t attempts_ended = 0;  // attempts that ran and ended (history size)
  std::uint32_t free_requeues = 0;   // times put back unstarted from a dead worker's ring
  // Its level in the queue (its priority, raised by aging) and since when it is there.
  std::int32_t level = 0;

 private:
  const std::uint32_t payload_len_;  // kPayloadApart: a std::string after the inline type

 public:
  std::int64_t level_since_ns = 0;
  std::int64_t submitted_ns = 0;  // when the loop took it in (`tasks` lists it so)
  // When it entered the queue: at submit, or when due for a scheduled task (queue_ttl, queue
  // wait and latency count from here). A scheduled task is due then (due_ns()).
  std::int64_t queued_ns = 0;
  // Since when it waits for a worker (queued at submit, queued again for a retry, let through
  // a flow gate): the autoscaler's queue wait. Kept while it waits behind another in a ring.
  std::int64_t waiting_since_ns = 0;

  // Shared: state is read lock-free.
  std::atomic<TaskState> state{TaskState::kQueued};
  bool ack_released = false;  // guarded by mu(), see below; apart from the loop's bits
  // Loop-thread only (or set before the loop sees the task): one byte of bits.
  bool cancel_requested : 1 = false;
  // Cancelled because the journal refused it: its end reports ack_status()'s message.
  bool refused : 1 = false;
  // Counted in the pool's per-tenant waiting counts (TenantCounts) while admitted. Set
  // before the loop sees the task.
  bool tenant_counted : 1 = false;
  bool admitted : 1 = true;          // counted in the pool's admission count (waiting for a worker)
  bool dispatched_once : 1 = false;  // its queue wait is recorded at the first dispatch only
  // Its end is decided: terminal, or dead-lettered with the letter being written. Nothing
  // dispatches, cancels or ends it again.
  bool decided : 1 = false;
  // In a pool with a journal: the journal holds (or is committing) the task, so its end is
  // written there before it is reported. Set before the loop sees the task (false for a
  // replay), cleared on the loop thread when the journal refuses it.
  bool journaled : 1 = false;

  // Loop thread, from take-in on (PackedOptions::take_defaults).
  std::uint32_t max_attempts() const { return opts.max_attempts(); }                // 1 + retries
  std::int64_t timeout_ns() const { return opts.run_timeout().count() * 1000000; }  // per attempt
  // queued_ns + queue_ttl; 0: never.
  std::int64_t expires_ns() const {
    auto ttl = opts.run_queue_ttl();
    return ttl ? queued_ns + ttl->count() * 1000000 : 0;
  }
  // Scheduled (SubmitOptions::not_before): when it is due to be queued; 0: not scheduled.
  // Set by the loop when it takes the task in: a scheduled task's queued_ns is its due time,
  // later than its submitted_ns; any other task's is its submitted_ns.
  std::int64_t due_ns() const { return queued_ns != submitted_ns ? queued_ns : 0; }

  // Shared: done flips 0 -> 1 once, after account is final.
  std::atomic<std::uint32_t> done{0};
  // The acknowledgement (Ticket::wait_accepted). ack flips 0 -> 1 once the answer is set
  // (set_ack_status); released: submit() returned the ticket, so opts' on_accepted may be
  // called (by whichever of the journal's callback and submit() comes second).
  std::atomic<std::uint32_t> ack{0};
  // Prefetch hints for a record whose last handle is about to go (FinishedTasks evicts the
  // oldest kept record per task ended, long gone from the caches): its own lines, then (once
  // those are in) the blocks its release reads, then (once that is in) the account's
  // buffers. Each stage reads only what the one before brought in; none changes anything.
  void prefetch_record() const;
  void prefetch_owned() const;
  void prefetch_account_buffers() const;

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
  // Fills a default TaskResult as the account is before its first write.
  void fill_fresh_account(TaskResult& r) const;

  std::unique_ptr<Status> ack_error;     // guarded by mu(); null: ok (or not answered yet)
  std::unique_ptr<TaskResult> account_;  // see account()
};
// docs/performance.md, "Memory per task": with a 64-byte payload and an interned type (any
// length) the record is 216 bytes, in jemalloc's 224-byte class; a field added here moves
// that figure.
static_assert(sizeof(TaskRecord) == 152);

// The mutex of the record with this id: records share kRecordLocks mutexes (lock striping),
// because a mutex per record was 40 of its bytes and its sections are a few stores long.
Mutex& record_lock(std::uint64_t id);
inline Mutex& TaskRecord::mu() const { return record_lock(id); }

// The task's account as a shared_ptr that keeps its record alive (for the journal, which
// reads a final account in place). The caller holds the account final (see account()).
std::shared_ptr<const TaskResult> shared_account(const TaskPtr& task);

}  // namespace sandpool::core
