#include "core/flow_gates.hpp"

#include <algorithm>
#include <climits>
#include <cmath>

namespace sandpool::core {

TokenBucket::TokenBucket(const RateLimit& limit, std::int64_t now) {
  if (limit.tasks == 0 || limit.per.count() <= 0) return;
  rate_per_ns_ = static_cast<double>(limit.tasks) / (static_cast<double>(limit.per.count()) * 1e6);
  burst_ = static_cast<double>(limit.burst != 0 ? limit.burst : limit.tasks);
  tokens_ = burst_;
  last_ns_ = now;
}

void TokenBucket::refill(std::int64_t now) {
  if (now <= last_ns_) return;
  tokens_ = std::min(burst_, tokens_ + static_cast<double>(now - last_ns_) * rate_per_ns_);
  last_ns_ = now;
}

bool TokenBucket::ready(std::int64_t now) {
  if (!limited()) return true;
  refill(now);
  return tokens_ >= 1.0;
}

void TokenBucket::take(std::int64_t now) {
  if (!limited()) return;
  refill(now);
  tokens_ -= 1.0;
}

std::uint64_t TokenBucket::whole(std::int64_t now) {
  if (!limited()) return UINT64_MAX;
  refill(now);
  return tokens_ < 1.0 ? 0 : static_cast<std::uint64_t>(tokens_);
}

std::int64_t TokenBucket::ready_at(std::int64_t now) {
  if (!limited()) return now;
  refill(now);
  if (tokens_ >= 1.0) return now;
  return now + static_cast<std::int64_t>(std::ceil((1.0 - tokens_) / rate_per_ns_));
}

std::vector<TaskPtr> FlowGates::configure(const FlowLimits& limits, std::int64_t now,
                                          std::map<std::string, std::uint32_t> running) {
  std::vector<TaskPtr> out = take_all();
  on_ = limits.any();
  pool_ = TokenBucket(limits.pool, now);
  types_.clear();
  tenants_.clear();
  for (const auto& [type, limit] : limits.task_types) types_[type].bucket = TokenBucket(limit, now);
  for (const auto& [type, cap] : limits.type_concurrency) types_[type].cap = cap;
  for (const auto& [tenant, limit] : limits.tenants) {
    tenants_[tenant].bucket = TokenBucket(limit, now);
  }
  running_.clear();
  running_.insert(running.begin(), running.end());
  next_ns_ = INT64_MAX;
  return out;
}

std::uint32_t& FlowGates::running_of(std::string_view type) {
  auto it = running_.find(type);
  if (it == running_.end()) it = running_.emplace(std::string(type), 0).first;
  return it->second;
}

FlowGates::Gate* FlowGates::closed(const TaskRecord& t, std::int64_t now) {
  if (auto it = types_.find(t.type()); it != types_.end()) {
    Gate& g = it->second;
    if (g.cap != 0 && running_of(t.type()) >= g.cap) return &g;
    if (!g.bucket.ready(now)) return &g;
  }
  if (auto it = tenants_.find(t.opts.tenant()); it != tenants_.end()) {
    if (!it->second.bucket.ready(now)) return &it->second;
  }
  return nullptr;
}

void FlowGates::park(Gate& g, TaskPtr t, std::int64_t now) {
  g.parked.push_back(std::move(t));
  ++parked_;
  if (g.bucket.limited()) next_ns_ = std::min(next_ns_, g.bucket.ready_at(now));
}

void FlowGates::dispatched(const TaskRecord& t, std::int64_t now) {
  pool_.take(now);
  if (auto it = types_.find(t.type()); it != types_.end()) it->second.bucket.take(now);
  if (auto it = tenants_.find(t.opts.tenant()); it != tenants_.end()) it->second.bucket.take(now);
  ++running_of(t.type());
}

void FlowGates::left_ring(const TaskRecord& t) {
  auto it = running_.find(t.type());
  if (it != running_.end() && it->second > 0) --it->second;
  auto g = types_.find(t.type());
  if (g != types_.end() && g->second.cap != 0 && !g->second.parked.empty()) {
    next_ns_ = INT64_MIN;  // a slot is free: release() at the next look
  }
}

std::vector<TaskPtr> FlowGates::release(std::int64_t now) {
  std::vector<TaskPtr> out;
  next_ns_ = INT64_MAX;
  auto let_through = [&](Gate& g, std::uint64_t room) {
    while (room > 0 && !g.parked.empty()) {
      out.push_back(std::move(g.parked.front()));
      g.parked.pop_front();
      --parked_;
      --room;
    }
    if (!g.parked.empty() && g.bucket.limited()) {
      next_ns_ = std::min(next_ns_, g.bucket.ready_at(now));
    }
  };
  for (auto& [type, g] : types_) {
    if (g.parked.empty()) continue;
    std::uint64_t room = g.bucket.whole(now);
    if (g.cap != 0) {
      const std::uint32_t busy = running_of(type);
      room = std::min<std::uint64_t>(room, busy >= g.cap ? 0 : g.cap - busy);
    }
    let_through(g, room);
  }
  for (auto& [tenant, g] : tenants_) {
    if (!g.parked.empty()) let_through(g, g.bucket.whole(now));
  }
  return out;
}

bool FlowGates::remove(const TaskPtr& t) {
  for (auto* gates : {&types_, &tenants_}) {
    for (auto& [name, g] : *gates) {
      auto it = std::find(g.parked.begin(), g.parked.end(), t);
      if (it == g.parked.end()) continue;
      g.parked.erase(it);
      --parked_;
      return true;
    }
  }
  return false;
}

std::vector<TaskPtr> FlowGates::remove_if(const std::function<bool(const TaskRecord&)>& pred) {
  std::vector<TaskPtr> out;
  if (parked_ == 0) return out;
  for (auto* gates : {&types_, &tenants_}) {
    for (auto& [name, g] : *gates) {
      for (auto it = g.parked.begin(); it != g.parked.end();) {
        if (!pred(**it)) {
          ++it;
          continue;
        }
        out.push_back(std::move(*it));
        it = g.parked.erase(it);
        --parked_;
      }
    }
  }
  return out;
}

const TaskPtr* FlowGates::find(std::uint64_t id) const {
  for (const auto* gates : {&types_, &tenants_}) {
    for (const auto& [name, g] : *gates) {
      for (const TaskPtr& t : g.parked) {
        if (t->id == id) return &t;
      }
    }
  }
  return nullptr;
}

void FlowGates::for_each(const std::function<void(const TaskPtr&)>& fn) const {
  for (const auto* gates : {&types_, &tenants_}) {
    for (const auto& [name, g] : *gates) {
      for (const TaskPtr& t : g.parked) fn(t);
    }
  }
}

std::vector<TaskPtr> FlowGates::take_all() {
  std::vector<TaskPtr> out;
  for (auto* gates : {&types_, &tenants_}) {
    for (auto& [name, g] : *gates) {
      for (TaskPtr& t : g.parked) out.push_back(std::move(t));
      g.parked.clear();
    }
  }
  parked_ = 0;
  return out;
}

}  // namespace sandpool::core
