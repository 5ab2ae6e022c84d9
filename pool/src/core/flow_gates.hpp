// Flow control at dispatch (FlowLimits): token buckets per pool, task type and tenant, and a
// cap per task type on its attempts in the workers' rings. The core asks closed() of the
// queue's head before dispatching it; a task held back by a type or tenant gate waits in that
// gate (parked, still counted as queued) until the gate can let it through, then returns to
// the front of its lane; a closed pool bucket stops dispatch until it refills. Pure logic
// on the monotonic clock; loop-thread only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/pool/pool_options.hpp>

#include "core/task_record.hpp"

namespace sandpool::core {

class TokenBucket {
 public:
  TokenBucket() = default;
  TokenBucket(const RateLimit& limit, std::int64_t now);
  bool limited() const { return rate_per_ns_ > 0; }
  // Returns true iff a whole token is there at `now` (always, when unlimited).
  bool ready(std::int64_t now);
  // Spends one token (the balance may go below zero: a backlog task dispatched anyway).
  void take(std::int64_t now);
  // Whole tokens at `now` (at least 0).
  std::uint64_t whole(std::int64_t now);
  // When the next whole token is there.
  std::int64_t ready_at(std::int64_t now);

 private:
  void refill(std::int64_t now);
  double rate_per_ns_ = 0;
  double burst_ = 0;
  double tokens_ = 0;
  std::int64_t last_ns_ = 0;
};

class FlowGates {
 public:
  struct Gate {
    TokenBucket bucket;
    std::uint32_t cap = 0;  // 0: none
    std::deque<TaskPtr> parked;
  };

  // Takes `limits`, with `running` the ring entries by type now; returns the tasks the old
  // gates held (the caller queues them again).
  std::vector<TaskPtr> configure(const FlowLimits& limits, std::int64_t now,
                                 std::map<std::string, std::uint32_t> running);
  bool on() const { return on_; }
  // The pool's own bucket is empty: nothing is dispatched before pool_ready_at().
  bool pool_closed(std::int64_t now) { return !pool_.ready(now); }
  std::int64_t pool_ready_at(std::int64_t now) { return pool_.ready_at(now); }
  // The gate that holds `t` back now, or null.
  Gate* closed(const TaskRecord& t, std::int64_t now);
  void park(Gate& g, TaskPtr t, std::int64_t now);
  // A task of `t`'s type and tenant was dispatched / its ring entry went away.
  void dispatched(const TaskRecord& t, std::int64_t now);
  void left_ring(const TaskRecord& t);
  // Parked tasks whose gates let them through at `now`, in their order.
  std::vector<TaskPtr> release(std::int64_t now);
  // When release() next has something to do (INT64_MAX: nothing time-bound).
  std::int64_t next_ns() const { return next_ns_; }
  // release() is to look again no later than `at`.
  void look_again(std::int64_t at) { next_ns_ = std::min(next_ns_, at); }
  std::size_t parked() const { return parked_; }
  // Removes `t` from the gate holding it; false iff none does.
  bool remove(const TaskPtr& t);
  // Removes and returns the parked tasks for which `pred` is true (expired ones).
  std::vector<TaskPtr> remove_if(const std::function<bool(const TaskRecord&)>& pred);
  const TaskPtr* find(std::uint64_t id) const;
  // Calls fn on every parked task.
  void for_each(const std::function<void(const TaskPtr&)>& fn) const;
  std::vector<TaskPtr> take_all();

 private:
  bool on_ = false;
  TokenBucket pool_;
  // The dispatched ring entries of a type, 0 when new.
  std::uint32_t& running_of(std::string_view type);

  std::map<std::string, Gate, std::less<>> types_;
  std::map<std::string, Gate, std::less<>> tenants_;
  std::map<std::string, std::uint32_t, std::less<>> running_;  // dispatched ring entries by type
  std::size_t parked_ = 0;
  std::int64_t next_ns_ = INT64_MAX;
};

}  // namespace sandpool::core
