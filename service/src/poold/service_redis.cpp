// Service: the operations on the Redis pools' tasks (docs/redis-pools.md): submit and batch
// into a pool's stream, task and wait by a cluster id, answered from Redis on any node.
#include <spdlog/logger.h>

#include <map>
#include <utility>

#include <sandpool/control/wire_errors.hpp>
#include <sandpool/service/service.hpp>

namespace sandpool::poold {
namespace {

// The stream entry of a submit: its type, payload and the options it sets.
redis::StreamTask stream_task(const ops::SubmitArgs& a, const SubmitOptions& o,
                              std::string payload) {
  redis::StreamTask t;
  t.type = a.type;
  t.payload = std::move(payload);
  t.options = o.kept();  // the idempotency key too: submit_options() took it from `a`
  // Scheduled: the due time as wall-clock ms (every node's clock moves it to the stream, so
  // the nodes' clocks must agree, as NTP keeps them: docs/redis-pools.md).
  if (o.delay) t.options.not_before = std::chrono::system_clock::now() + *o.delay;
  return t;
}

}  // namespace

std::optional<std::string> Service::redis_route(const std::string& pool,
                                                const std::string& type) const {
  if (!redis_) return std::nullopt;
  if (!pool.empty()) return redis_->serves(pool) ? std::optional(pool) : std::nullopt;
  for (const auto& [name, p] : pools()) {
    const auto& types = p->task_types();
    if (std::find(types.begin(), types.end(), type) != types.end()) {
      return redis_->serves(name) ? std::optional(name) : std::nullopt;
    }
  }
  return std::nullopt;
}

namespace {

// The checked stream entry of one task of a Redis pool, or why it is refused: checked as
// the node's local pool checks a local submit (its type, timeout, schedule, tenant and
// max_payload), so that no node refuses what this one accepted unless its config differs.
Result<redis::StreamTask> checked_task(const ops::SubmitArgs& a, std::string payload,
                                       const Pool& local) {
  if (a.type.empty()) return Status::invalid("type: required, a non-empty string");
  SubmitOptions o;
  if (Status s = submit_options(a, local.max_timeout(), &o); !s) return s;
  if (Status s = local.check_task(a.type, payload.size(), o); !s) return s;
  return stream_task(a, o, std::move(payload));
}

}  // namespace

Result<SlotAnswer> Service::submit_slot_redis(const std::string& pool, const ScheduleSpec& spec,
                                              const ops::SubmitArgs& a,
                                              std::optional<std::int64_t> slot_s) {
  if (stopping_.load()) return Status::error(Code::kClosed, "poold is shutting down");
  auto local = pool_named(pool);
  if (!local) return local.status();
  auto task = checked_task(a, spec.payload, **local);
  if (!task) return task.status();
  if (!slot_s) {
    auto made = redis_->submit(pool, *task);
    if (!made) return made.status();
    log_->info("schedule run schedule={} key={} task={}", spec.name, a.options.idempotency_key,
               made->id);
    return SlotAnswer{made->id, ""};
  }
  auto claim = redis_->claim_slot(pool, *task, spec.name, *slot_s);
  if (!claim) return claim.status();
  if (claim->paused) {
    const std::string by = claim->node.empty() ? "(unnamed)" : claim->node;
    log_->debug("schedule slot schedule={} key={} paused_by={}", spec.name,
                a.options.idempotency_key, by);
    return SlotAnswer{claim->task_id, by, true};
  }
  if (claim->won) {
    log_->info("schedule slot schedule={} key={} task={} claimed=won", spec.name,
               a.options.idempotency_key, claim->task_id);
    return SlotAnswer{claim->task_id, ""};
  }
  // Lost: that slot, or a later one, is another claim's (another node's, or this node's
  // before a restart).
  const std::string winner = claim->node.empty() ? "(unnamed)" : claim->node;
  log_->info("schedule slot schedule={} key={} task={} claimed=lost winner={}", spec.name,
             a.options.idempotency_key, claim->task_id, winner);
  return SlotAnswer{claim->task_id, winner};
}

void Service::submit_redis(const std::string& pool, const Request& req, const ops::SubmitArgs& a,
                           const OpResponder<ops::Submit>& res) {
  if (stopping_.load()) {
    return (void)res.error(Status::error(Code::kClosed, "poold is shutting down"));
  }
  auto local = pool_named(pool);
  if (!local) return (void)res.error(local.status());
  auto task = checked_task(a, req.blob, **local);
  if (!task) return (void)res.error(task.status());
  // Acknowledged once the script ran: the task is in Redis (on disk with appendfsync always).
  auto made = redis_->submit(pool, *task);
  if (!made) return (void)res.error(made.status());
  if (!a.wait) return (void)res.ok(ops::SubmitReply{made->id, made->existing, std::nullopt});
  res.event(ops::SubmitEvent{"accepted", made->id, made->existing});
  redis_->wait(made->id, std::nullopt, [r = res.responder()](const Result<TaskResult>& t) {
    if (!t) return (void)r.error(t.status());
    r.ok(task_json(*t), t->result);
  });
}

bool Service::submit_batch_redis(const Request& req, const ops::SubmitBatchArgs& a,
                                 const OpResponder<ops::SubmitBatch>& res) {
  if (!redis_) return false;
  const ops::SubmitArgs defaults = a.defaults.value_or(ops::SubmitArgs{});
  const std::size_t n = a.payload_lens.size();
  // Where each task goes: a Redis pool, or "" (a local pool: the batch is not ours).
  std::vector<std::string> targets(n);
  for (std::size_t i = 0; i < n; ++i) {
    const ops::SubmitArgs& args = a.tasks ? (*a.tasks)[i] : defaults;
    if (i > 0 && !a.tasks) {
      targets[i] = targets[0];
      continue;
    }
    targets[i] = redis_route(args.pool, args.type).value_or("");
  }
  const std::size_t to_redis =
      std::count_if(targets.begin(), targets.end(), [](const auto& t) { return !t.empty(); });
  if (to_redis == 0) return false;
  if (to_redis != n) {
    res.error(Status::invalid(
        "a batch goes to redis pools or to local pools, not to both: submit them apart"));
    return true;
  }
  if (stopping_.load()) {
    res.error(Status::error(Code::kClosed, "poold is shutting down"));
    return true;
  }
  ops::SubmitBatchReply out;
  out.ids.assign(n, 0);
  // Checked per task; then one pipelined round trip per pool.
  std::map<std::string, std::pair<std::vector<std::size_t>, std::vector<redis::StreamTask>>>
      by_pool;
  std::size_t at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const ops::SubmitArgs& args = a.tasks ? (*a.tasks)[i] : defaults;
    std::string payload = req.blob.substr(at, a.payload_lens[i]);
    at += a.payload_lens[i];
    auto local = pool_named(targets[i]);
    Result<redis::StreamTask> t = local ? checked_task(args, std::move(payload), **local)
                                        : Result<redis::StreamTask>(local.status());
    if (!t) {
      out.errors.push_back(
          {i, std::string(control::wire_code(t.status().code())), t.status().message()});
      continue;
    }
    auto& [indexes, tasks] = by_pool[targets[i]];
    indexes.push_back(i);
    tasks.push_back(std::move(t).value());
  }
  for (auto& [pool, batch] : by_pool) {
    const auto& [indexes, tasks] = batch;
    auto made = redis_->submit_many(pool, tasks);
    for (std::size_t k = 0; k < indexes.size(); ++k) {
      const Status why = !made ? made.status() : (*made)[k].status();
      if (why) {
        out.ids[indexes[k]] = (*made)[k]->id;
        if ((*made)[k]->existing) out.existing.push_back(indexes[k]);
      } else {
        out.errors.push_back(
            {indexes[k], std::string(control::wire_code(why.code())), why.message()});
      }
    }
  }
  std::sort(out.errors.begin(), out.errors.end(),
            [](const auto& x, const auto& y) { return x.index < y.index; });
  std::sort(out.existing.begin(), out.existing.end());  // pool by pool: in index order
  res.ok(out);
  return true;
}

void Service::serve_redis_task(std::uint64_t id, bool with_result, const Responder& res) {
  auto t = redis_->task(id);
  if (!t) return (void)res.error(t.status());
  answer_with_account(res, *t, with_result);
}

void Service::wait_redis(std::uint64_t id, std::optional<std::chrono::milliseconds> timeout,
                         bool with_result, const Responder& res) {
  if (timeout && timeout->count() <= 0) return serve_redis_task(id, with_result, res);
  std::optional<RedisPools::Clock::time_point> deadline;
  if (timeout) deadline = RedisPools::Clock::now() + *timeout;
  redis_->wait(id, deadline, [res, with_result](const Result<TaskResult>& t) {
    if (!t) return (void)res.error(t.status());
    answer_with_account(res, *t, with_result);
  });
}

}  // namespace sandpool::poold
