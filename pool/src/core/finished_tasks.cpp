#include "core/finished_tasks.hpp"

namespace sandpool::core {
namespace {

// Evictions between two prefetch stages of one record: enough that a stage's lines arrive
// before the next stage (or the release) reads them.
constexpr std::size_t kEvictAhead = 8;

}  // namespace

void FinishedTasks::add(TaskPtr task, std::int64_t now) {
  if (bounds_.max_count == 0) return;
  // The account is final (done is set), so its result is read without the lock.
  const std::size_t bytes = task->payload().size() + task->account().result.size();
  entries_.push_back({now, bytes, std::move(task)});
  bytes_ += bytes;
  const std::size_t before = entries_.size();
  evict_over_bounds();
  expire(now);
  // At the count bound, each task kept evicts one: prefetch for the evictions to come.
  if (entries_.size() < before) prefetch_evictions();
}

void FinishedTasks::prefetch_evictions() const {
  if (entries_.size() <= 2 * kEvictAhead) return;
  entries_[2 * kEvictAhead].task->prefetch_record();
  entries_[kEvictAhead].task->prefetch_owned();
  entries_.front().task->prefetch_account_buffers();
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
