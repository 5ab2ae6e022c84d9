// The task operations: submit, submit_batch, task, wait, cancel (docs/protocol.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/control/ops/op_info.hpp>
#include <sandpool/task/task_options.hpp>

namespace sandpool::ops {

// `submit`: one task; its payload travels in the request's blob. Also one task of a batch
// (`defaults`, `tasks`), where `wait` and `progress` are not read. The ranges the server
// checks (timeout within the pool's max_timeout) are in docs/protocol.md.
struct SubmitArgs {
  std::string type;  // required (a batch task may take it from nowhere else)
  std::string pool;  // empty: route by type
  // The task's options, as the wire carries them: priority, timeout (timeout_ms), retries,
  // key (affinity), idempotency_key (a resubmit with the same key gets the existing task),
  // not_before (not_before_ms, wall-clock ms since the epoch) and tenant ("" the default
  // one). queue_ttl and fail_fast are not offered on the wire.
  TaskOptions options;
  // Scheduled this long after the submit (wire: delay_ms); at most one of delay and
  // options.not_before.
  std::optional<std::chrono::milliseconds> delay;
  bool wait = false;      // answer when the task ends, with its account
  bool progress = false;  // wait only: the task's progress as event frames
  // `submit` only (a batch has its own): the client's name for this request, sent again
  // unchanged when it retries it; without an idempotency_key the task takes
  // request_key(request_token) as one, so a retry whose first try's answer was lost (a
  // timeout saying "outcome unknown") gets the task that try made, if it made one.
  std::string request_token;
};

// The wire names of submit's arguments, in the order encode() and decode() visit them (one
// list, op_json_submit.cpp): what control_op_names prints for the Python client's test.
std::vector<std::string_view> submit_arg_names();
// The wire names a batch's task reads of them (submit_batch's `defaults`, `tasks`), in the
// same order: what control_op_names prints for the Python client's Job test.
std::vector<std::string_view> batch_task_arg_names();

// The idempotency key a request token gives a task without one: "req:TOKEN" for a submit,
// "req:TOKEN:INDEX" for the task at INDEX of a batch.
std::string request_key(const std::string& token, std::optional<std::size_t> index = {});

// `task`, `cancel`: the task's id.
struct TaskIdArgs {
  std::uint64_t id = 0;
};

// `wait`: the task's id, and how long the wait may take (none: until the task ends).
struct WaitArgs {
  std::uint64_t id = 0;
  std::optional<std::chrono::milliseconds> timeout;  // wire: timeout_ms
};

// One attempt of a task (architecture.md, "Task states, outcomes and reasons").
struct AttemptAccount {
  std::uint32_t number = 0;
  std::string outcome;
  std::string error;
  std::int32_t worker_pid = 0;
  std::int64_t started_ms = 0;
  std::int64_t ended_ms = 0;
  std::string backtrace;  // "" when none (then absent on the wire)
};

// What a task was submitted with (the `task` reply, while poold holds the task): its options,
// and the start of its payload, which only the rights that read payloads get. The wire's
// `submitted` carries priority, timeout_ms, retries, key and idempotency_key of the options
// (the list submit shares, op_json); not_before_ms and tenant are the account's own
// (TaskAccount), queue_ttl and fail_fast are not on the wire: they stay unset in a decoded one.
struct TaskSubmission : TaskOptions {
  std::uint64_t payload_size = 0;
  // The payload as text (log_text(): a byte that is not printable UTF-8 as \xNN, a
  // backslash as \\), at most 4 KiB; absent: withheld.
  std::optional<std::string> payload_preview;
};

// A task's account (the reply of `task`, `wait` and a waited `submit`); the result bytes
// travel in the reply's blob.
struct TaskAccount {
  std::uint64_t id = 0;
  std::string type;
  std::string state;
  std::optional<std::string> reason;  // dead-letter or cancel reason, for those states
  std::string error;
  std::uint32_t attempts = 0;
  std::vector<AttemptAccount> history;
  bool dead_letter_pending = false;         // decided dead-lettered, the letter not yet written
  bool result_withheld = false;             // a result exists; the peer lacks the rights to read it
  bool result_dropped = false;              // an idempotency key's kept result had to go
  std::int64_t not_before_ms = 0;           // scheduled: not queued before (wall ms); 0: none
  std::string tenant;                       // "" (absent on the wire): the default tenant
  std::optional<TaskSubmission> submitted;  // `task` only, for a task poold holds in memory
};

// `submit`: without wait, the task's id; with wait, its final account (the result bytes in
// the reply's blob), which on the wire takes the place of id and existing.
struct SubmitReply {
  std::uint64_t id = 0;
  bool existing = false;  // the idempotency key named an earlier task
  std::optional<TaskAccount> task;
};

// A waited submit's event frames: `accepted` (id, existing) once the task is queued, then
// `progress` (id; the progress bytes in the frame's blob).
struct SubmitEvent {
  std::string event;  // "accepted" or "progress"
  std::uint64_t id = 0;
  bool existing = false;  // accepted only
};

// `submit_batch`: one payload length per task (the payloads, concatenated, are the blob);
// the tasks share `defaults` or each has its own entry of `tasks` (then as long as
// payload_lens).
struct SubmitBatchArgs {
  std::vector<std::uint64_t> payload_lens;
  std::optional<SubmitArgs> defaults;
  std::optional<std::vector<SubmitArgs>> tasks;
  std::string request_token;  // as SubmitArgs::request_token, for each task by its index
};

// Why the task at `index` of a batch (or, in refused_from, every task from it on) was
// refused, under its wire code (docs/protocol.md, "Errors").
struct BatchRefusal {
  std::uint64_t index = 0;
  std::string code;
  std::string message;
};

struct SubmitBatchReply {
  std::vector<std::uint64_t> ids;       // one per task tried; 0 for a refused one
  std::vector<std::uint64_t> existing;  // indexes whose idempotency key named an earlier task
  std::vector<BatchRefusal> errors;
  std::optional<BatchRefusal> refused_from;  // the tasks from its index on were not tried
};

// `tasks`: which tasks to list; an empty or absent member matches any task.
struct TaskListArgs {
  std::string pool;
  std::string type;
  std::string state;                               // a task state (queued, running, completed, ...)
  std::string key;                                 // the affinity key
  std::optional<std::string> tenant;               // "": the default tenant; absent: any
  std::optional<std::int64_t> since_ms, until_ms;  // submitted within (wall clock)
  std::uint64_t limit = 100;                       // 1..1000
};

// `tasks`: one task found.
struct TaskSummary {
  std::uint64_t id = 0;
  std::string pool;
  std::string type;
  std::string state;
  std::optional<std::string> reason;
  std::string error;
  std::uint32_t attempts = 0;
  std::string key;
  std::int64_t submitted_ms = 0;
  std::string tenant;                         // "" (absent on the wire): the default tenant
  std::optional<std::int64_t> not_before_ms;  // scheduled with a due time (wall ms)
};

struct TaskListReply {
  std::vector<TaskSummary> tasks;  // newest first (by id)
  bool truncated = false;          // more matched than `limit`
};

struct CancelReply {
  std::uint64_t id = 0;
  bool cancelled = false;  // false: the task was already terminal
  std::string state;
};

struct Submit {
  static constexpr std::string_view kName = "submit";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kRequests;
  using Args = SubmitArgs;
  using Reply = SubmitReply;
  using Event = SubmitEvent;
};
struct SubmitBatch {
  static constexpr std::string_view kName = "submit_batch";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kRequests;
  using Args = SubmitBatchArgs;
  using Reply = SubmitBatchReply;
};
struct Task {
  static constexpr std::string_view kName = "task";
  static constexpr Rights kRights = Rights::kRead;
  static constexpr Lane kLane = Lane::kReads;
  using Args = TaskIdArgs;
  using Reply = TaskAccount;
};
struct Wait {
  static constexpr std::string_view kName = "wait";
  static constexpr Rights kRights = Rights::kRead;
  static constexpr Lane kLane = Lane::kReads;
  using Args = WaitArgs;
  using Reply = TaskAccount;
};
struct TaskList {
  static constexpr std::string_view kName = "tasks";
  static constexpr Rights kRights = Rights::kRead;
  static constexpr Lane kLane = Lane::kReads;
  using Args = TaskListArgs;
  using Reply = TaskListReply;
};
struct Cancel {
  static constexpr std::string_view kName = "cancel";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kRequests;
  using Args = TaskIdArgs;
  using Reply = CancelReply;
};

}  // namespace sandpool::ops
