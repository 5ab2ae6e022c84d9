#include "core/task_queue.hpp"

namespace sandpool::core {

void TaskQueue::push(TaskPtr task) {
  const std::int32_t prio = task->opts.priority;
  levels_[prio].push_back(std::move(task));
  ++size_;
}

void TaskQueue::push_front(TaskPtr task) {
  const std::int32_t prio = task->opts.priority;
  levels_[prio].push_front(std::move(task));
  ++size_;
}

TaskPtr TaskQueue::pop() {
  if (size_ == 0) return nullptr;
  auto it = levels_.begin();
  TaskPtr t = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) levels_.erase(it);
  --size_;
  return t;
}

const TaskPtr* TaskQueue::peek() const {
  if (size_ == 0) return nullptr;
  return &levels_.begin()->second.front();
}

TaskPtr TaskQueue::remove(std::uint64_t id) {
  for (auto it = levels_.begin(); it != levels_.end(); ++it) {
    auto& dq = it->second;
    for (auto t = dq.begin(); t != dq.end(); ++t) {
      if ((*t)->id != id) continue;
      TaskPtr found = std::move(*t);
      dq.erase(t);
      if (dq.empty()) levels_.erase(it);
      --size_;
      return found;
    }
  }
  return nullptr;
}

TaskPtr TaskQueue::find(std::uint64_t id) const {
  for (const auto& [prio, dq] : levels_) {
    for (const TaskPtr& t : dq) {
      if (t->id == id) return t;
    }
  }
  return nullptr;
}

void TaskQueue::for_each(const std::function<void(const TaskPtr&)>& fn) const {
  for (const auto& [prio, dq] : levels_) {
    for (const TaskPtr& t : dq) fn(t);
  }
}

std::vector<TaskPtr> TaskQueue::remove_if(const std::function<bool(const TaskRecord&)>& pred) {
  std::vector<TaskPtr> out;
  for (auto it = levels_.begin(); it != levels_.end();) {
    auto& dq = it->second;
    for (auto t = dq.begin(); t != dq.end();) {
      if (pred(**t)) {
        out.push_back(std::move(*t));
        t = dq.erase(t);
        --size_;
      } else {
        ++t;
      }
    }
    it = dq.empty() ? levels_.erase(it) : std::next(it);
  }
  return out;
}

std::deque<TaskPtr> TaskQueue::take_all() {
  std::deque<TaskPtr> out;
  for (auto& [prio, dq] : levels_) {
    for (auto& t : dq) out.push_back(std::move(t));
  }
  levels_.clear();
  size_ = 0;
  return out;
}

}  // namespace sandpool::core
