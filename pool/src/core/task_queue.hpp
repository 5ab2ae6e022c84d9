// The pool's pending queue: priority levels (higher first); within a level, one FIFO lane
// per tenant (SubmitOptions::tenant), served by weighted fair queueing (stride scheduling:
// each lane's pass advances by 1/weight per task served, the lane with the lowest pass goes
// next), so one tenant's flood does not starve another's trickle. Optional aging lifts a
// task one level per interval waited, never above the highest level holding a task.
// docs/architecture.md, "The scheduler's order of decisions".
//
// Capacity is enforced by the pool at submit time (it counts tasks not yet dispatched);
// the queue itself only orders. A task's level and the time it entered it are its record's
// (TaskRecord::level, level_since_ns), set by the pool before push. Loop-thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <sandpool/pool/pool_options.hpp>

#include "core/task_record.hpp"

namespace sandpool::core {

// One tenant's FIFO in one level, and one priority level; TaskQueue's own.
namespace queue_detail {
struct Lane {
  std::deque<TaskPtr> tasks;
  std::uint64_t pass = 0;    // virtual time of its next service
  std::uint64_t stride = 0;  // pass added per task served: kStrideScale / weight
  std::uint64_t seq = 0;     // when it last became active: breaks ties
};
struct Level {
  Lane common;                                  // the default tenant (""): no lookup
  std::unordered_map<std::string, Lane> named;  // lanes of named tenants holding tasks
  std::vector<Lane*> active;                    // lanes holding tasks: a min-heap on pass
  std::uint64_t vtime = 0;                      // the pass of the task served last
  std::size_t size = 0;
};

}  // namespace queue_detail

class TaskQueue {
 public:
  // The tenants' weights (lanes already waiting take the new ones at once).
  void set_tenants(const TenantPolicy& policy);
  // Adds at the back of its tenant's lane in level task->level.
  void push(TaskPtr task);
  // Puts a task back at the front of its lane (a dispatch that was withdrawn keeps its place).
  void push_front(TaskPtr task);
  // Returns the next task (highest level; within it the fair choice among tenants, FIFO
  // within a tenant), or null when empty.
  TaskPtr pop();
  // The task pop() would return; null when empty.
  const TaskPtr* peek() const;
  // A hint: brings into the cache the record of the task `n` places behind the head of the
  // head's lane, when that lane is its level's only one (no tenants: pop() then takes the
  // lane in order). Queued long ago, records are cold by the time dispatch reads them.
  void prefetch_ahead(std::size_t n) const;
  // Removes the task with this id; returns it, or null when absent. O(n).
  TaskPtr remove(std::uint64_t id);
  // Returns the task with this id, or null. O(n).
  TaskPtr find(std::uint64_t id) const;
  // Calls fn on every queued task, in order.
  void for_each(const std::function<void(const TaskPtr&)>& fn) const;
  // The earliest TaskRecord::waiting_since_ns among the tasks at the front of their lanes
  // (each lane is FIFO, so about the longest wait); INT64_MAX when empty. O(levels x lanes).
  std::int64_t oldest_waiting_since() const;
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Removes and returns, in order, every task for which pred(task) is true. O(n).
  std::vector<TaskPtr> remove_if(const std::function<bool(const TaskRecord&)>& pred);
  // Removes and returns everything, level by level.
  std::deque<TaskPtr> take_all();
  // Aging: each task at the front of its lane that has waited `interval_ns` in its level
  // moves up one level per whole interval waited, up to the highest level holding a task
  // now (tasks there do not age). Returns the earliest time a front task is due to move
  // (INT64_MAX: none). O(levels x lanes + tasks moved).
  std::int64_t age(std::int64_t now, std::int64_t interval_ns);

 private:
  using Lane = queue_detail::Lane;
  using Level = queue_detail::Level;
  using Levels = std::map<std::int32_t, Level, std::greater<>>;

  // The level `prio`, made (from the spare node when there is one) when absent.
  Level& level_at(std::int32_t prio);
  Lane& lane_of(Level& level, const std::string& tenant);
  // Adds a lane that just got its first task to the level's heap.
  void activate(Level& level, Lane& lane);
  // Removes a lane that holds no task from the heap (and a named lane from the level).
  void deactivate(Level& level, Lane& lane, const std::string& tenant);
  std::uint64_t stride_of(const std::string& tenant) const;
  // Removes an empty level, keeping its node as the spare; returns the next level.
  Levels::iterator drop_level(Levels::iterator it);
  void drop_level_if_empty(Levels::iterator it) {
    if (it->second.size == 0) drop_level(it);
  }

  Levels levels_;
  // The node of the last level emptied, kept with its buffers: a pool whose queue empties and
  // fills again (the common case) makes its level without allocating.
  Levels::node_type spare_;
  std::size_t size_ = 0;
  std::uint64_t seq_ = 0;
  TenantPolicy tenants_;
};

}  // namespace sandpool::core
