#include "core/task_queue.hpp"

#include <algorithm>
#include <climits>

namespace sandpool::core {
namespace {

// A weight w serves w tasks while a weight-1 lane serves one: pass advances by scale / w.
constexpr std::uint64_t kStrideScale = 1u << 20;

}  // namespace

void TaskQueue::set_tenants(const TenantPolicy& policy) {
  tenants_ = policy;
  for (auto& [prio, level] : levels_) {
    level.common.stride = stride_of("");
    for (auto& [tenant, lane] : level.named) lane.stride = stride_of(tenant);
  }
}

std::uint64_t TaskQueue::stride_of(const std::string& tenant) const {
  return kStrideScale / std::max<std::uint32_t>(1, tenants_.weight_of(tenant));
}

TaskQueue::Lane& TaskQueue::lane_of(Level& level, const std::string& tenant) {
  if (tenant.empty()) {
    if (level.common.stride == 0) level.common.stride = stride_of(tenant);
    return level.common;
  }
  auto [it, fresh] = level.named.try_emplace(tenant);
  if (fresh) it->second.stride = stride_of(tenant);
  return it->second;
}

namespace {
// The heap's order (a max-heap on "later"): the lowest pass first, then the lane that became
// active first.
template <class L>
bool later(const L* a, const L* b) {
  return a->pass != b->pass ? a->pass > b->pass : a->seq > b->seq;
}
}  // namespace

void TaskQueue::activate(Level& level, Lane& lane) {
  lane.pass = std::max(lane.pass, level.vtime);
  lane.seq = ++seq_;
  level.active.push_back(&lane);
  std::push_heap(level.active.begin(), level.active.end(), later<Lane>);
}

void TaskQueue::deactivate(Level& level, Lane& lane, const std::string& tenant) {
  auto it = std::find(level.active.begin(), level.active.end(), &lane);
  if (it != level.active.end()) {
    level.active.erase(it);
    std::make_heap(level.active.begin(), level.active.end(), later<Lane>);
  }
  if (!tenant.empty()) level.named.erase(tenant);
}

TaskQueue::Level& TaskQueue::level_at(std::int32_t prio) {
  auto it = levels_.find(prio);
  if (it != levels_.end()) return it->second;
  if (spare_.empty()) return levels_[prio];
  spare_.key() = prio;
  Level& l = spare_.mapped();
  l.vtime = 0;
  l.common.pass = 0;
  l.common.stride = 0;  // lane_of() takes the current weight
  return levels_.insert(std::move(spare_)).position->second;
}

TaskQueue::Levels::iterator TaskQueue::drop_level(Levels::iterator it) {
  auto next = std::next(it);
  spare_ = levels_.extract(it);
  return next;
}

void TaskQueue::push(TaskPtr task) {
  Level& level = level_at(task->level);
  Lane& lane = lane_of(level, task->opts.tenant());
  lane.tasks.push_back(std::move(task));
  if (lane.tasks.size() == 1) activate(level, lane);
  ++level.size;
  ++size_;
}

void TaskQueue::push_front(TaskPtr task) {
  Level& level = level_at(task->level);
  Lane& lane = lane_of(level, task->opts.tenant());
  lane.tasks.push_front(std::move(task));
  if (lane.tasks.size() == 1) activate(level, lane);
  ++level.size;
  ++size_;
}

TaskPtr TaskQueue::pop() {
  if (size_ == 0) return nullptr;
  auto it = levels_.begin();
  Level& level = it->second;
  Lane* lane = level.active.front();
  TaskPtr t = std::move(lane->tasks.front());
  lane->tasks.pop_front();
  level.vtime = lane->pass;
  --level.size;
  --size_;
  if (level.active.size() == 1) {
    // Alone in its level: no order to keep (the common case of a pool without tenants).
    lane->pass += lane->stride;
    if (lane->tasks.empty()) {
      level.active.clear();
      if (!t->opts.tenant().empty()) level.named.erase(t->opts.tenant());
    }
  } else {
    std::pop_heap(level.active.begin(), level.active.end(), later<Lane>);
    if (lane->tasks.empty()) {
      level.active.pop_back();
      if (!t->opts.tenant().empty()) level.named.erase(t->opts.tenant());
    } else {
      lane->pass += lane->stride;
      std::push_heap(level.active.begin(), level.active.end(), later<Lane>);
    }
  }
  drop_level_if_empty(it);
  return t;
}

const TaskPtr* TaskQueue::peek() const {
  if (size_ == 0) return nullptr;
  return &levels_.begin()->second.active.front()->tasks.front();
}

void TaskQueue::prefetch_ahead(std::size_t n) const {
  if (size_ <= n) return;
  const Level& level = levels_.begin()->second;
  if (level.active.size() != 1) return;
  const std::deque<TaskPtr>& lane = level.active.front()->tasks;
  if (n < lane.size()) lane[n]->prefetch_record();
}

TaskPtr TaskQueue::remove(std::uint64_t id) {
  for (auto it = levels_.begin(); it != levels_.end(); ++it) {
    Level& level = it->second;
    for (Lane* lane : level.active) {
      auto& dq = lane->tasks;
      for (auto t = dq.begin(); t != dq.end(); ++t) {
        if ((*t)->id != id) continue;
        TaskPtr found = std::move(*t);
        dq.erase(t);
        --level.size;
        --size_;
        if (dq.empty()) deactivate(level, *lane, found->opts.tenant());
        drop_level_if_empty(it);
        return found;
      }
    }
  }
  return nullptr;
}

TaskPtr TaskQueue::find(std::uint64_t id) const {
  for (const auto& [prio, level] : levels_) {
    for (const Lane* lane : level.active) {
      for (const TaskPtr& t : lane->tasks) {
        if (t->id == id) return t;
      }
    }
  }
  return nullptr;
}

void TaskQueue::for_each(const std::function<void(const TaskPtr&)>& fn) const {
  for (const auto& [prio, level] : levels_) {
    for (const Lane* lane : level.active) {
      for (const TaskPtr& t : lane->tasks) fn(t);
    }
  }
}

std::vector<TaskPtr> TaskQueue::remove_if(const std::function<bool(const TaskRecord&)>& pred) {
  std::vector<TaskPtr> out;
  for (auto it = levels_.begin(); it != levels_.end();) {
    Level& level = it->second;
    std::vector<std::pair<Lane*, std::string>> emptied;
    for (Lane* lane : level.active) {
      auto& dq = lane->tasks;
      std::string tenant = dq.front()->opts.tenant();
      for (auto t = dq.begin(); t != dq.end();) {
        if (pred(**t)) {
          out.push_back(std::move(*t));
          t = dq.erase(t);
          --level.size;
          --size_;
        } else {
          ++t;
        }
      }
      if (dq.empty()) emptied.emplace_back(lane, std::move(tenant));
    }
    for (auto& [lane, tenant] : emptied) deactivate(level, *lane, tenant);
    it = level.size == 0 ? drop_level(it) : std::next(it);
  }
  return out;
}

std::deque<TaskPtr> TaskQueue::take_all() {
  std::deque<TaskPtr> out;
  for (auto& [prio, level] : levels_) {
    for (Lane* lane : level.active) {
      for (auto& t : lane->tasks) out.push_back(std::move(t));
    }
  }
  levels_.clear();
  size_ = 0;
  return out;
}

std::int64_t TaskQueue::age(std::int64_t now, std::int64_t interval_ns) {
  if (size_ == 0 || interval_ns <= 0) return INT64_MAX;
  const std::int32_t top = levels_.begin()->first;
  std::int64_t next = INT64_MAX;
  // Below the top level only; a task moved up lands in a level already passed.
  for (auto it = std::next(levels_.begin()); it != levels_.end();) {
    Level& level = it->second;
    const std::int32_t here = it->first;
    std::vector<TaskPtr> moving;
    std::vector<std::pair<Lane*, std::string>> emptied;
    for (Lane* lane : level.active) {
      auto& dq = lane->tasks;
      const std::string tenant = dq.front()->opts.tenant();
      while (!dq.empty() && dq.front()->level_since_ns + interval_ns <= now) {
        TaskPtr t = std::move(dq.front());
        dq.pop_front();
        const std::int64_t steps = (now - t->level_since_ns) / interval_ns;
        const std::int64_t to = std::min<std::int64_t>(top, here + steps);
        t->level_since_ns += (to - here) * interval_ns;
        t->level = static_cast<std::int32_t>(to);
        moving.push_back(std::move(t));
      }
      if (dq.empty()) {
        emptied.emplace_back(lane, tenant);
      } else {
        next = std::min(next, dq.front()->level_since_ns + interval_ns);
      }
    }
    level.size -= moving.size();
    size_ -= moving.size();
    for (auto& [lane, tenant] : emptied) deactivate(level, *lane, tenant);
    it = level.size == 0 ? drop_level(it) : std::next(it);
    for (TaskPtr& t : moving) push(std::move(t));
  }
  return next;
}

std::int64_t TaskQueue::oldest_waiting_since() const {
  std::int64_t since = INT64_MAX;
  for (const auto& [prio, level] : levels_) {
    for (const Lane* lane : level.active) {
      if (!lane->tasks.empty()) since = std::min(since, lane->tasks.front()->waiting_since_ns);
    }
  }
  return since;
}

}  // namespace sandpool::core
