// redis::Connection (redis_client.hpp) over hiredis's blocking API.
#include <sandpool/redis/redis_client.hpp>

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <charconv>
#include <utility>

namespace sandpool::redis {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000),
                 static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

// hiredis's reader builds our Reply values as it parses (redisReplyObjectFunctions), rather
// than its own redisReply objects that would then be copied and freed: the root is allocated,
// each element is built in place in its parent's `elements` (sized by createArray before any
// element comes). The reader frees only a root (freeObject: a reply cut short by an error).
Reply* place(const redisReadTask* task) {
  if (task->parent == nullptr) return new Reply();
  auto* parent = static_cast<Reply*>(task->parent->obj);
  return &parent->elements[static_cast<std::size_t>(task->idx)];
}

void* build_string(const redisReadTask* task, char* str, std::size_t len) {
  Reply* r = place(task);
  r->type = task->type == REDIS_REPLY_STATUS  ? Reply::Type::kStatus
            : task->type == REDIS_REPLY_ERROR ? Reply::Type::kError
                                              : Reply::Type::kString;
  r->str.assign(str, len);
  return r;
}

void* build_array(const redisReadTask* task, int elements) {
  Reply* r = place(task);
  r->type = Reply::Type::kArray;
  r->elements.resize(static_cast<std::size_t>(std::max(0, elements)));
  return r;
}

void* build_integer(const redisReadTask* task, long long value) {  // NOLINT(google-runtime-int)
  Reply* r = place(task);
  r->type = Reply::Type::kInteger;
  r->integer = value;
  return r;
}

void* build_nil(const redisReadTask* task) { return place(task); }

void free_reply(void* root) { delete static_cast<Reply*>(root); }

redisReplyObjectFunctions kReplyBuilders = {build_string, build_array, build_integer, build_nil,
                                            free_reply};

// A command's arguments as hiredis takes them: pointers and lengths, binary-safe.
struct Argv {
  std::vector<const char*> ptrs;
  std::vector<std::size_t> lens;
  template <typename Args>
  explicit Argv(const Args& args) {
    for (const auto& a : args) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
  }
  int count() const { return static_cast<int>(ptrs.size()); }
};

// hiredis writes with write(2), so a server that went away raises SIGPIPE, which would end
// poold (it ignores no signal: its own sockets send with MSG_NOSIGNAL). While a guard lives,
// SIGPIPE is blocked on this thread; one raised meanwhile is taken off before it is unblocked,
// and the call sees EPIPE.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    sigset_t pending;
    sigemptyset(&pending);
    if (!was_pending_ && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{0, 0};
      (void)sigtimedwait(&pipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_{}, old_{};
  bool was_pending_ = false;
};

}  // namespace

Result<Endpoint> Endpoint::parse(std::string_view address) {
  Endpoint e;
  if (address.substr(0, 5) == "unix:") {
    e.unix_path = std::string(address.substr(5));
    if (e.unix_path.empty() || e.unix_path.front() != '/') {
      return Status::invalid("redis address '" + std::string(address) +
                             "': a unix socket needs an absolute path (unix:/run/redis.sock)");
    }
    return e;
  }
  const std::size_t colon = address.rfind(':');
  e.host = std::string(address.substr(0, colon));
  if (colon != std::string_view::npos) {
    const std::string_view port = address.substr(colon + 1);
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), e.port);
    if (ec != std::errc() || end != port.data() + port.size() || e.port < 1 || e.port > 65535) {
      return Status::invalid("redis address '" + std::string(address) +
                             "': the port is not a number from 1 to 65535");
    }
  }
  if (e.host.empty()) {
    return Status::invalid("redis address '" + std::string(address) +
                           "': expected host:port or unix:/path");
  }
  return e;
}

std::string Endpoint::describe() const {
  return unix_path.empty() ? host + ":" + std::to_string(port) : "unix:" + unix_path;
}

