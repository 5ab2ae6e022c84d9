// PendingEnds: the tasks a PoolCore ended completed or cancelled whose journaled end is being
// written (TaskLedger's, docs/journal.md "Reported means written").
//
// The journal commits a loop's ends in the order the loop queued them and answers them in that
// order, so the answer is nearly always for the oldest: a FIFO whose front is checked first
// costs no allocation and no lookup per task, where a std::map paid a node and a tree walk
// each (a tenth of the loop's time under a journaled batch). An answer out of order (a write
// retried alone after a failed round) is found by a scan and leaves a hole, dropped once it
// reaches the front. Lookups by id (find, for `poolctl task`) scan: they are rare.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "core/task_record.hpp"

namespace sandpool::core {

class PendingEnds {
 public:
  void push(TaskPtr task) {
    tasks_.push_back(std::move(task));
    ++size_;
  }
  // Takes back the task push() added last (its end was written at once).
  void pop_last() {
    tasks_.pop_back();
    --size_;
  }
  // Removes and returns the task `id`, or null when it is not here.
  TaskPtr take(std::uint64_t id) {
    TaskPtr out;
    if (!tasks_.empty() && tasks_.front() && tasks_.front()->id == id) {
      out = std::move(tasks_.front());
      tasks_.pop_front();
    } else {
      for (TaskPtr& t : tasks_) {
        if (t && t->id == id) {
          out = std::move(t);  // a hole, dropped once it is the front
          break;
        }
      }
      if (!out) return out;
    }
    --size_;
    while (!tasks_.empty() && !tasks_.front()) tasks_.pop_front();
    return out;
  }
  TaskPtr find(std::uint64_t id) const {
    for (const TaskPtr& t : tasks_) {
      if (t && t->id == id) return t;
    }
    return nullptr;
  }
  template <typename F>
  void for_each(F&& f) const {
    for (const TaskPtr& t : tasks_) {
      if (t) f(t);
    }
  }
  std::size_t size() const { return size_; }

 private:
  std::deque<TaskPtr> tasks_;  // in the order pushed; null: taken out of order
  std::size_t size_ = 0;       // non-null entries
};

}  // namespace sandpool::core
