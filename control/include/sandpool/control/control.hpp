// The server side of the control protocol (docs/protocol.md, "Control protocol"): a Unix
// socket, peer credentials checked against an allow-list, framed requests dispatched to a
// ControlHandler that poold implements. ControlServer runs its own epoll thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sandpool/base/status.hpp>
#include <sandpool/control/rights.hpp>

namespace sandpool {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;  // the peer's primary gid (SO_PEERCRED)
};

struct AccessGrant {
  enum class Kind : std::uint8_t { kUid, kGid } kind = Kind::kUid;
  std::uint32_t id = 0;
  Rights rights = Rights::kRead;
};

// Who may do what. A uid grant wins over gid grants; among gid grants the highest applies.
struct AccessPolicy {
  std::vector<AccessGrant> grants;
  bool root_is_admin = true;  // uid 0
  bool self_is_admin = true;  // the server's own effective uid
};
// Pure: the rights `peer` gets under `policy` when the server runs as `server_uid`.
Rights rights_for(const PeerCredentials& peer, const AccessPolicy& policy, uid_t server_uid);

struct ControlServerOptions {
  std::string path;                      // socket path; a stale socket file is replaced
  std::uint32_t mode = 0660;             // applied before listen()
  gid_t group = static_cast<gid_t>(-1);  // chown'd to this group when set
  AccessPolicy access;
  std::string server_name = "poold";
  std::size_t max_connections = 64;
  // Of max_connections, this many are kept for peers with admin rights: the others may
  // hold at most max_connections - admin_reserved_connections together, and each of their
  // uids at most max_connections_per_uid. Admins are bounded by max_connections only.
  std::size_t admin_reserved_connections = 8;
  std::size_t max_connections_per_uid = 16;  // peers without admin rights
  // Streams (requests ControlServer::is_stream names: `events`) open at once, per
  // connection and per uid, whatever the peer's rights; over either: that request gets
  // `busy`. They bound the events hub's subscribers whoever connects.
  std::size_t max_streams_per_connection = 4;
  std::size_t max_streams_per_uid = 16;
  std::size_t max_outstanding = 4096;           // per connection; over it: `busy`
  std::size_t max_output_bytes = 64u << 20;     // per connection; over it: disconnect
  std::size_t max_frame = (16u << 20) + 65536;  // body bytes after the length field
  // A connection that has not sent its hello this long after it was accepted gets a
  // `timeout` error and is closed (it would hold a connection slot forever). Zero: no limit.
  std::chrono::milliseconds hello_timeout{10000};
  // A connection past its hello with no open request, no reply left to write and nothing
  // received for this long gets a `timeout` error and is closed (an open stream is not
  // idle). Zero: no limit.
  std::chrono::milliseconds idle_timeout{60000};
  // The server thread's nice value (setpriority on the thread alone; 0: left as is). Below
  // zero, it gets the CPU ahead of the data path when both want it, so `status` answers in
  // milliseconds while batches saturate the host. Needs root or CAP_SYS_NICE; without it the
  // thread keeps the process's value (logged at debug level).
  int thread_nice = 0;
};

// One request as the handler sees it. The server already checked `rights` against
// ControlServer::required_rights(op): the handler only sees requests the peer may make.
struct Request {
  std::uint64_t id = 0;
  std::string op;
  nlohmann::json args;  // always an object
  std::string blob;     // raw bytes (a task payload), may be empty
  Rights rights = Rights::kNone;
  PeerCredentials peer;
  std::string client_name;
};

// Where the frames of a request made in-process go (poold's HTTP API, which dispatches
// through the same ControlHandler as the socket): a Responder made by local_request() hands
// each frame to its sink instead of a connection. take() may run on any thread, never twice
// at once for one request, and is not called again after a final frame.
class ReplySink {
 public:
  enum class Kind : std::uint8_t { kEvent, kOk, kError };
  virtual ~ReplySink() = default;
  // One frame. `body` is the frame's JSON text as the socket would carry it: for kError,
  // {"message": ...} with the wire code in `code` (empty otherwise). Returns true iff taken.
  virtual bool take(Kind kind, std::string_view code, std::string body, std::string blob) = 0;
  // Bytes taken and not yet passed on to the requester (Responder::queued_output()).
  virtual std::size_t queued_output() const = 0;
  // False while the requester can take no more event frames (Responder::wants_events()).
  virtual bool accepting_events() const { return true; }
};

