// Service: submit (waited, with progress), submit_batch, task lookup and cancel.
#include <spdlog/logger.h>

#include <algorithm>
#include <optional>
#include <utility>

#include <sandpool/base/log_text.hpp>

#include <sandpool/control/wire_errors.hpp>
#include <sandpool/service/service.hpp>
#include <sandpool/task/enum_names.hpp>

namespace sandpool::poold {
namespace {

using nlohmann::json;

// Ok iff the payload lengths add up to `blob_size`.
Status check_payload_lens(const std::vector<std::uint64_t>& lens, std::size_t blob_size) {
  std::uint64_t total = 0;  // never above blob_size
  for (const std::uint64_t len : lens) {
    if (len > blob_size - total)
      return Status::invalid("payload_lens do not add up to the payload");
    total += len;
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
SharedBatch shared_batch(const ops::SubmitArgs& defaults, bool stopping, const Route& route) {
  SharedBatch b;
  b.type = defaults.type;
  if (stopping) {
    b.refusal = Status::error(Code::kClosed, "poold is shutting down");
  } else if (b.type.empty()) {
    b.refusal = Status::invalid("type: required, a non-empty string");
  } else if (auto pool = route(defaults.pool, b.type); !pool) {
    b.refusal = pool.status();
  } else if (Status s = submit_options(defaults, (*pool)->max_timeout(), &b.options); !s) {
    b.refusal = s;
  } else {
    b.pool = std::move(pool).value();
  }
  return b;
}

}  // namespace

// The submit options of one task, each checked against the range its type does not give
// (the decode checked the types): timeout_ms 1..`max_timeout` (the pool's
// task_defaults.max_timeout).
Status submit_options(const ops::SubmitArgs& a, std::chrono::milliseconds max_timeout,
                      SubmitOptions* o) {
  if (a.options.timeout) {
    const std::int64_t ms = a.options.timeout->count();
    if (ms < 1 || ms > max_timeout.count()) {
      return Status::invalid("timeout_ms: " + std::to_string(ms) + " is outside 1 to " +
                             std::to_string(max_timeout.count()) +
                             " (1 ms to the pool's task_defaults.max_timeout)");
    }
  }
  if (a.options.not_before && a.delay) {
    return Status::invalid("not_before_ms and delay_ms: give at most one of the two");
  }
  *o = SubmitOptions::of(a.options);
  o->delay = a.delay;
  return Status::ok();
}

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
  a.not_before_ms = r.not_before_ms;
  a.tenant = r.tenant;
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
      MutexLock lock(mu_);
      // Under mu_, so the task cannot end between the check and the emplace unanswered:
      // its state is terminal before its on_done takes mu_ in reply_when_done.
      if (!t->done()) waiters_.emplace(kept.task_id, Waiter{*waiter, 0, true});
    }
    return Submission{kept.task_id, true, *t, std::nullopt};
  }
  if (kept.final) return Submission{kept.task_id, true, std::nullopt, kept};
  return std::nullopt;
}

