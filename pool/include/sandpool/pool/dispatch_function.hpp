// A custom dispatch function (PoolOptions::dispatch_function): the embedding program's own
// choice of worker for each task, over a read-only view of the workers and of the task
// (docs/architecture.md, "The scheduler's order of decisions", step 6).
//
// Thread-safety: the function runs on the pool's loop thread, once per task the queue offers
// a worker, with no lock held; it must not call back into the Pool (a call that waits on the
// loop thread would wait on itself). The views are valid during the call only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>

namespace sandpool {

// One worker as a dispatch function sees it. Starting workers are included (ready false,
// no room) so that a function that maps keys onto slots sees the whole set.
struct WorkerView {
  std::uint64_t id = 0;         // stable for the worker's life, unique within the pool
  std::uint32_t slot = 0;       // WorkerInfo::slot: a replacement takes its predecessor's
  bool ready = false;           // false: starting (it cannot take a task yet)
  std::uint32_t in_flight = 0;  // tasks in its ring
  // Tasks its ring may hold: concurrency, or what it has left to serve before a recycle.
  // in_flight may exceed it for a while after a reconfigure lowered concurrency.
  std::uint32_t capacity = 0;
  // RSS in bytes, sampled once per heartbeat interval (and when it became ready); 0: unknown.
  std::uint64_t rss_bytes = 0;
  std::chrono::milliseconds uptime{0};  // since it became ready; 0 while starting
  // The worker the built-in `affinity` strategy pins the task's key to (rendezvous hashing
  // over the live workers); false for every worker when the task has no key.
  bool key_home = false;

  bool has_room() const { return ready && in_flight < capacity; }
  // in_flight / capacity: 0 idle .. 1 full (1 when capacity is 0).
  double load() const {
    return capacity == 0 ? 1.0 : static_cast<double>(in_flight) / static_cast<double>(capacity);
  }
};

// The task at the head of the queue.
struct TaskView {
  std::uint64_t id = 0;
  std::string_view type;
  std::string_view tenant;  // SubmitOptions::tenant; empty: the default tenant
  std::string_view key;     // SubmitOptions::key; may be empty
  std::size_t payload_bytes = 0;
  std::int32_t priority = 0;  // as submitted (aging may have raised its level since)
  std::uint32_t attempt = 1;  // the attempt this dispatch starts
};

// Returns the index into `workers` of the worker to send the task to (it must be ready and
// have room), or nullopt to leave the task at the head of the queue: nothing more is
// dispatched until the next event (a result, a worker ready, a submit, a tick), when the
// function is asked again. An index that is out of range or names a worker without room,
// and an exception, make the pool's built-in strategy (PoolOptions::dispatch) choose for
// that task instead; each is counted in PoolMetrics and logged (one line per kind per 10 s).
using DispatchFunction = std::function<std::optional<std::size_t>(
    std::span<const WorkerView> workers, const TaskView& task)>;

}  // namespace sandpool
