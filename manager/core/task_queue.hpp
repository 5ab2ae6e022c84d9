// The pool's pending queue: priority levels (higher first), FIFO within a level.
// Capacity is enforced by the pool at submit time (it counts tasks not yet dispatched);
// the queue itself only orders. Loop-thread only.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <vector>

#include "core/task_record.hpp"

namespace sandpool::core {

class TaskQueue {
 public:
  // Adds at the back of its priority level.
  void push(TaskPtr task);
  // Puts a task back at the front of its level (a dispatch that was withdrawn keeps its place).
  void push_front(TaskPtr task);
  // Returns the first task (highest priority, oldest), or null when empty.
  TaskPtr pop();
  const TaskPtr* peek() const;
  // Removes the task with this id; returns it, or null when absent. O(n).
  TaskPtr remove(std::uint64_t id);
  // Returns the task with this id, or null. O(n).
  TaskPtr find(std::uint64_t id) const;
  // Calls fn on every queued task, in order.
  void for_each(const std::function<void(const TaskPtr&)>& fn) const;
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Removes and returns, in order, every task for which pred(task) is true. O(n).
  std::vector<TaskPtr> remove_if(const std::function<bool(const TaskRecord&)>& pred);
  // Removes and returns everything, in order.
  std::deque<TaskPtr> take_all();

 private:
  std::map<std::int32_t, std::deque<TaskPtr>, std::greater<>> levels_;
  std::size_t size_ = 0;
};

}  // namespace sandpool::core
