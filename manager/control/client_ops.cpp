// The typed operations of sandpool::Client: argument building and reply parsing over
// Client::call / Client::start (docs/protocol.md, "Operations").
#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <utility>

#include <sandpool/client.hpp>

#include "control/op_json.hpp"
#include "control/wire_errors.hpp"

namespace sandpool {
namespace {

using nlohmann::json;

Result<json> body_of(Result<Reply> r) {
  if (!r) return r.status();
  return std::move(r->body);
}

std::string string_field(const json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::uint64_t id_field(const json& j) {
  auto it = j.find("id");
  return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

json submit_args(const SubmitRequest& t) {
  json a{{"type", t.type}, {"priority", t.priority}};
  if (!t.pool.empty()) a["pool"] = t.pool;
  if (t.timeout) a["timeout_ms"] = t.timeout->count();
  if (t.retries) a["retries"] = *t.retries;
  if (!t.key.empty()) a["key"] = t.key;
  if (!t.idempotency_key.empty()) a["idempotency_key"] = t.idempotency_key;
  return a;
}

bool same_options(const SubmitRequest& a, const SubmitRequest& b) {
  return a.type == b.type && a.pool == b.pool && a.priority == b.priority &&
         a.timeout == b.timeout && a.retries == b.retries && a.key == b.key &&
         a.idempotency_key == b.idempotency_key;
}

Submitted submitted_of(const json& j) {
  Submitted s;
  s.id = id_field(j);
  auto it = j.find("existing");
  s.existing = it != j.end() && it->is_boolean() && it->get<bool>();
  return s;
}

TaskReply task_reply_of(Reply&& r) {
  TaskReply t;
  t.id = id_field(r.body);
  t.state = string_field(r.body, "state");
  t.reason = string_field(r.body, "reason");
  t.error = string_field(r.body, "error");
  t.result = std::move(r.blob);
  t.body = std::move(r.body);
  return t;
}

// The progress events of a waited submit call on_progress; the rest are ignored.
EventFn progress_events(ProgressFn on_progress) {
  if (!on_progress) return {};
  return [fn = std::move(on_progress)](const Reply& e) {
    if (string_field(e.body, "event") == "progress") fn(id_field(e.body), e.blob);
  };
}

}  // namespace

Result<Submitted> Client::submit(const SubmitRequest& task) {
  auto r = body_of(call("submit", submit_args(task), task.payload));
  if (!r) return r.status();
  return submitted_of(*r);
}

Result<TaskReply> Client::submit_wait(const SubmitRequest& task, ProgressFn on_progress) {
  json args = submit_args(task);
  args["wait"] = true;
  args["progress"] = static_cast<bool>(on_progress);
  auto r = call_streaming("submit", std::move(args), task.payload,
                          progress_events(std::move(on_progress)));
  if (!r) return r.status();
  return task_reply_of(std::move(r).value());
}

Status Client::submit_async(const SubmitRequest& task, SubmitDoneFn on_done,
                            ProgressFn on_progress) {
  json args = submit_args(task);
  args["wait"] = true;
  args["progress"] = static_cast<bool>(on_progress);
  auto id = start("submit", std::move(args), task.payload, progress_events(std::move(on_progress)),
                  [done = std::move(on_done)](Result<Reply> r) {
                    if (!r) return done(r.status());
                    done(task_reply_of(std::move(r).value()));
                  });
  return id.status();
}

Result<std::vector<Submitted>> Client::submit_batch(const std::vector<SubmitRequest>& tasks) {
  // The common case (a load generator, a bulk import) shares every option: then they travel
  // once, in `defaults`, and per task only a payload length (docs/protocol.md).
  const bool shared = std::all_of(tasks.begin(), tasks.end(), [&](const SubmitRequest& t) {
    return same_options(t, tasks.front());
  });
  json lens = json::array();
  json per_task = json::array();
  std::size_t total = 0;
  for (const SubmitRequest& t : tasks) total += t.payload.size();
  std::string blob;
  blob.reserve(total);
  for (const SubmitRequest& t : tasks) {
    lens.push_back(t.payload.size());
    if (!shared) per_task.push_back(submit_args(t));
    blob += t.payload;
  }
  json args{{"payload_lens", std::move(lens)}};
  if (shared && !tasks.empty()) args["defaults"] = submit_args(tasks.front());
  if (!shared) args["tasks"] = std::move(per_task);
  auto r = body_of(call("submit_batch", std::move(args), std::move(blob)));
  if (!r) return r.status();
  // Tasks from `refused_from.index` on were refused together and have no `ids` entry.
  std::size_t tried = tasks.size();
  Status tail_refusal;
  if (auto rf = r->find("refused_from"); rf != r->end()) {
    if (!rf->is_object() || !rf->contains("index") || !(*rf)["index"].is_number_unsigned() ||
        (*rf)["index"].get<std::size_t>() > tasks.size()) {
      return Status::protocol("submit_batch reply: refused_from needs an index within the batch");
    }
    tried = (*rf)["index"].get<std::size_t>();
    tail_refusal =
        control::status_from_wire(string_field(*rf, "code"), string_field(*rf, "message"));
  }
  auto ids = r->find("ids");
  if (ids == r->end() || !ids->is_array() || ids->size() != tried) {
    return Status::protocol("submit_batch reply does not list one id per task tried");
  }
  std::vector<Submitted> out(tasks.size());
  for (std::size_t i = 0; i < tried; ++i) {
    if ((*ids)[i].is_number_unsigned()) out[i].id = (*ids)[i].get<std::uint64_t>();
  }
  for (std::size_t i = tried; i < out.size(); ++i) out[i].status = tail_refusal;
  auto in_range = [&](const json& index) {
    return index.is_number_unsigned() && index.get<std::size_t>() < out.size();
  };
  if (auto ex = r->find("existing"); ex != r->end() && ex->is_array()) {
    for (const json& index : *ex) {
      if (in_range(index)) out[index.get<std::size_t>()].existing = true;
    }
  }
  if (auto errs = r->find("errors"); errs != r->end() && errs->is_array()) {
    for (const json& e : *errs) {
      if (!e.is_object() || !e.contains("index") || !in_range(e["index"])) continue;
      out[e["index"].get<std::size_t>()].status =
          control::status_from_wire(string_field(e, "code"), string_field(e, "message"));
    }
  }
  return out;
}

Result<json> Client::status() { return body_of(call("status")); }

Result<json> Client::workers(const std::string& pool) {
  return body_of(call("workers", pool.empty() ? json::object() : json{{"pool", pool}}));
}

Result<json> Client::stats(const std::string& pool) {
  return body_of(call("stats", pool.empty() ? json::object() : json{{"pool", pool}}));
}

Result<TaskReply> Client::task(std::uint64_t id) {
  auto r = call(std::string(ops::Task::kName), ops::encode(ops::TaskIdArgs{id}));
  if (!r) return r.status();
  return task_reply_of(std::move(r).value());
}

Result<TaskReply> Client::wait(std::uint64_t id, std::optional<std::chrono::milliseconds> timeout) {
  // Not bounded by call_timeout: the wait's own timeout bounds it, on the server.
  auto r = call_streaming(std::string(ops::Wait::kName), ops::encode(ops::WaitArgs{id, timeout}),
                          {}, {});
  if (!r) return r.status();
  return task_reply_of(std::move(r).value());
}

Result<json> Client::cancel(std::uint64_t id) {
  return body_of(call(std::string(ops::Cancel::kName), ops::encode(ops::TaskIdArgs{id})));
}

Result<json> Client::scale(const std::string& pool, std::uint32_t workers) {
  return body_of(call(std::string(ops::Scale::kName), ops::encode(ops::ScaleArgs{pool, workers})));
}

Result<json> Client::strategy(const std::string& pool, const std::string& name) {
  return body_of(
      call(std::string(ops::Strategy::kName), ops::encode(ops::StrategyArgs{pool, name})));
}

Result<json> Client::drain(const std::string& pool) {
  return body_of(call(std::string(ops::Drain::kName), ops::encode(ops::PoolArgs{pool})));
}

Result<json> Client::resume(const std::string& pool) {
  return body_of(call(std::string(ops::Resume::kName), ops::encode(ops::PoolArgs{pool})));
}

Result<json> Client::restart(const std::string& pool, bool rolling) {
  return body_of(
      call(std::string(ops::Restart::kName), ops::encode(ops::RestartArgs{pool, rolling})));
}

Result<json> Client::kill_worker(const std::string& pool, std::int32_t pid, int signal) {
  return body_of(call(std::string(ops::KillWorker::kName),
                      ops::encode(ops::KillWorkerArgs{pool, pid, signal})));
}

Result<json> Client::dlq_list(json filter) { return body_of(call("dlq_list", std::move(filter))); }

Result<Reply> Client::dlq_show(std::uint64_t id) { return call("dlq_show", {{"id", id}}); }

Result<json> Client::dlq_replay(json selector) {
  return body_of(call("dlq_replay", std::move(selector)));
}

Result<json> Client::dlq_purge(json selector) {
  return body_of(call("dlq_purge", std::move(selector)));
}

Result<json> Client::dlq_import(std::string lines, const std::string& source,
                                std::uint64_t first_line) {
  return body_of(
      call("dlq_import", {{"source", source}, {"first_line", first_line}}, std::move(lines)));
}

Status Client::events(bool follow, const std::string& pool,
                      std::function<bool(const json&)> on_event) {
  json args{{"follow", follow}};
  if (!pool.empty()) args["pool"] = pool;
  std::promise<Status> done;
  auto fut = done.get_future();
  // stopped: on_event asked to stop, so the `cancelled` reply that follows is the expected end.
  auto stopped = std::make_shared<std::atomic<bool>>(false);
  // The stream's id is needed to cancel it; the first event may arrive before start()
  // returns, so the event callback waits on id_mu until the id is known.
  std::uint64_t id = 0;
  std::mutex id_mu;
  std::unique_lock<std::mutex> id_lock(id_mu);
  auto started = start(
      "events", std::move(args), {},
      [&, stopped](const Reply& e) {
        if (stopped->load() || on_event(e.body)) return;
        stopped->store(true);
        std::lock_guard<std::mutex> lock(id_mu);
        cancel_stream(id);
      },
      [&done, stopped](Result<Reply> r) {
        if (!r && !(stopped->load() && r.status().code() == Code::kCancelled)) {
          return done.set_value(r.status());
        }
        done.set_value(Status::ok());
      });
  if (!started) return started.status();
  id = *started;
  id_lock.unlock();
  return fut.get();
}

Result<json> Client::reload() { return body_of(call("reload")); }

Result<json> Client::shutdown(std::optional<std::chrono::milliseconds> timeout) {
  json args = json::object();
  if (timeout) args["timeout_ms"] = timeout->count();
  return body_of(call("shutdown", std::move(args)));
}

}  // namespace sandpool