Result<Service::Submission> Service::submit_one(const ops::SubmitArgs& args, std::string payload,
                                                bool wait, bool progress, const Responder* res,
                                                const std::shared_ptr<AckGate>& gate,
                                                std::size_t index) {
  if (stopping_.load()) return Status::error(Code::kClosed, "poold is shutting down");
  const std::string& type = args.type;
  if (type.empty()) return Status::invalid("type: required, a non-empty string");
  const std::string& key = args.options.idempotency_key;
  if (!key.empty()) {
    if (auto kept = known_key(key)) {
      if (auto existing = existing_task(*kept, wait ? res : nullptr)) return *existing;
      log_->warn("idempotency key {}: task {} is neither in a pool nor kept; submitting anew", key,
                 kept->task_id);
    }
  }
  auto pool = route(args.pool, type);
  if (!pool) return pool.status();
  SubmitOptions o;
  if (Status s = submit_options(args, (*pool)->max_timeout(), &o); !s) return s;
  o.idempotency_key = key;
  o.on_accepted = [this, ack = AckGate::on_accepted(gate, index)](std::uint64_t id,
                                                                  const Status& s) {
    note_acceptance(s);
    ack(id, s);
  };
  // A task the journal refused ends cancelled; its key is forgotten (the client was told
  // "not accepted" and may resubmit under it), so its end must not keep it again.
  auto keep = [this, gate, index, key](const TaskResult& result) {
    task_ended(gate->refused(index) ? std::string() : key, result);
  };
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
    // The final reply goes after the accepted event (the task may end before its commit).
    o.on_done = [r = *res, stream, gate, index, keep](const TaskResult& result) {
      gate->after_reply(index, [r, stream, result] {
        if (stream) stream->finish();
        r.ok(task_json(result), result.result);
      });
      keep(result);
    };
  } else if (!key.empty()) {
    o.on_done = keep;
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
    MutexLock lock(mu_);
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

namespace {

// A request token becomes part of an idempotency key (ops::request_key): bounded and plain.
Status check_request_token(const std::string& token) {
  constexpr std::size_t kMax = 128;
  const bool plain =
      std::all_of(token.begin(), token.end(), [](char ch) { return ch > ' ' && ch < 127; });
  if (token.size() > kMax || !plain) {
    return Status::invalid("request_token: at most 128 bytes of printable ASCII without space");
  }
  return Status::ok();
}

}  // namespace

void Service::serve(const Request& req, const ops::SubmitArgs& a,
                    const OpResponder<ops::Submit>& res) {
  if (!a.request_token.empty()) {
    if (Status st = check_request_token(a.request_token); !st) return (void)res.error(st);
    if (a.options.idempotency_key.empty()) {  // the task takes the token's key (its own wins)
      ops::SubmitArgs keyed = a;
      keyed.options.idempotency_key = ops::request_key(a.request_token);
      return serve(req, keyed, res);
    }
  }
  if (auto redis_pool = redis_route(a.pool, a.type)) return submit_redis(*redis_pool, req, a, res);
  auto gate = std::make_shared<AckGate>();
  auto s = submit_one(a, req.blob, a.wait, a.progress, &res.responder(), gate, 0);
  if (!s) return (void)res.error(s.status());
  if (s->existing) return answer_existing(a, *s, res);
  gate->release(1, [this, a, id = s->id, res](const AckGate::Refusals& refused) {
    if (!refused.empty()) {
      if (!a.options.idempotency_key.empty()) idempotency_.forget(a.options.idempotency_key, id);
      return (void)res.error(refused.front().second);
    }
    if (!a.wait) return (void)res.ok(ops::SubmitReply{id, false, std::nullopt});
    res.event(ops::SubmitEvent{"accepted", id, false});  // its on_done answers
  });
}

void Service::answer_existing(const ops::SubmitArgs& a, const Submission& s,
                              const OpResponder<ops::Submit>& res) {
  if (!a.wait) return (void)res.ok(ops::SubmitReply{s.id, true, std::nullopt});
  res.event(ops::SubmitEvent{"accepted", s.id, true});
  // An existing task that ended: its account now (open ones answer when they end). The
  // pool's record when it has one, else what the key kept.
  if (s.ticket) {
    if (!s.ticket->done()) return;
    const TaskResult r = s.ticket->snapshot();
    return (void)res.ok(ops::SubmitReply{r.id, true, account_of(r)}, r.result);
  }
  ops::TaskAccount account = account_of(*s.kept->final);
  account.result_dropped = s.kept->result_dropped;
  res.ok(ops::SubmitReply{account.id, true, std::move(account)}, s.kept->final->result);
}

namespace {

// A batch's refusal of the task at `index` (or, as refused_from, of every task from it on).
ops::BatchRefusal refusal_at(std::size_t index, const Status& why) {
  return {index, std::string(control::wire_code(why.code())), why.message()};
}

}  // namespace

void Service::serve(const Request& req, const ops::SubmitBatchArgs& a,
                    const OpResponder<ops::SubmitBatch>& res) {
  // docs/protocol.md: `payload_lens` (one per task) slices the blob; the tasks share
  // `defaults`, or each has its own entry in `tasks` (the decode checked there is one per
  // length). Check the payload slices first, so a malformed batch submits nothing.
  if (Status st = check_payload_lens(a.payload_lens, req.blob.size()); !st) {
    return (void)res.error(st);
  }
  if (!a.request_token.empty()) {
    // Each task without a key of its own takes the token's key at its index; the batch goes
    // as per-task objects (not the shared path, whose tasks have no keys).
    if (Status st = check_request_token(a.request_token); !st) return (void)res.error(st);
    ops::SubmitBatchArgs keyed;
    keyed.payload_lens = a.payload_lens;
    keyed.tasks.emplace();
    for (std::size_t i = 0; i < a.payload_lens.size(); ++i) {
      ops::SubmitArgs t = a.tasks ? (*a.tasks)[i] : a.defaults.value_or(ops::SubmitArgs{});
      if (t.options.idempotency_key.empty()) {
        t.options.idempotency_key = ops::request_key(a.request_token, i);
      }
      keyed.tasks->push_back(std::move(t));
    }
    return serve(req, keyed, res);
  }
  if (submit_batch_redis(req, a, res)) return;
  auto gate = std::make_shared<AckGate>();
  ops::SubmitBatchReply out;
  // Shared options without an idempotency key (poolctl batch): read them and route the pool
  // once per request, and hand the pool every task at once (one journal transaction).
  const ops::SubmitArgs defaults = a.defaults.value_or(ops::SubmitArgs{});
  if (!a.tasks && defaults.options.idempotency_key.empty()) {
    submit_shared_batch(req.blob, a.payload_lens, defaults, gate, &out);
  } else {
    std::size_t at = 0;
    for (std::size_t i = 0; i < a.payload_lens.size(); ++i) {
      const std::size_t len = a.payload_lens[i];
      const ops::SubmitArgs& args = a.tasks ? (*a.tasks)[i] : defaults;
      auto s = submit_one(args, req.blob.substr(at, len), false, false, nullptr, gate, i);
      at += len;
      out.ids.push_back(s ? s->id : 0);
      if (!s) out.errors.push_back(refusal_at(i, s.status()));
      if (s && s->existing) out.existing.push_back(i);
    }
  }
  const std::size_t acks =
      std::count_if(out.ids.begin(), out.ids.end(), [](std::uint64_t id) { return id != 0; }) -
      out.existing.size();
  // Answered once every new task is committed; a refused one becomes an error of its own.
  gate->release(acks, [this, a, out = std::move(out), res](const AckGate::Refusals& refused) {
    ops::SubmitBatchReply reply = out;
    for (const auto& [index, why] : refused) {
      const std::string& key = a.tasks
                                   ? (*a.tasks)[index].options.idempotency_key
                                   : a.defaults.value_or(ops::SubmitArgs{}).options.idempotency_key;
      if (!key.empty()) idempotency_.forget(key, reply.ids[index]);
      reply.ids[index] = 0;
      reply.errors.push_back(refusal_at(index, why));
    }
    std::sort(reply.errors.begin(), reply.errors.end(),
              [](const auto& x, const auto& y) { return x.index < y.index; });
    res.ok(reply);
  });
}

void Service::submit_shared_batch(const std::string& blob, const std::vector<std::uint64_t>& lens,
                                  const ops::SubmitArgs& defaults,
                                  const std::shared_ptr<AckGate>& gate,
                                  ops::SubmitBatchReply* out) {
  SharedBatch batch = shared_batch(
      defaults, stopping_.load(),
      [this](const std::string& pool, const std::string& type) { return route(pool, type); });
  // From the first refusal that would refuse every later task the same way (queue_full, a
  // closing service, an unroutable type), the rest of the request is not tried, and the reply
  // says so once (`refused_from`) instead of once per task.
  if (!batch.pool) return (void)(out->refused_from = refusal_at(0, batch.refusal));
  // One on_done for the whole batch, kept once (not a block per queued task).
  TaskCallbacks shared;
  shared.on_done = [this](const TaskResult& result) { reply_when_done(result.id, result); };
  std::vector<BatchTask> tasks(lens.size());
  std::size_t at = 0;
  for (std::size_t i = 0; i < lens.size(); ++i) {
    tasks[i].type = batch.type;
    tasks[i].payload = blob.substr(at, lens[i]);
    tasks[i].options = batch.options;
    tasks[i].options.on_accepted = [this, ack = AckGate::on_accepted(gate, i)](std::uint64_t id,
                                                                               const Status& s) {
      note_acceptance(s);
      ack(id, s);
    };
    at += lens[i];
  }
  std::vector<Result<Ticket>> submitted =
      batch.pool->submit_batch(std::move(tasks), {}, std::move(shared));
  out->ids.reserve(submitted.size());
  for (std::size_t i = 0; i < submitted.size(); ++i) {
    const Result<Ticket>& t = submitted[i];
    if (!t && t.status().code() == Code::kQueueFull) {
      // No room now: a task never overtakes an earlier one of its request that was refused.
      out->refused_from = refusal_at(i, t.status());
      return;
    }
    out->ids.push_back(t ? t->id() : 0);
    if (!t) out->errors.push_back(refusal_at(i, t.status()));
  }
}

namespace {

constexpr std::size_t kPayloadPreviewBytes = 4096;

ops::TaskSubmission submission_of(const Ticket& t, bool with_payload) {
  const SubmitOptions& o = t.options();
  ops::TaskSubmission s;
  static_cast<TaskOptions&>(s) = o;
  s.payload_size = t.payload().size();
  if (with_payload) s.payload_preview = log_text(t.payload(), kPayloadPreviewBytes);
  return s;
}

}  // namespace

void answer_with_account(const Responder& res, const TaskResult& r, bool with_result,
                         std::optional<ops::TaskSubmission> submitted) {
  // Payload and result bytes are admin-only, as in `dlq_show` (docs/protocol.md): a read
  // peer sees the account (state, attempts, errors) and that a result was withheld.
  ops::TaskAccount account = account_of(r);
  account.submitted = std::move(submitted);
  if (with_result) return (void)res.ok(ops::encode(account), r.result);
  account.result_withheld = !r.result.empty();
  res.ok(ops::encode(account));
}

void Service::serve(const Request& req, const ops::TaskIdArgs& a,
                    const OpResponder<ops::Task>& res) {
  if (redis_ && RedisPools::is_cluster_id(a.id)) {
    return serve_redis_task(a.id, req.rights >= Rights::kAdmin, res.responder());
  }
  auto t = find_task(a.id);
  std::optional<TaskResult> r = t ? std::optional<TaskResult>(t->snapshot()) : journaled_task(a.id);
  if (!r) return (void)res.error(Status::error(Code::kNotFound, "no task " + std::to_string(a.id)));
  const bool admin = req.rights >= Rights::kAdmin;
  answer_with_account(res.responder(), *r, admin,
                      t ? std::optional(submission_of(*t, admin)) : std::nullopt);
}

void Service::serve(const Request&, const ops::TaskListArgs& a,
                    const OpResponder<ops::TaskList>& res) {
  TaskQuery q;
  q.type = a.type;
  q.key = a.key;
  q.tenant = a.tenant;
  if (!a.state.empty()) {
    q.state = parse_enum(a.state, TaskState::kScheduled);  // any state
    if (!q.state) {
      return (void)res.error(Status::invalid("state: no task state '" + a.state +
                                             "' (queued, dispatched, running, retry_wait, "
                                             "completed, dead_lettered, cancelled)"));
    }
  }
  q.since_ms = a.since_ms;
  q.until_ms = a.until_ms;
  q.limit = a.limit + 1;  // one more than asked: whether the list was cut
  std::vector<std::pair<std::string, std::shared_ptr<Pool>>> chosen;
  if (!a.pool.empty()) {
    auto pool = pool_named(a.pool);
    if (!pool) return (void)res.error(pool.status());
    chosen.emplace_back(a.pool, *pool);
  } else {
    chosen = pools();
  }
  ops::TaskListReply reply;
  for (const auto& [name, pool] : chosen) {
    for (const TaskListing& l : pool->list(q)) {
      const TaskResult r = l.ticket.snapshot();
      ops::TaskAccount account = account_of(r);
      reply.tasks.push_back({r.id, name, r.type, account.state, account.reason, r.error,
                             r.attempts(), l.key, l.submitted_ms, r.tenant,
                             r.not_before_ms != 0 ? std::optional(r.not_before_ms) : std::nullopt});
    }
  }
  std::sort(reply.tasks.begin(), reply.tasks.end(),
            [](const auto& x, const auto& y) { return x.id > y.id; });
  if (reply.tasks.size() > a.limit) {
    reply.tasks.resize(a.limit);
    reply.truncated = true;
  }
  res.ok(reply);
}

void Service::serve(const Request&, const ops::TaskIdArgs& a, const OpResponder<ops::Cancel>& res) {
  if (redis_ && RedisPools::is_cluster_id(a.id)) {
    auto c = redis_->cancel(a.id);
    if (!c) return (void)res.error(c.status());
    return (void)res.ok({a.id, c->asked, c->state});
  }
  auto t = find_task(a.id);
  if (!t) return (void)res.error(Status::error(Code::kNotFound, "no task " + std::to_string(a.id)));
  const bool asked = t->cancel();
  res.ok({t->id(), asked, std::string(to_string(t->state()))});
}

}  // namespace sandpool::poold
