// The typed operations of sandpool::Client: call<Op>() encodes Op's arguments and decodes its
// reply by the one mapping (op_json.hpp), over the wire-level calls of raw_client.hpp
// (docs/protocol.md, "Operations"). call<Op> is instantiated here for every operation of
// ops::AllOps.
#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <thread>
#include <tuple>
#include <utility>

#include <sandpool/base/thread_annotations.hpp>

#include <sandpool/control/client.hpp>
#include <sandpool/control/op_json.hpp>
#include <sandpool/control/wire_errors.hpp>
#include "control/raw_client.hpp"

namespace sandpool {
namespace {

// The reply of `op` decoded into T; a reply that does not decode is the server's fault.
template <class T>
Result<T> decoded(std::string_view op, const nlohmann::json& body) {
  T out;
  if (Status st = ops::decode(body, &out); !st) {
    return Status::protocol(std::string(op) + " reply: " + st.message());
  }
  return out;
}

ops::SubmitArgs submit_args(const SubmitRequest& t, bool wait = false, bool progress = false) {
  ops::SubmitArgs a;
  a.type = t.type;
  a.pool = t.pool;
  a.options = t.options;
  a.delay = t.delay;
  a.wait = wait;
  a.progress = progress;
  a.request_token = t.request_token;
  return a;
}

bool same_options(const SubmitRequest& a, const SubmitRequest& b) {
  return a.type == b.type && a.pool == b.pool && a.options == b.options && a.delay == b.delay;
}

TaskReply task_reply_of(ops::TaskAccount account, std::string result) {
  TaskReply t;
  t.id = account.id;
  t.state = account.state;
  t.reason = account.reason.value_or("");
  t.error = account.error;
  t.result = std::move(result);
  t.account = std::move(account);
  return t;
}

Result<TaskReply> task_reply_of(std::string_view op, Result<Reply> r) {
  if (!r) return r.status();
  auto account = decoded<ops::TaskAccount>(op, r->body);
  if (!account) return account.status();
  return task_reply_of(std::move(account).value(), std::move(r->blob));
}

// The progress events of a waited submit call on_progress; the rest are ignored.
EventFn progress_events(ProgressFn on_progress) {
  if (!on_progress) return {};
  return [fn = std::move(on_progress)](const Reply& e) {
    ops::SubmitEvent event;
    if (ops::decode(e.body, &event) && event.event == "progress") fn(event.id, e.blob);
  };
}

}  // namespace

template <class Op>
Result<typename Op::Reply> Client::call(const typename Op::Args& args) {
  auto r = raw_call(*this, std::string(Op::kName), ops::encode(args));
  if (!r) return r.status();
  return decoded<typename Op::Reply>(Op::kName, r->body);
}

template <class Op>
Result<WithBlob<typename Op::Reply>> Client::call_with_blob(const typename Op::Args& args,
                                                            std::string blob) {
  auto r = raw_call(*this, std::string(Op::kName), ops::encode(args), std::move(blob));
  if (!r) return r.status();
  auto reply = decoded<typename Op::Reply>(Op::kName, r->body);
  if (!reply) return reply.status();
  return WithBlob<typename Op::Reply>{std::move(reply).value(), std::move(r->blob)};
}

template <class Op>
Result<std::uint64_t> Client::call_async(
    const typename Op::Args& args, std::string blob,
    std::function<void(Result<WithBlob<typename Op::Reply>>)> on_done) {
  using Answer = WithBlob<typename Op::Reply>;
  return raw_start(*this, std::string(Op::kName), ops::encode(args), std::move(blob), {},
                   [done = std::move(on_done)](Result<Reply> r) {
                     if (!r) return done(r.status());
                     auto reply = decoded<typename Op::Reply>(Op::kName, r->body);
                     if (!reply) return done(reply.status());
                     done(Answer{std::move(reply).value(), std::move(r->blob)});
                   });
}

namespace {

// Instantiates call<Op>, call_with_blob<Op> and call_async<Op> for every operation, so that the
// header needs neither the mapping nor JSON.
template <class... Ops>
constexpr auto instantiate_calls(ops::OpList<Ops...>) {
  return std::make_tuple(&Client::call<Ops>..., &Client::call_with_blob<Ops>...,
                         &Client::call_async<Ops>...);
}
// `used`: emitted although nothing reads it, so the functions it points to are emitted too.
[[gnu::used]] const auto kTypedCalls = instantiate_calls(ops::AllOps{});

}  // namespace

Result<Submitted> Client::submit(const SubmitRequest& task) {
  auto r = call_with_blob<ops::Submit>(submit_args(task), task.payload);
  if (!r) return r.status();
  return Submitted{r->reply.id, r->reply.existing, Status::ok()};
}

Result<TaskReply> Client::submit_wait(const SubmitRequest& task, ProgressFn on_progress) {
  const bool progress = static_cast<bool>(on_progress);
  auto r = raw_call_streaming(*this, std::string(ops::Submit::kName),
                              ops::encode(submit_args(task, true, progress)), task.payload,
                              progress_events(std::move(on_progress)));
  return task_reply_of(ops::Submit::kName, std::move(r));
}

Result<TaskReply> Client::submit_wait(const SubmitRequest& task, ProgressFn on_progress,
                                      const WaitPolicy& policy) {
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> deadline;
  if (policy.wait_timeout) deadline = Clock::now() + *policy.wait_timeout;
  const bool progress = static_cast<bool>(on_progress);
  auto accepted = std::make_shared<std::atomic<std::uint64_t>>(0);  // the id, once accepted
  EventFn on_event = [accepted, fn = std::move(on_progress)](const Reply& e) {
    ops::SubmitEvent event;
    if (!ops::decode(e.body, &event)) return;
    if (event.event == "accepted") accepted->store(event.id);
    if (event.event == "progress" && fn) fn(event.id, e.blob);
  };
  auto done = std::make_shared<std::promise<Result<Reply>>>();
  std::future<Result<Reply>> reply = done->get_future();
  auto request =
      raw_start(*this, std::string(ops::Submit::kName),
                ops::encode(submit_args(task, true, progress)), task.payload, std::move(on_event),
                [done](Result<Reply> r) { done->set_value(std::move(r)); });
  if (!request) return request.status();
  if (deadline && reply.wait_until(*deadline) == std::future_status::timeout) {
    cancel_stream(*request);  // the task keeps running; only this wait ends
    if (accepted->load() == 0) {
      return Status::error(Code::kTimeout, "the submit was not answered within " +
                                               std::to_string(policy.wait_timeout->count()) +
                                               " ms");
    }
    return wait(accepted->load(), std::chrono::milliseconds(0));
  }
  Result<Reply> r = reply.get();
  if (r || r.status().code() != Code::kUnavailable || accepted->load() == 0) {
    return task_reply_of(ops::Submit::kName, std::move(r));
  }
  // Accepted, then the connection was lost (poold restarting): wait on the id.
  const std::uint64_t id = accepted->load();
  for (;;) {
    const Clock::time_point give_up = Clock::now() + policy.reconnect_for;
    std::chrono::milliseconds pause(100);
    Status st;
    while (!(st = reconnect())) {
      const Clock::time_point now = Clock::now();
      if (st.code() != Code::kUnavailable) return st;
      if (now >= give_up || (deadline && now >= *deadline)) {
        return Status::error(Code::kUnavailable,
                             "lost the connection while waiting for task " + std::to_string(id) +
                                 " and could not connect again: " + st.message());
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(1000));
    }
    std::optional<std::chrono::milliseconds> left;
    if (deadline) {
      left =
          std::max(std::chrono::milliseconds(0),
                   std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()));
    }
    auto t = wait(id, left);
    if (t || t.status().code() != Code::kUnavailable) return t;
  }
}