Status Reply::status() const {
  if (type != Type::kError) return Status::ok();
  // A server still loading its data, or busy in a script, answers again soon.
  const bool passing = str.rfind("LOADING", 0) == 0 || str.rfind("BUSY", 0) == 0;
  return Status::error(passing ? Code::kUnavailable : Code::kInternal, "redis: " + str);
}

void Connection::Free::operator()(redisContext* c) const { redisFree(c); }

Connection::Connection(Endpoint endpoint, redisContext* c)
    : endpoint_(std::move(endpoint)), ctx_(c) {}
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

Result<Connection> Connection::open(const Endpoint& endpoint) {
  const timeval tv = to_timeval(endpoint.timeout);
  redisContext* c = endpoint.unix_path.empty()
                        ? redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, tv)
                        : redisConnectUnixWithTimeout(endpoint.unix_path.c_str(), tv);
  if (c == nullptr) {
    return Status::error(Code::kUnavailable,
                         "redis " + endpoint.describe() + ": cannot allocate a connection");
  }
  Connection conn(endpoint, c);
  if (c->err != 0) return conn.failure("connect");
  c->reader->fn = &kReplyBuilders;  // replies come back as Reply values (read())
  if (redisSetTimeout(c, tv) != REDIS_OK) return conn.failure("set timeout");
  if (!endpoint.password.empty()) {
    auto r = conn.command({"AUTH", endpoint.password});
    if (!r) return r.status();
    if (r->is_error()) {
      return Status::error(Code::kPermissionDenied,
                           "redis " + endpoint.describe() + ": AUTH refused: " + r->str);
    }
  }
  if (endpoint.db != 0) {
    auto r = conn.command({"SELECT", std::to_string(endpoint.db)});
    if (!r) return r.status();
    if (r->is_error()) {
      return Status::invalid("redis " + endpoint.describe() + ": SELECT " +
                             std::to_string(endpoint.db) + ": " + r->str);
    }
  }
  return conn;
}

Status Connection::failure(const char* what) {
  broken_ = true;
  write_failed_ = false;
  const std::string why = ctx_ && ctx_->err != 0 ? ctx_->errstr : "connection lost";
  return Status::error(Code::kUnavailable,
                       "redis " + endpoint_.describe() + ": " + what + ": " + why);
}

Result<Reply> Connection::send(int argc, const char** argv, const std::size_t* lens) {
  SP_RETURN_IF_ERROR(append_argv(argc, argv, lens));
  return read();
}

Status Connection::flush() {
  // Written here rather than by redisGetReply, so that a failure says whether the commands
  // went out: a write that fails leaves a command cut short, which Redis never runs.
  for (int done = 0; done == 0;) {
    if (redisBufferWrite(ctx_.get(), &done) != REDIS_OK) {
      Status s = failure("write");
      write_failed_ = true;
      return s;
    }
  }
  return Status::ok();
}

Result<Reply> Connection::command(std::initializer_list<std::string_view> args) {
  Argv a(args);
  return send(a.count(), a.ptrs.data(), a.lens.data());
}

Result<Reply> Connection::command(const std::vector<std::string>& args) {
  Argv a(args);
  return send(a.count(), a.ptrs.data(), a.lens.data());
}

Status Connection::append_argv(int argc, const char** argv, const std::size_t* lens) {
  if (broken_)
    return Status::error(Code::kUnavailable, "redis " + endpoint_.describe() + ": broken");
  if (redisAppendCommandArgv(ctx_.get(), argc, argv, lens) != REDIS_OK) return failure("append");
  unsent_ = true;
  return Status::ok();
}

Status Connection::append(const std::vector<std::string>& args) {
  Argv a(args);
  return append_argv(a.count(), a.ptrs.data(), a.lens.data());
}

