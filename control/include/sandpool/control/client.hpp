// The C++ client of poold's control protocol (docs/protocol.md, "Control protocol").
// One connection, pipelined: any number of requests outstanding; replies may come out of
// order. Thread-safety: every method may be called from any thread. Callbacks run on the
// client's reader thread: they must not call the synchronous methods (that would wait on
// the very thread that delivers the reply) nor destroy the client; async calls are fine.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/control/control_ops.hpp>

namespace sandpool {

namespace control {
struct RawAccess;  // the wire-level calls (control/src/control/raw_client.hpp, not public)
}

struct ClientOptions {
  std::string name = "sandpool-client";  // sent in the hello
  std::size_t max_frame = (16u << 20) + 65536;
  // How long connect() waits for the server to answer the hello (a hung or overloaded
  // service); then Code::kTimeout. Zero: no limit.
  std::chrono::milliseconds hello_timeout{10000};
  // How long call() and the operations built on it (every typed call except submit_wait,
  // wait and events, which wait for a task or a stream) wait for the final reply; then
  // Code::kTimeout, the request is cancelled on the server and its late reply dropped. The
  // connection stays usable. Zero: no limit (the default: reload and dead-letter
  // operations may take long).
  std::chrono::milliseconds call_timeout{0};
};

// A typed reply and the bytes that travelled with it (a task's result, a letter's payload).
template <class R>
struct WithBlob {
  R reply;
  std::string blob;
};

struct SubmitRequest {
  std::string type;
  std::string payload;  // raw bytes
  std::string pool;     // empty: route by type
  // The task's options, sent as ops::SubmitArgs::options says (idempotency_key: a resubmit
  // with the same key returns the existing task; not_before: scheduled, docs/protocol.md).
  TaskOptions options;
  // Scheduled: not queued before `delay` has passed since the submit; at most one of delay
  // and options.not_before.
  std::optional<std::chrono::milliseconds> delay;
  // submit: this request's name, sent again unchanged on a retry (ops::SubmitArgs); a retry
  // after a `timeout` whose outcome is unknown (a Redis pool's submit whose reply was lost)
  // then gets the task the first try made.
  std::string request_token;
};

struct Submitted {
  std::uint64_t id = 0;
  bool existing = false;  // the idempotency key matched an earlier task
  Status status;          // submit_batch only: why this task was refused (ok: accepted)
};

// A task's final (or current) account; strings use the task vocabulary of <sandpool/task/task.hpp>.
struct TaskReply {
  std::uint64_t id = 0;
  std::string state;   // "completed", "dead_lettered", "cancelled", ...
  std::string reason;  // dead-letter or cancel reason, "" when none
  std::string error;
  std::string result;        // raw bytes, for completed
  ops::TaskAccount account;  // the whole account (attempts, history, ...)
};

using ProgressFn = std::function<void(std::uint64_t task_id, const std::string& progress)>;
using SubmitDoneFn = std::function<void(Result<TaskReply>)>;
using PoolEventFn = std::function<bool(const ops::PoolEventRecord& event)>;

// Error mapping: connect failures and a lost connection are Code::kUnavailable (poolctl
// exits 3); no answer within hello_timeout / call_timeout is Code::kTimeout; a server error
// reply maps its code (docs/protocol.md) to the nearest Code and keeps the server's
// message; error_code_of() recovers the wire code.
class Client {
 public:
  static Result<Client> connect(const std::string& socket_path, ClientOptions options = {});
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  ~Client();  // closes the connection; pending callbacks get kUnavailable

  std::string rights() const;  // "read" or "admin", as the server's hello said

  // Any operation of <sandpool/control/control_ops.hpp>, typed: sends Op's arguments, waits for its
  // final reply (at most call_timeout; event frames are dropped) and decodes it, e.g.
  // `client.call<ops::Scale>({"images", 4})`. A reply that does not decode: kProtocol.
  template <class Op>
  Result<typename Op::Reply> call(const typename Op::Args& args = {});
  // The same, with a request blob (dlq_import's lines) and the reply's (a result, a payload).
  template <class Op>
  Result<WithBlob<typename Op::Reply>> call_with_blob(const typename Op::Args& args,
                                                      std::string blob = {});
  // Async: sends the request and returns its id (or the error that kept it from being sent);
  // on_done gets the decoded reply and its blob once, on the reader thread.
  template <class Op>
  Result<std::uint64_t> call_async(
      const typename Op::Args& args, std::string blob,
      std::function<void(Result<WithBlob<typename Op::Reply>>)> on_done);
  // Ends a streaming request started at the wire's level (raw_client.hpp); its on_done then
  // gets `cancelled`.
  void cancel_stream(std::uint64_t request_id);