Status Client::submit_async(const SubmitRequest& task, SubmitDoneFn on_done,
                            ProgressFn on_progress) {
  const bool progress = static_cast<bool>(on_progress);
  auto id = raw_start(*this, std::string(ops::Submit::kName),
                      ops::encode(submit_args(task, true, progress)), task.payload,
                      progress_events(std::move(on_progress)),
                      [done = std::move(on_done)](Result<Reply> r) {
                        done(task_reply_of(ops::Submit::kName, std::move(r)));
                      });
  return id.status();
}

Result<std::vector<Submitted>> Client::submit_batch(const std::vector<SubmitRequest>& tasks,
                                                    const std::string& request_token) {
  // The common case (a load generator, a bulk import) shares every option: then they travel
  // once, in `defaults`, and per task only a payload length (docs/protocol.md).
  const bool shared = std::all_of(tasks.begin(), tasks.end(), [&](const SubmitRequest& t) {
    return same_options(t, tasks.front());
  });
  ops::SubmitBatchArgs args;
  args.request_token = request_token;
  std::size_t total = 0;
  for (const SubmitRequest& t : tasks) total += t.payload.size();
  std::string blob;
  blob.reserve(total);
  if (!shared) args.tasks.emplace();
  for (const SubmitRequest& t : tasks) {
    args.payload_lens.push_back(t.payload.size());
    if (!shared) {
      args.tasks->push_back(submit_args(t));
      args.tasks->back().request_token.clear();  // a batch's token is the batch's
    }
    blob += t.payload;
  }
  if (shared && !tasks.empty()) {
    args.defaults = submit_args(tasks.front());
    args.defaults->request_token.clear();
  }
  auto r = call_with_blob<ops::SubmitBatch>(args, std::move(blob));
  if (!r) return r.status();
  const ops::SubmitBatchReply& reply = r->reply;
  // Tasks from `refused_from.index` on were refused together and have no `ids` entry.
  std::size_t tried = tasks.size();
  Status tail_refusal;
  if (reply.refused_from) {
    if (reply.refused_from->index > tasks.size()) {
      return Status::protocol("submit_batch reply: refused_from needs an index within the batch");
    }
    tried = reply.refused_from->index;
    tail_refusal = control::status_from_wire(reply.refused_from->code, reply.refused_from->message);
  }
  if (reply.ids.size() != tried) {
    return Status::protocol("submit_batch reply does not list one id per task tried");
  }
  std::vector<Submitted> out(tasks.size());
  for (std::size_t i = 0; i < tried; ++i) out[i].id = reply.ids[i];
  for (std::size_t i = tried; i < out.size(); ++i) out[i].status = tail_refusal;
  for (const std::uint64_t index : reply.existing) {
    if (index < out.size()) out[index].existing = true;
  }
  for (const ops::BatchRefusal& e : reply.errors) {
    if (e.index < out.size()) out[e.index].status = control::status_from_wire(e.code, e.message);
  }
  return out;
}