Result<Reply> Connection::read() {
  if (broken_)
    return Status::error(Code::kUnavailable, "redis " + endpoint_.describe() + ": broken");
  void* raw = nullptr;
  if (unsent_) {  // the first read writes what append() buffered
    // Guarded only then: the guard costs four system calls, and a pipeline of N commands
    // reads N replies after one write.
    const SigpipeGuard guard;
    SP_RETURN_IF_ERROR(flush());
    unsent_ = false;
  }
  // With nothing left to write, redisGetReply() only reads: no SIGPIPE can come of it.
  if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr) return failure("read reply");
  const std::unique_ptr<Reply> r(static_cast<Reply*>(raw));  // built by kReplyBuilders
  return std::move(*r);
}

Result<std::string> Connection::sha_of(const Script& script) {
  if (auto known = shas_.find(script.source); known != shas_.end()) return known->second;
  auto loaded = command({"SCRIPT", "LOAD", script.source});
  if (!loaded) return loaded.status();
  if (loaded->is_error()) {
    return Status::error(Code::kInternal,
                         "redis: script " + script.name + " does not load: " + loaded->str);
  }
  shas_.emplace(script.source, loaded->str);
  return loaded->str;
}

Result<std::string> Connection::load(const Script& script) { return sha_of(script); }

namespace {

// EVALSHA's arguments, viewing the caller's strings (no copy: a batch's payloads and results
// are large): the SHA-1, the count of keys, the keys, the arguments.
struct EvalshaArgv {
  std::string nkeys;
  std::vector<const char*> ptrs;
  std::vector<std::size_t> lens;
  EvalshaArgv(const std::string& sha, const std::vector<std::string>& keys,
              const std::vector<std::string>& args)
      : nkeys(std::to_string(keys.size())) {
    const std::size_t n = 3 + keys.size() + args.size();
    ptrs.reserve(n);
    lens.reserve(n);
    push("EVALSHA");
    push(sha);
    push(nkeys);
    for (const std::string& k : keys) push(k);
    for (const std::string& a : args) push(a);
  }
  void push(std::string_view v) {
    ptrs.push_back(v.data());
    lens.push_back(v.size());
  }
  int count() const { return static_cast<int>(ptrs.size()); }
};

bool lost_script(const Reply& r) { return r.is_error() && r.str.rfind("NOSCRIPT", 0) == 0; }

}  // namespace

Result<Reply> Connection::eval(const Script& script, const std::vector<std::string>& keys,
                               const std::vector<std::string>& args) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto sha = sha_of(script);
    if (!sha) return sha.status();
    EvalshaArgv a(*sha, keys, args);
    auto r = send(a.count(), a.ptrs.data(), a.lens.data());
    if (!r) return r.status();
    if (!lost_script(*r)) return r;
    shas_.erase(script.source);  // the server lost it (a restart, SCRIPT FLUSH): load it again
  }
  return Status::error(Code::kInternal, "redis: script " + script.name + " keeps vanishing");
}

Result<std::vector<Reply>> Connection::eval_many(const Script& script,
                                                 const std::vector<Call>& calls) {
  std::vector<Reply> out(calls.size());
  std::vector<std::size_t> todo(calls.size());
  for (std::size_t i = 0; i < calls.size(); ++i) todo[i] = i;
  for (int attempt = 0; attempt < 2 && !todo.empty(); ++attempt) {
    auto sha = sha_of(script);
    if (!sha) return sha.status();
    for (std::size_t i : todo) {
      EvalshaArgv a(*sha, calls[i].keys, calls[i].args);
      SP_RETURN_IF_ERROR(append_argv(a.count(), a.ptrs.data(), a.lens.data()));
    }
    std::vector<std::size_t> again;
    for (std::size_t i : todo) {
      auto r = read();
      if (!r) return r.status();
      if (lost_script(*r)) {
        again.push_back(i);
      } else {
        out[i] = std::move(r).value();
      }
    }
    if (!again.empty()) shas_.erase(script.source);
    todo = std::move(again);
  }
  if (!todo.empty()) {
    return Status::error(Code::kInternal, "redis: script " + script.name + " keeps vanishing");
  }
  return out;
}

}  // namespace sandpool::redis