  // The operations by name, each a call<Op> (or, for the waits, a stream of events first).
  Result<Submitted> submit(const SubmitRequest& task);
  Result<TaskReply> submit_wait(const SubmitRequest& task, ProgressFn on_progress = {});
  Status submit_async(const SubmitRequest& task, SubmitDoneFn on_done,
                      ProgressFn on_progress = {});  // on_done gets the final account
  // `request_token` (not the tasks' own): the batch's, as SubmitRequest::request_token.
  Result<std::vector<Submitted>> submit_batch(const std::vector<SubmitRequest>& tasks,
                                              const std::string& request_token = {});

  Result<ops::StatusReply> status();
  Result<ops::WorkersReply> workers(const std::string& pool = {});
  Result<ops::StatsReply> stats(const std::string& pool = {});
  Result<TaskReply> task(std::uint64_t id);
  // submit_wait that survives a restart of poold (docs/journal.md, "Clients reconnect"):
  // once the task was accepted (its id known), a lost connection is followed by new
  // connections to the same socket (reconnect(), every 100 ms to 1 s, for up to
  // `policy.reconnect_for` each time) and a `wait` on the id, until the task ends.
  // `policy.wait_timeout` bounds the whole wait: when it passes first, the task's account as
  // it is (state not terminal; the task keeps running). A lost connection before the task
  // was accepted is kUnavailable (it was not acknowledged: submit it again, with an
  // idempotency key to make that safe). Progress reaches on_progress until a reconnect.
  struct WaitPolicy {
    std::optional<std::chrono::milliseconds> wait_timeout;  // none: until the task ends
    std::chrono::milliseconds reconnect_for{60000};
  };
  Result<TaskReply> submit_wait(const SubmitRequest& task, ProgressFn on_progress,
                                const WaitPolicy& policy);
  // Replaces the connection by a new one to the same socket, with the same options; calls
  // still pending on the old one get kUnavailable.
  Status reconnect();
  // The task's account once it ends, or as it is (state not terminal) when `timeout` passes
  // first (none: until it ends). Not bounded by call_timeout. Like task(), a `read` peer
  // gets no result bytes. A lost connection: kUnavailable (wait again on a new one).
  Result<TaskReply> wait(std::uint64_t id, std::optional<std::chrono::milliseconds> timeout = {});
  Result<ops::CancelReply> cancel(std::uint64_t id);
  Result<ops::PoolStateReply> scale(const std::string& pool, std::uint32_t workers);
  Result<ops::PoolStateReply> strategy(const std::string& pool, const std::string& name);
  Result<ops::PoolStateReply> drain(const std::string& pool);
  Result<ops::PoolStateReply> resume(const std::string& pool);
  Result<ops::PoolStateReply> restart(const std::string& pool, bool rolling);
  Result<ops::PoolStateReply> kill_worker(const std::string& pool, std::int32_t pid, int signal);
  Result<ops::DlqListReply> dlq_list(const ops::DlqListArgs& args = {});
  Result<WithBlob<ops::DlqShowReply>> dlq_show(std::uint64_t id);  // blob: the payload
  Result<ops::DlqReplayReply> dlq_replay(const ops::DlqSelector& selector);
  Result<ops::DlqPurgeReply> dlq_purge(const ops::DlqSelector& selector);
  // Loads spill-file lines (JSON lines, whole ones) into the store. source and first_line
  // name the lines in a parse error.
  Result<ops::DlqImportReply> dlq_import(std::string lines, const std::string& source,
                                         std::uint64_t first_line = 1);
  // Blocks: on_event per event until the stream ends or on_event returns false (then the
  // stream is cancelled and this returns ok). follow=false: the recent events, then ends.
  Status events(bool follow, const std::string& pool, PoolEventFn on_event);
  Result<ops::ReloadReply> reload();
  Result<ops::ShutdownReply> shutdown(std::optional<std::chrono::milliseconds> timeout = {});

  class Impl;

 private:
  friend struct control::RawAccess;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::string socket_path_;  // what connect() was given: reconnect() uses it again
};

// The wire error code a failed call carried ("forbidden", "busy", ...): the message of a
// server error Status starts with "<code>: ".
std::string error_code_of(const Status& status);

}  // namespace sandpool
