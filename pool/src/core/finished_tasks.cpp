#include "core/finished_tasks.hpp"

namespace sandpool::core {

void FinishedTasks::add(TaskPtr task, std::int64_t now) {
  if (bounds_.max_count == 0) return;
  // The account is final (done is set), so its result is read without the lock.
  const std::size_t bytes = task->payload().size() + task->account().result.size();
  entries_.push_back({now, bytes, std::move(task)});
  bytes_ += bytes;
  evict_over_bounds();
  expire(now);
}

void FinishedTasks::set_bounds(FinishedTaskBounds bounds) {
  bounds_ = bounds;
  evict_over_bounds();
}

void FinishedTasks::evict_over_bounds() {
  while (!entries_.empty() && (entries_.size() > bounds_.max_count ||
                               (bounds_.max_bytes != 0 && bytes_ > bounds_.max_bytes))) {
    pop_oldest();
  }
}

void FinishedTasks::expire(std::int64_t now) {
  if (bounds_.max_age_ns == 0) return;
  while (!entries_.empty() && now - entries_.front().finished_ns > bounds_.max_age_ns) {
    pop_oldest();
  }
}

TaskPtr FinishedTasks::find(std::uint64_t id) const {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->task->id == id) return it->task;
  }
  return nullptr;
}

void FinishedTasks::for_each_newest(const std::function<bool(const TaskPtr&)>& fn) const {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (!fn(it->task)) return;
  }
}

void FinishedTasks::pop_oldest() {
  bytes_ -= entries_.front().bytes;
  entries_.pop_front();
}

}  // namespace sandpool::core
