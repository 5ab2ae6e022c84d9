// TaskProducer (task_producer.hpp): a task's submit, a schedule's slot, a cancel.
#include <sandpool/redis/task_producer.hpp>

#include "redis/reply_checks.hpp"
#include "redis/task_stream_scripts.hpp"

#include <utility>

namespace sandpool::redis {

static_assert(PoolKeys::kFirstId - 1 == 4503599627370495ULL, "the submit script's id base");

Connection::Call TaskProducer::submit_call(const StreamTask& task, std::int64_t now_ms) const {
  return submit_args(task, now_ms).call();
}

lua::Submit TaskProducer::submit_args(const StreamTask& task, std::int64_t now_ms) const {
  const TaskOptions& t = task.options;
  lua::Submit s;
  s.band = band_of(t.priority);
  s.prefix = keys_.prefix;
  s.pool = keys_.pool;
  s.now_ms = now_ms;
  s.task_type = task.type;
  s.not_before_ms = t.not_before_ms().value_or(0);
  auto& args = s.fields;
  args = {"type", task.type, "payload", task.payload};
  if (t.priority != 0) args.insert(args.end(), {"priority", std::to_string(t.priority)});
  if (t.timeout) args.insert(args.end(), {"timeout_ms", std::to_string(t.timeout->count())});
  if (t.retries) args.insert(args.end(), {"retries", std::to_string(*t.retries)});
  if (!t.key.empty()) args.insert(args.end(), {"key", t.key});
  if (!t.idempotency_key.empty()) args.insert(args.end(), {"idem", t.idempotency_key});
  if (!t.tenant.empty()) args.insert(args.end(), {"tenant", t.tenant});
  s.ids = keys_.ids;
  s.stream = keys_.stream_key(s.band);
  if (!t.idempotency_key.empty()) s.idem = keys_.prefix + "idem:" + t.idempotency_key;
  s.later = keys_.later;
  return s;
}

Result<TaskProducer::Submitted> TaskProducer::submit(Connection& c, const StreamTask& t,
                                                     std::int64_t now_ms) const {
  const Connection::Call call = submit_call(t, now_ms);
  // Loaded first, so that a failure below means the script was sent.
  if (auto sha = c.load(lua::Submit::kScript); !sha) return sha.status();
  auto r = c.eval(lua::Submit::kScript, call.keys, call.args);
  if (!r) return c.broke_writing() ? r.status() : outcome_lost(r.status());  // not sent: none
  return submitted(*r);
}

Result<TaskProducer::SlotClaim> TaskProducer::claim_slot(Connection& c, const StreamTask& t,
                                                         const std::string& schedule,
                                                         std::int64_t slot_s,
                                                         const std::string& node,
                                                         std::int64_t now_ms) const {
  lua::ClaimSlot a{.task = submit_args(t, now_ms)};
  const std::string claim = keys_.schedule_claim_key(schedule);
  a.claim = claim;
  a.slot_s = slot_s;
  a.node = node;
  a.max_lead_s = kMaxSlotLeadSeconds;
  auto r = lua::run(c, a);
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->elements.size() != 3 || r->elements[0].type != Reply::Type::kInteger ||
      r->elements[1].type != Reply::Type::kInteger || r->elements[2].type != Reply::Type::kString) {
    return unexpected("claim_slot", *r);
  }
  SlotClaim out;
  out.task_id = static_cast<std::uint64_t>(r->elements[0].integer);
  out.won = r->elements[1].integer == 1;
  out.paused = r->elements[1].integer == 2;
  out.node = r->elements[2].str;
  return out;
}

Status TaskProducer::set_schedule_paused(Connection& c, const std::string& schedule, bool paused,
                                         const std::string& node, std::int64_t now_ms) const {
  const std::string key = keys_.schedule_claim_key(schedule);
  auto r = paused ? c.command({"HSET", key, "paused", node, "paused_ms", std::to_string(now_ms)})
                  : c.command({"HDEL", key, "paused", "paused_ms"});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  return Status::ok();
}

Result<TaskProducer::Cancelled> TaskProducer::cancel(Connection& c, std::uint64_t id,
                                                     std::int64_t now_ms) const {
  auto r = lua::run(c, lua::Cancel{.later = keys_.later,
                                   .done = keys_.done,
                                   .streams = keys_.streams,
                                   .prefix = keys_.prefix,
                                   .task_id = id,
                                   .now_ms = now_ms});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->elements.size() != 2 || r->elements[0].type != Reply::Type::kInteger) {
    return unexpected("cancel", *r);
  }
  if (r->elements[0].integer < 0) {
    return Status::error(Code::kNotFound, "task " + std::to_string(id) + " is not in redis");
  }
  return Cancelled{r->elements[0].integer == 1, r->elements[1].str};
}

}  // namespace sandpool::redis
