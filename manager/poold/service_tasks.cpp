// Service: submit (waited, with progress), submit_batch, task lookup and cancel.
#include <spdlog/logger.h>

#include <optional>
#include <utility>

#include "control/wire_errors.hpp"
#include "poold/service.hpp"

namespace sandpool::poold {
namespace {

using nlohmann::json;

bool fits_int32(const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= INT32_MAX;
  if (!v.is_number_integer()) return false;
  const auto n = v.get<std::int64_t>();
  return n >= INT32_MIN && n <= INT32_MAX;
}

// Reads the optional typed arguments of one task into SubmitOptions, each checked against
// its range (nothing truncated): timeout_ms 1..`max_timeout` (the pool's
// task_defaults.max_timeout), retries 0..4294967295 (the config's range for the pool's own).
Status submit_options(const json& a, std::chrono::milliseconds max_timeout, SubmitOptions* o) {
  if (auto it = a.find("priority"); it != a.end()) {
    if (!fits_int32(*it)) {
      return Status::invalid("priority: an integer from " + std::to_string(INT32_MIN) + " to " +
                             std::to_string(INT32_MAX));
    }
    o->priority = it->get<std::int32_t>();
  }
  if (auto it = a.find("timeout_ms"); it != a.end()) {
    const std::string bounds = "1 to " + std::to_string(max_timeout.count()) +
                               " (1 ms to the pool's task_defaults.max_timeout)";
    if (!it->is_number_unsigned()) return Status::invalid("timeout_ms: an integer from " + bounds);
    const auto ms = it->get<std::uint64_t>();
    if (ms < 1 || ms > static_cast<std::uint64_t>(max_timeout.count())) {
      return Status::invalid("timeout_ms: " + std::to_string(ms) + " is outside " + bounds);
    }
    o->timeout = std::chrono::milliseconds(static_cast<std::int64_t>(ms));
  }
  if (auto it = a.find("retries"); it != a.end()) {
    const std::string bounds = "0 to " + std::to_string(UINT32_MAX);
    if (!it->is_number_unsigned()) return Status::invalid("retries: an integer from " + bounds);
    const auto n = it->get<std::uint64_t>();
    if (n > UINT32_MAX) {
      return Status::invalid("retries: " + std::to_string(n) + " is outside " + bounds);
    }
    o->retries = static_cast<std::uint32_t>(n);
  }
  if (auto it = a.find("key"); it != a.end()) {
    if (!it->is_string()) return Status::invalid("key: a string");
    o->key = it->get<std::string>();
  }
  return Status::ok();
}

std::string string_arg(const json& a, const char* name) {
  auto it = a.find(name);
  return it != a.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Ok iff `lens` (a batch's payload_lens) are unsigned and add up to `blob_size`.
Status check_payload_lens(const json& lens, std::size_t blob_size) {
  std::size_t total = 0;
  for (const json& len : lens) {
    if (!len.is_number_unsigned()) return Status::invalid("payload_lens: unsigned lengths");
    total += len.get<std::size_t>();
  }
  if (total != blob_size) return Status::invalid("payload_lens do not add up to the payload");
  return Status::ok();
}

// What every task of a batch with shared `defaults` gets, read and routed once: its type,
// options and pool; or (pool empty) why the whole request is refused.
struct SharedBatch {
  std::string type;
  SubmitOptions options;
  std::shared_ptr<Pool> pool;
  Status refusal;
};

template <class Route>
SharedBatch shared_batch(const json& defaults, bool stopping, const Route& route) {
  SharedBatch b;
  b.type = string_arg(defaults, "type");
  if (stopping) {
    b.refusal = Status::error(Code::kClosed, "poold is shutting down");
  } else if (b.type.empty()) {
    b.refusal = Status::invalid("type: required, a non-empty string");
  } else if (auto pool = route(string_arg(defaults, "pool"), b.type); !pool) {
    b.refusal = pool.status();
  } else if (Status s = submit_options(defaults, (*pool)->max_timeout(), &b.options); !s) {
    b.refusal = s;
  } else {
    b.pool = std::move(pool).value();
  }
  return b;
}

}  // namespace

ops::TaskAccount account_of(const TaskResult& r) {
  ops::TaskAccount a;
  a.id = r.id;
  a.type = r.type;
  a.state = std::string(to_string(r.state));
  a.error = r.error;
  a.attempts = r.attempts();
  for (const Attempt& at : r.history) {
    a.history.push_back({at.number, std::string(to_string(at.outcome)), at.error, at.worker_pid,
                         at.started_ms, at.ended_ms, at.backtrace});
  }
  if (r.state == TaskState::kDeadLettered) a.reason = std::string(to_string(r.reason));
  if (r.state == TaskState::kCancelled) a.reason = std::string(to_string(r.cancel_reason));
  // Decided dead-lettered, the letter not yet written: not terminal until it is.
  a.dead_letter_pending = r.dead_letter_pending;
  return a;
}

json task_json(const TaskResult& r) { return ops::encode(account_of(r)); }

std::optional<Ticket> Service::find_task(std::uint64_t id) const {
  // The pools are copied under mu_ and asked without it: Pool::find() waits for the pool's
  // loop thread, which takes mu_ when a task ends.
  for (const auto& [name, pool] : pools()) {
    if (auto t = pool->find(id)) return t;
  }
  for (const auto& [name, pool] : retired_pools()) {
    if (auto t = pool->find(id)) return t;
  }
  return std::nullopt;
}

std::optional<Service::Submission> Service::existing_task(const KeptTask& kept,
                                                          const Responder* waiter) {
  // A live record first: a replay may be running the task again.
  if (auto t = find_task(kept.task_id)) {
    if (waiter != nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      // Under mu_, so the task cannot end between the check and the emplace unanswered:
      // its state is terminal before its on_done takes mu_ in reply_when_done.
      if (!t->done()) waiters_.emplace(kept.task_id, Waiter{*waiter, 0, true});
    }
    return Submission{kept.task_id, true, *t, std::nullopt};
  }
  if (kept.final) return Submission{kept.task_id, true, std::nullopt, kept};
  return std::nullopt;
}

Result<Service::Submission> Service::submit_one(const json& args, std::string payload, bool wait,
                                                bool progress, const Responder* res) {
  if (stopping_.load()) return Status::error(Code::kClosed, "poold is shutting down");
  const std::string type = string_arg(args, "type");
  if (type.empty()) return Status::invalid("type: required, a non-empty string");
  const std::string key = string_arg(args, "idempotency_key");
  if (!key.empty()) {
    if (auto kept = idempotency_.find(key)) {
      if (auto existing = existing_task(*kept, wait ? res : nullptr)) return *existing;
      log_->warn("idempotency key {}: task {} is neither in a pool nor kept; submitting anew", key,
                 kept->task_id);
    }
  }
  auto pool = route(string_arg(args, "pool"), type);
  if (!pool) return pool.status();
  SubmitOptions o;
  if (Status s = submit_options(args, (*pool)->max_timeout(), &o); !s) return s;
  if (wait && res != nullptr) {
    // Coalesced per task, latest wins: a worker's flood of progress frames neither grows
    // the submitter's output without bound nor gets its connection dropped.
    std::shared_ptr<ProgressCoalescer::Stream> stream;
    if (progress) {
      stream = progress_->open(*res);
      o.on_progress = [stream](std::uint64_t id, std::string_view data) {
        stream->update(id, data);
      };
    }
    o.on_done = [this, r = *res, stream, key](const TaskResult& result) {
      if (stream) stream->finish();
      r.ok(task_json(result), result.result);
      task_ended(key, result);
    };
  } else if (!key.empty()) {
    o.on_done = [this, key](const TaskResult& result) { task_ended(key, result); };
  } else {
    // No key to keep: only the task's waiters (`wait`) to answer.
    o.on_done = [this](const TaskResult& result) { reply_when_done(result.id, result); };
  }
  auto ticket = (*pool)->submit(type, std::move(payload), std::move(o));
  if (!ticket) return ticket.status();
  if (!key.empty()) idempotency_.remember(key, ticket->id());
  return Submission{ticket->id(), false, std::move(ticket).value(), std::nullopt};
}

void Service::task_ended(const std::string& key, const TaskResult& result) {
  if (!key.empty()) {
    idempotency_.task_ended(key, result);
  } else {
    idempotency_.task_ended(result);  // a replay: the key of its id, if any
  }
  reply_when_done(result.id, result);
}

void Service::reply_when_done(std::uint64_t task_id, const TaskResult& result) {
  std::vector<Waiter> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [b, e] = waiters_.equal_range(task_id);
    for (auto it = b; it != e; ++it) ready.push_back(it->second);
    waiters_.erase(b, e);
  }
  for (const Waiter& w : ready) answer_with_account(w.res, result, w.with_result);
}

TaskCallbacks Service::replay_callbacks() {
  TaskCallbacks cb;
  cb.on_done = [this](const TaskResult& result) { task_ended({}, result); };
  return cb;
}

void Service::op_submit(const Request& req, const Responder& res) {
  const bool wait = req.args.value("wait", false);
  const bool progress = req.args.value("progress", false);
  auto s = submit_one(req.args, req.blob, wait, progress, &res);
  if (!s) return (void)res.error(s.status());
  if (!wait) return (void)res.ok({{"id", s->id}, {"existing", s->existing}});
  res.event({{"event", "accepted"}, {"id", s->id}, {"existing", s->existing}});
  if (!s->existing) return;  // its on_done answers
  // An existing task that ended: its account now (open ones answer when they end). The
  // pool's record when it has one, else what the key kept.
  if (s->ticket) {
    if (!s->ticket->done()) return;
    const TaskResult r = s->ticket->snapshot();
    return (void)res.ok(task_json(r), r.result);
  }
  json j = task_json(*s->kept->final);
  if (s->kept->result_dropped) j["result_dropped"] = true;
  res.ok(std::move(j), s->kept->final->result);
}

void Service::op_submit_batch(const Request& req, const Responder& res) {
  // docs/protocol.md: `payload_lens` (one per task) slices the blob; the tasks share
  // `defaults`, or each has its own object in `tasks`.
  auto lens = req.args.find("payload_lens");
  if (lens == req.args.end() || !lens->is_array()) {
    return (void)res.error(Status::invalid("payload_lens: one payload length per task"));
  }
  const auto tasks = req.args.find("tasks");
  const bool per_task = tasks != req.args.end();
  if (per_task && (!tasks->is_array() || tasks->size() != lens->size())) {
    return (void)res.error(Status::invalid("tasks: one object per payload_lens entry"));
  }
  const json defaults = req.args.value("defaults", json::object());
  if (!defaults.is_object()) return (void)res.error(Status::invalid("defaults: an object"));
  // Check the payload slices first, so a malformed batch submits nothing.
  if (Status st = check_payload_lens(*lens, req.blob.size()); !st) return (void)res.error(st);
  // Shared options without an idempotency key (poolctl batch): read them and route the pool
  // once per request instead of once per task, since every task would get the same answer.
  const bool shared = !per_task && !defaults.contains("idempotency_key");
  SharedBatch batch;
  if (shared) {
    batch = shared_batch(
        defaults, stopping_.load(),
        [this](const std::string& pool, const std::string& type) { return route(pool, type); });
    batch.options.on_done = [this](const TaskResult& result) {
      reply_when_done(result.id, result);
    };
  }
  json ids = json::array();
  json existing_at = json::array();
  json errors = json::array();
  // Shared options: from the first refusal that would refuse every later task the same way
  // (queue_full, a closing service, an unroutable type), the rest of the request is not
  // tried, and the reply says so once (`refused_from`) instead of once per task.
  std::optional<std::size_t> refused_from;
  if (shared && !batch.pool) refused_from = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < lens->size() && !refused_from; ++i) {
    const std::size_t len = (*lens)[i].get<std::size_t>();
    const json& args = per_task ? (*tasks)[i] : defaults;
    if (!args.is_object()) {
      return (void)res.error(Status::invalid("tasks: objects of submit arguments"));
    }
    bool existing = false;
    Result<std::uint64_t> r = std::uint64_t{0};
    if (shared) {
      auto t = batch.pool->submit(batch.type, req.blob.substr(at, len), batch.options);
      r = t ? Result<std::uint64_t>(t->id()) : Result<std::uint64_t>(t.status());
    } else {
      auto s = submit_one(args, req.blob.substr(at, len), false, false, nullptr);
      r = s ? Result<std::uint64_t>(s->id) : Result<std::uint64_t>(s.status());
      existing = s && s->existing;
    }
    at += len;
    if (shared && !r && r.status().code() == Code::kQueueFull) {
      // No room now: a task never overtakes an earlier one of its request that was refused.
      batch.refusal = r.status();
      refused_from = i;
    } else if (r) {
      ids.push_back(*r);
      if (existing) existing_at.push_back(i);
    } else {
      ids.push_back(0);
      errors.push_back({{"index", i},
                        {"code", std::string(control::wire_code(r.status().code()))},
                        {"message", r.status().message()}});
    }
  }
  json out{{"ids", std::move(ids)}};
  if (!existing_at.empty()) out["existing"] = std::move(existing_at);
  if (!errors.empty()) out["errors"] = std::move(errors);
  if (refused_from) {
    out["refused_from"] = {{"index", *refused_from},
                           {"code", std::string(control::wire_code(batch.refusal.code()))},
                           {"message", batch.refusal.message()}};
  }
  res.ok(std::move(out));
}

void answer_with_account(const Responder& res, const TaskResult& r, bool with_result) {
  // Payload and result bytes are admin-only, as in `dlq_show` (docs/protocol.md): a read
  // peer sees the account (state, attempts, errors) and that a result was withheld.
  ops::TaskAccount account = account_of(r);
  if (with_result) return (void)res.ok(ops::encode(account), r.result);
  account.result_withheld = !r.result.empty();
  res.ok(ops::encode(account));
}

void Service::op_task(const Request& req, const ops::TaskIdArgs& a,
                      const OpResponder<ops::Task>& res) {
  auto t = find_task(a.id);
  if (!t) return (void)res.error(Status::error(Code::kNotFound, "no task " + std::to_string(a.id)));
  answer_with_account(res.responder(), t->snapshot(), req.rights >= Rights::kAdmin);
}

void Service::op_cancel(const Request&, const ops::TaskIdArgs& a,
                        const OpResponder<ops::Cancel>& res) {
  auto t = find_task(a.id);
  if (!t) return (void)res.error(Status::error(Code::kNotFound, "no task " + std::to_string(a.id)));
  const bool asked = t->cancel();
  res.ok({t->id(), asked, std::string(to_string(t->state()))});
}

}  // namespace sandpool::poold