Result<ops::StatusReply> Client::status() { return call<ops::ServerStatus>(); }

Result<ops::WorkersReply> Client::workers(const std::string& pool) {
  return call<ops::Workers>({pool});
}

Result<ops::StatsReply> Client::stats(const std::string& pool) { return call<ops::Stats>({pool}); }

Result<TaskReply> Client::task(std::uint64_t id) {
  auto r = call_with_blob<ops::Task>({id});
  if (!r) return r.status();
  return task_reply_of(std::move(r->reply), std::move(r->blob));
}

Result<TaskReply> Client::wait(std::uint64_t id, std::optional<std::chrono::milliseconds> timeout) {
  // Not bounded by call_timeout: the wait's own timeout bounds it, on the server.
  auto r = raw_call_streaming(*this, std::string(ops::Wait::kName),
                              ops::encode(ops::WaitArgs{id, timeout}), {}, {});
  return task_reply_of(ops::Wait::kName, std::move(r));
}

Result<ops::CancelReply> Client::cancel(std::uint64_t id) { return call<ops::Cancel>({id}); }

Result<ops::PoolStateReply> Client::scale(const std::string& pool, std::uint32_t workers) {
  return call<ops::Scale>({pool, workers});
}

Result<ops::PoolStateReply> Client::strategy(const std::string& pool, const std::string& name) {
  return call<ops::Strategy>({pool, name});
}

