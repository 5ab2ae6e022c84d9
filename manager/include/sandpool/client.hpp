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

#include <nlohmann/json.hpp>
#include <sandpool/status.hpp>

namespace sandpool {

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

struct Reply {
  nlohmann::json body;  // an object
  std::string blob;     // raw bytes (a task's result), may be empty
};

struct SubmitRequest {
  std::string type;
  std::string payload;  // raw bytes
  std::string pool;     // empty: route by type
  std::int32_t priority = 0;
  std::optional<std::chrono::milliseconds> timeout;
  std::optional<std::uint32_t> retries;
  std::string key;              // affinity key
  std::string idempotency_key;  // a resubmit with the same key returns the existing task
};

struct Submitted {
  std::uint64_t id = 0;
  bool existing = false;  // the idempotency key matched an earlier task
  Status status;          // submit_batch only: why this task was refused (ok: accepted)
};

// A task's final (or current) account; strings use the task vocabulary of <sandpool/task.hpp>.
struct TaskReply {
  std::uint64_t id = 0;
  std::string state;   // "completed", "dead_lettered", "cancelled", ...
  std::string reason;  // dead-letter or cancel reason, "" when none
  std::string error;
  std::string result;   // raw bytes, for completed
  nlohmann::json body;  // the whole reply (attempts, history, ...)
};

using ProgressFn = std::function<void(std::uint64_t task_id, const std::string& progress)>;
using SubmitDoneFn = std::function<void(Result<TaskReply>)>;
using EventFn = std::function<void(const Reply& event)>;
using ReplyFn = std::function<void(Result<Reply>)>;

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

  const nlohmann::json& server_hello() const;  // {"version","server","rights",...}
  std::string rights() const;                  // "read" or "admin"

  // Any operation: sends op/args/blob, waits for the final reply (at most call_timeout);
  // events are dropped.
  Result<Reply> call(const std::string& op, nlohmann::json args = nlohmann::json::object(),
                     std::string blob = {});
  // Like call(), with on_event for each event frame before the final reply; no time limit.
  Result<Reply> call_streaming(const std::string& op, nlohmann::json args, std::string blob,
                               EventFn on_event);
  // Async and streaming: on_event for each event frame, then on_done once. Returns the
  // request id (for cancel_stream) or the error that kept it from being sent.
  Result<std::uint64_t> start(const std::string& op, nlohmann::json args, std::string blob,
                              EventFn on_event, ReplyFn on_done);
  void cancel_stream(std::uint64_t request_id);  // on_done then gets `cancelled`

  Result<Submitted> submit(const SubmitRequest& task);
  Result<TaskReply> submit_wait(const SubmitRequest& task, ProgressFn on_progress = {});
  Status submit_async(const SubmitRequest& task, SubmitDoneFn on_done,
                      ProgressFn on_progress = {});  // on_done gets the final account
  Result<std::vector<Submitted>> submit_batch(const std::vector<SubmitRequest>& tasks);

  Result<nlohmann::json> status();
  Result<nlohmann::json> workers(const std::string& pool = {});
  Result<nlohmann::json> stats(const std::string& pool = {});
  Result<TaskReply> task(std::uint64_t id);
  // The task's account once it ends, or as it is (state not terminal) when `timeout` passes
  // first (none: until it ends). Not bounded by call_timeout. Like task(), a `read` peer
  // gets no result bytes. A lost connection: kUnavailable (wait again on a new one).
  Result<TaskReply> wait(std::uint64_t id, std::optional<std::chrono::milliseconds> timeout = {});
  Result<nlohmann::json> cancel(std::uint64_t id);
  Result<nlohmann::json> scale(const std::string& pool, std::uint32_t workers);
  Result<nlohmann::json> strategy(const std::string& pool, const std::string& name);
  Result<nlohmann::json> drain(const std::string& pool);
  Result<nlohmann::json> resume(const std::string& pool);
  Result<nlohmann::json> restart(const std::string& pool, bool rolling);
  Result<nlohmann::json> kill_worker(const std::string& pool, std::int32_t pid, int signal);
  // filter: {"pool","type","reason","since_ms","until_ms","cursor","limit"} (all optional)
  Result<nlohmann::json> dlq_list(nlohmann::json filter = nlohmann::json::object());
  Result<Reply> dlq_show(std::uint64_t id);  // blob: the payload
  // selector: {"id"} | {"filter":{...}} | {"all":true}; purge also {"older_than_ms"}
  Result<nlohmann::json> dlq_replay(nlohmann::json selector);
  Result<nlohmann::json> dlq_purge(nlohmann::json selector);
  // Loads spill-file lines (JSON lines, whole ones) into the store: {"imported",
  // "already_present"}. source and first_line name the lines in a parse error.
  Result<nlohmann::json> dlq_import(std::string lines, const std::string& source,
                                    std::uint64_t first_line = 1);
  // Blocks: on_event per event until the stream ends or on_event returns false (then the
  // stream is cancelled and this returns ok). follow=false: the recent events, then ends.
  Status events(bool follow, const std::string& pool,
                std::function<bool(const nlohmann::json&)> on_event);
  Result<nlohmann::json> reload();
  Result<nlohmann::json> shutdown(std::optional<std::chrono::milliseconds> timeout = {});

  class Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The wire error code a failed call carried ("forbidden", "busy", ...): the message of a
// server error Status starts with "<code>: ".
std::string error_code_of(const Status& status);

}  // namespace sandpool
