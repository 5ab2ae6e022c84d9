// TaskLedger (task_ledger.hpp): the books on a pool's tasks, open to terminal.
#include "core/task_ledger.hpp"

#include <mutex>

namespace sandpool::core {

TaskLedger::TaskLedger(FinishedTaskBounds finished, std::size_t dead_letter_capacity)
    : finished_(finished), dead_letter_capacity_(dead_letter_capacity) {}

void TaskLedger::set_bounds(FinishedTaskBounds finished, std::size_t dead_letter_capacity,
                            std::int64_t now) {
  finished_.set_bounds(finished);
  finished_.expire(now);
  dead_letter_capacity_ = dead_letter_capacity;
  while (dead_letters_.size() > dead_letter_capacity_) dead_letters_.pop_front();
}

void TaskLedger::open(const TaskRecord& t) {
  ++open_;
  if (t.expires_ns() != 0) ++ttl_;
}

void TaskLedger::await_letter(const TaskPtr& task, DeadReason reason) {
  letters_.emplace(task->id, std::make_pair(task, reason));
}

std::optional<std::pair<TaskPtr, DeadReason>> TaskLedger::take_letter(std::uint64_t id) {
  auto it = letters_.find(id);
  if (it == letters_.end()) return std::nullopt;
  std::pair<TaskPtr, DeadReason> out = std::move(it->second);
  letters_.erase(it);
  return out;
}

void TaskLedger::record_terminal(const TaskPtr& task, TaskState state, std::int64_t now) {
  if (state == TaskState::kDeadLettered) {
    MutexLock lock(task->mu());
    dead_letters_.push_back(task->account());
    if (dead_letters_.size() > dead_letter_capacity_) dead_letters_.pop_front();
  }
  if (task->expires_ns() != 0) --ttl_;
  --open_;
  finished_.add(task, now);
}

TaskPtr TaskLedger::find(std::uint64_t id) const {
  if (auto it = letters_.find(id); it != letters_.end()) return it->second.first;
  if (TaskPtr t = ends_.find(id)) return t;
  return finished_.find(id);
}

void TaskLedger::for_each(const std::function<void(const TaskPtr&)>& take,
                          const std::function<bool()>& more) const {
  for (const auto& [id, p] : letters_) take(p.first);
  ends_.for_each(take);
  finished_.for_each_newest([&](const TaskPtr& t) {
    take(t);
    return more();
  });
}

}  // namespace sandpool::core
