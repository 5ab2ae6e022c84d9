// Service: `wait` (reads thread): the account of a task once it ends, or as it is when the
// wait's own timeout passes first (docs/protocol.md, "Operations").
#include <utility>

#include <sandpool/service/service.hpp>

namespace sandpool::poold {

void Service::serve(const Request& req, const ops::WaitArgs& a, const OpResponder<ops::Wait>& res) {
  const bool with_result = req.rights >= Rights::kAdmin;
  if (redis_ && RedisPools::is_cluster_id(a.id)) {
    return wait_redis(a.id, a.timeout, with_result, res.responder());
  }
  auto t = find_task(a.id);
  if (!t) {
    // Not in a pool: ended in an earlier run of poold (the journal), or unknown.
    auto r = journaled_task(a.id);
    if (!r)
      return (void)res.error(Status::error(Code::kNotFound, "no task " + std::to_string(a.id)));
    return answer_with_account(res.responder(), *r, with_result);
  }
  const bool may_wait = !a.timeout || a.timeout->count() > 0;
  std::uint64_t token = 0;
  if (may_wait && !t->done()) {
    MutexLock lock(mu_);
    // Under mu_, so the task cannot end between the check and the emplace unanswered: its
    // state is terminal before its on_done takes mu_ in reply_when_done.
    if (!t->done()) {
      token = a.timeout ? ++wait_tokens_ : 0;
      waiters_.emplace(a.id, Waiter{res.responder(), token, with_result});
      if (!a.timeout) return;
    }
  }
  if (token == 0) return answer_with_account(res.responder(), t->snapshot(), with_result);
  // Added once mu_ is released (its lock is a leaf): a task that ends first leaves no
  // waiter with this token, and the deadline then finds none.
  deadlines_.add(WaitDeadlines::Clock::now() + *a.timeout, a.id, token);
}

void Service::wait_expired(std::uint64_t task_id, std::uint64_t token) {
  std::optional<Waiter> waiter;
  {
    MutexLock lock(mu_);
    auto [b, e] = waiters_.equal_range(task_id);
    for (auto it = b; it != e; ++it) {
      if (it->second.token != token) continue;
      waiter = std::move(it->second);
      waiters_.erase(it);
      break;
    }
  }
  if (!waiter) return;  // the task ended first and answered it
  // Not under mu_: Pool::find() waits for the pool's loop thread (the lock rule).
  auto t = find_task(task_id);
  std::optional<TaskResult> r =
      t ? std::optional<TaskResult>(t->snapshot()) : journaled_task(task_id);
  if (!r) {
    return (void)waiter->res.error(
        Status::error(Code::kNotFound, "no task " + std::to_string(task_id)));
  }
  answer_with_account(waiter->res, *r, waiter->with_result);
}

}  // namespace sandpool::poold
