// RedisPools (redis_pools.hpp): the waits on cluster tasks' ends. One thread (sp-redis-waits)
// registers each awaited task's wait in its hash (await_end.lua: the script that writes the
// end, on whichever node, pushes its state to the task's end list P:end:ID) and blocks in one
// BLPOP on every awaited task's end list and this process's wake list (a thread of its own,
// sp-redis-wake, pushes there when wait() takes a new wait while it blocks: the request
// thread never waits for Redis), so a waited task is answered when its end is written, not at
// the next poll. Each round is one pipelined round trip; with one task awaited, its account
// is read behind the BLPOP, in the same round trip, rather than once its end is popped.
#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <sandpool/service/redis_pools.hpp>
#include <sandpool/task/enum_names.hpp>

namespace sandpool::poold {

void RedisPools::wait(std::uint64_t id, std::optional<Clock::time_point> deadline,
                      std::function<void(const Result<TaskResult>&)> done) {
  Status refused = Status::ok();
  {
    MutexLock lk(wait_mu_);
    if (stopping_) {
      refused = Status::error(Code::kClosed, "poold is shutting down");
    } else if (waiters_.size() >= kMaxWaits) {
      refused = Status::error(Code::kQueueFull, "this node holds " + std::to_string(kMaxWaits) +
                                                    " waits on redis tasks already");
    } else {
      waiters_.push_back({id, deadline, std::move(done)});
      if (blocked_) {  // its BLPOP ends by the wake thread's push, not on this thread
        wake_asked_ = true;
        wake_cv_.notify_one();
      }
      blocked_ = false;  // one wake per BLPOP is enough
      wait_cv_.notify_all();
    }
  }
  if (!refused) return done(refused);
}

void RedisPools::wake_loop() {
  MutexLock lk(wait_mu_);
  while (!stopping_) {
    if (!wake_asked_) {
      (void)wake_cv_.wait_until(wait_mu_, Clock::now() + kWaitBlock);
      continue;
    }
    wake_asked_ = false;
    lk.unlock();
    wake_waits();
    lk.lock();
  }
}

void RedisPools::wake_waits() {
  // The list lives a minute at most: a push the thread never pops (it stopped) does not stay.
  (void)wakes_.with([&](redis::Connection& c) -> Result<redis::Reply> {
    SP_RETURN_IF_ERROR(c.append({"RPUSH", wake_key_, "1"}));
    SP_RETURN_IF_ERROR(c.append({"PEXPIRE", wake_key_, "60000"}));
    auto pushed = c.read();
    auto expiring = c.read();  // read whatever the first said: the pipeline stays in step
    if (!pushed) return pushed;
    return expiring;
  });
}

RedisPools::WaitRound RedisPools::next_round(Clock::time_point until) {
  WaitRound r;
  std::set<std::uint64_t> fresh, awaited;
  for (const Waiter& w : waiters_) {
    awaited.insert(w.id);
    if (!w.registered) fresh.insert(w.id);
    if (w.deadline) until = std::min(until, *w.deadline);
  }
  r.fresh.assign(fresh.begin(), fresh.end());
  r.awaited.assign(awaited.begin(), awaited.end());
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
  r.block = std::clamp(left, std::chrono::milliseconds(1), kWaitBlock);
  return r;
}

std::vector<RedisPools::Waiter> RedisPools::settle(
    const WaitRound& round, const Result<redis::TaskProducer::AwaitRound>& got) {
  std::set<std::uint64_t> fresh(round.fresh.begin(), round.fresh.end());
  std::set<std::uint64_t> unknown;
  if (got) unknown.insert(got->unknown.begin(), got->unknown.end());
  const auto now = Clock::now();
  std::vector<Waiter> ready;
  std::erase_if(waiters_, [&](Waiter& w) {
    if (!got) {
      w.registered = false;  // Redis may have restarted without it: again next round
    } else if (fresh.count(w.id) != 0) {
      w.registered = true;
    }
    // An unknown task answers kNotFound when its account is read.
    w.told = got && (got->ended == w.id || unknown.count(w.id) != 0);
    if (!w.told && !(w.deadline && now >= *w.deadline)) return false;
    ready.push_back(std::move(w));
    return true;
  });
  return ready;
}

void RedisPools::answer(std::vector<Waiter> ready, std::optional<redis::StoredTask> read) {
  std::map<std::uint64_t, Result<TaskResult>> accounts;         // one read per task
  if (read) accounts.emplace(read->id, to_task_result(*read));  // read with its end (await_any)
  for (const Waiter& w : ready) {
    if (accounts.count(w.id) != 0) continue;
    auto t = waits_.with([&](redis::Connection& c) { return any_.task(c, w.id); });
    accounts.emplace(w.id, t ? Result<TaskResult>(to_task_result(*t))
                             : Result<TaskResult>(unavailable("", t.status())));
  }
  std::vector<Waiter> again;
  for (Waiter& w : ready) {
    const Result<TaskResult>& t = accounts.at(w.id);
    const bool deadline_passed = w.deadline && Clock::now() >= *w.deadline;
    if (t && w.told && !is_terminal(t->state) && !deadline_passed) {
      // A stale push (an end of an earlier run of a replayed task): wait on.
      w.registered = w.told = false;
      again.push_back(std::move(w));
      continue;
    }
    w.done(t);
  }
  if (again.empty()) return;
  MutexLock lk(wait_mu_);
  for (Waiter& w : again) waiters_.push_back(std::move(w));
}

void RedisPools::wait_loop() {
  MutexLock lk(wait_mu_);
  auto next_summary = Clock::now();
  auto next_renewal = Clock::now() + kWaitRenew;
  while (!stopping_) {
    if (Clock::now() >= next_summary) {
      lk.unlock();
      refresh_summaries();
      lk.lock();
      next_summary = Clock::now() + kSummaryEvery;
      continue;
    }
    if (waiters_.empty()) {
      while (!stopping_ && waiters_.empty() &&
             wait_cv_.wait_until(wait_mu_, next_summary) != std::cv_status::timeout) {
      }
      continue;
    }
    if (Clock::now() >= next_renewal) {
      for (Waiter& w : waiters_) w.registered = false;
      next_renewal = Clock::now() + kWaitRenew;
    }
    const WaitRound round = next_round(std::min(next_summary, next_renewal));
    blocked_ = true;
    lk.unlock();
    auto got = waits_.with([&](redis::Connection& c) {
      return any_.await_any(c, round.fresh, round.awaited, wake_key_, round.block);
    });
    lk.lock();
    blocked_ = false;
    std::vector<Waiter> ready = settle(round, got);
    lk.unlock();
    answer(std::move(ready), got ? std::move(got->account) : std::nullopt);
    lk.lock();
    if (got) continue;
    // Redis unreachable: the lane opens its connection again after kReconnectGap at most.
    const auto retry_at = Clock::now() + kReconnectGap;
    while (!stopping_ && wait_cv_.wait_until(wait_mu_, retry_at) != std::cv_status::timeout) {
    }
  }
}

}  // namespace sandpool::poold
