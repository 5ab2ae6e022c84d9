// The records of tasks that have ended, kept so that an operator can still look a task up
// by id (`poolctl task ID`) after its submitter has gone. Bounded three ways, so memory
// stays flat under an endless stream of tasks: by count, by age and by the bytes of
// payload and result they hold; the oldest go first. Loop-thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "core/task_record.hpp"

namespace sandpool::core {

struct FinishedTaskBounds {
  std::size_t max_count = 10000;  // 0: keep none
  std::int64_t max_age_ns = 0;    // 0: no age bound
  std::size_t max_bytes = 0;      // payload + result bytes held; 0: no byte bound
};

class FinishedTasks {
 public:
  explicit FinishedTasks(FinishedTaskBounds bounds) : bounds_(bounds) {}

  // Keeps a terminal task's record (finished at `now`), then evicts what is over a bound.
  void add(TaskPtr task, std::int64_t now);
  // New bounds (a reconfigured pool); evicts what is over the count and byte bounds now.
  void set_bounds(FinishedTaskBounds bounds);
  // Evicts records older than max_age at `now`.
  void expire(std::int64_t now);
  // Returns the newest record with this id, or null. O(n): for operators, not hot paths.
  TaskPtr find(std::uint64_t id) const;
  // Calls fn on every record, newest first, until it returns false.
  void for_each_newest(const std::function<bool(const TaskPtr&)>& fn) const;
  std::size_t size() const { return entries_.size(); }
  std::size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    std::int64_t finished_ns;
    std::size_t bytes;
    TaskPtr task;
  };
  void pop_oldest();
  void evict_over_bounds();
  // Brings the next records to be evicted into the cache ahead of their release (a record
  // kept max_count tasks ago is cold): see TaskRecord::prefetch_record.
  void prefetch_evictions() const;

  FinishedTaskBounds bounds_;
  std::deque<Entry> entries_;  // oldest first
  std::size_t bytes_ = 0;
};

}  // namespace sandpool::core