// The handle through which one request is answered: any number of events, then exactly one
// final ok or error. Thread-safe; copies share one state. Calls after the final reply, after
// the client cancelled, or after the connection or server went away are no-ops (they
// return false). If every copy is destroyed without a final reply, the client gets an
// `internal` error so it never waits forever.
class Responder {
 public:
  struct State;
  explicit Responder(std::shared_ptr<State> state);
  bool event(nlohmann::json body, std::string blob = {}) const;
  bool ok(nlohmann::json body = nlohmann::json::object(), std::string blob = {}) const;
  bool error(std::string_view code, std::string message) const;  // code: docs vocabulary
  bool error(const Status& status) const;                        // maps Code to the wire vocabulary
  // True until the final reply was sent, the client cancelled or the connection closed.
  bool is_open() const;
  // Bytes queued for this request's connection that the socket has not taken yet (every
  // request's replies and events); 0 once the connection is gone. For a producer that
  // would rather coalesce than queue behind a slow reader.
  std::size_t queued_output() const;
  // False while an event sent now would be dropped: an in-process requester's queue of event
  // frames is full (ReplySink::accepting_events(); the HTTP API's streams show a bounded rate).
  // A producer may then count the event as missed instead of building it. Always true for a
  // socket request, whose output is bounded by max_output_bytes instead.
  bool wants_events() const;
  // Runs `fn` once when the client cancels this stream or the connection closes (on the
  // server thread, or right away on the caller's if that already happened). Not after a
  // final reply. Use it to stop a follow stream.
  void on_cancel(std::function<void()> fn) const;

 private:
  std::shared_ptr<State> state_;
};

// A request made in-process: the Responder to hand the ControlHandler with it, and what
// the requester calls when it goes away before the final reply (the stream's on_cancel
// runs; later frames are dropped). If every copy of the Responder is dropped unanswered,
// the sink gets an `internal` error, as a socket client would.
struct LocalRequest {
  Responder responder;
  std::function<void()> abandon;
};
LocalRequest local_request(std::shared_ptr<ReplySink> sink);

// Implemented by poold. handle() runs on the server thread: it must not block; long work
// replies later through the Responder from any thread. Exceptions it throws become an
// `internal` error reply.
class ControlHandler {
 public:
  virtual ~ControlHandler() = default;
  virtual void handle(Request request, Responder responder) = 0;
};

// Owns the listening socket, its connections and its thread. The handler must outlive the
// server. Destruction (or stop()) closes every connection, cancels open streams and
// unlinks the socket; Responders that outlive it are harmless no-ops.
class ControlServer {
 public:
  // Fails when `path` is taken by a live server or by something that is not a socket.
  static Result<std::unique_ptr<ControlServer>> start(ControlServerOptions options,
                                                      ControlHandler& handler);
  ~ControlServer();  // must not run on the server thread (inside handle())
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;
  // Idempotent, any thread. From inside handle() it only asks the loop to end; replies
  // queued by then are written if the socket takes them at once.
  void stop();
  const std::string& path() const;
  std::size_t connection_count() const;  // thread-safe
  // How long the server thread has been handling what its last wake-up brought (ns); 0
  // while it waits. Thread-safe: for a watchdog (poold's WatchdogGate).
  std::int64_t busy_for_ns() const;

  // True iff `op` is one of the protocol's operations (ops::kOps in
  // <sandpool/control/control_ops.hpp>); the server itself answers any other op with `unknown_op`,
  // so the handler only sees these.
  static bool known_op(std::string_view op);
  // The rights an op needs (its row of ops::kOps): kRead for status, workers, stats, events,
  // task and wait; kAdmin otherwise (unknown ops too).
  static Rights required_rights(std::string_view op);
  // True iff `op` opens a stream that counts against max_streams_per_connection and
  // max_streams_per_uid while open (its row of ops::kOps): `events`.
  static bool is_stream(std::string_view op);

  class Impl;

 private:
  explicit ControlServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sandpool