Result<ops::PoolStateReply> Client::drain(const std::string& pool) {
  return call<ops::Drain>({pool});
}

Result<ops::PoolStateReply> Client::resume(const std::string& pool) {
  return call<ops::Resume>({pool});
}

Result<ops::PoolStateReply> Client::restart(const std::string& pool, bool rolling) {
  return call<ops::Restart>({pool, rolling});
}

Result<ops::PoolStateReply> Client::kill_worker(const std::string& pool, std::int32_t pid,
                                                int signal) {
  return call<ops::KillWorker>({pool, pid, signal});
}

Result<ops::DlqListReply> Client::dlq_list(const ops::DlqListArgs& args) {
  return call<ops::DlqList>(args);
}

Result<WithBlob<ops::DlqShowReply>> Client::dlq_show(std::uint64_t id) {
  return call_with_blob<ops::DlqShow>({id});
}

Result<ops::DlqReplayReply> Client::dlq_replay(const ops::DlqSelector& selector) {
  return call<ops::DlqReplay>(selector);
}

Result<ops::DlqPurgeReply> Client::dlq_purge(const ops::DlqSelector& selector) {
  return call<ops::DlqPurge>(selector);
}

Result<ops::DlqImportReply> Client::dlq_import(std::string lines, const std::string& source,
                                               std::uint64_t first_line) {
  auto r = call_with_blob<ops::DlqImport>({source, first_line}, std::move(lines));
  if (!r) return r.status();
  return std::move(r->reply);
}

Status Client::events(bool follow, const std::string& pool, PoolEventFn on_event) {
  std::promise<Status> done;
  auto fut = done.get_future();
  // stopped: on_event asked to stop (or the stream sent a record that does not decode:
  // `broken` says why), so the `cancelled` reply that follows is the expected end.
  auto stopped = std::make_shared<std::atomic<bool>>(false);
  auto broken = std::make_shared<Status>();
  // The stream's id is needed to cancel it; the first event may arrive before raw_start()
  // returns, so the event callback waits on its mutex until the id is known.
  struct StreamId {
    Mutex mu;
    std::uint64_t value GUARDED_BY(mu) = 0;
  } id;
  MutexLock id_lock(id.mu);
  auto started = raw_start(
      *this, std::string(ops::Events::kName), ops::encode(ops::EventsArgs{pool, follow}), {},
      [&, stopped, broken](const Reply& e) {
        if (stopped->load()) return;
        ops::PoolEventRecord event;
        if (Status st = ops::decode(e.body, &event); !st) {
          *broken = Status::protocol("events: " + st.message());
        } else if (on_event(event)) {
          return;
        }
        stopped->store(true);
        MutexLock lock(id.mu);
        cancel_stream(id.value);
      },
      [&done, stopped, broken](Result<Reply> r) {
        if (!broken->is_ok()) return done.set_value(*broken);
        if (!r && !(stopped->load() && r.status().code() == Code::kCancelled)) {
          return done.set_value(r.status());
        }
        done.set_value(Status::ok());
      });
  if (!started) return started.status();
  id.value = *started;
  id_lock.unlock();
  return fut.get();
}

Result<ops::ReloadReply> Client::reload() { return call<ops::Reload>(); }

Result<ops::ShutdownReply> Client::shutdown(std::optional<std::chrono::milliseconds> timeout) {
  return call<ops::Shutdown>({timeout});
}

}  // namespace sandpool
