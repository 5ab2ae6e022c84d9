// A connection to a Redis server for the Redis pools (docs/architecture.md, "Redis pools";
// issue 15): hiredis underneath, but no hiredis type in the interface. Commands are binary
// safe (each argument is sent with its length), replies are copied into values, and a Lua
// script is run by its SHA-1 once loaded, loaded again when the server lost it (a restart).
//
// Failures: a connection that cannot be opened, or breaks during a command (the server went
// away, a timeout), answers kUnavailable naming the server; the connection is then broken for
// good (broken() says so) and the caller opens another. An error reply of the server (a
// wrong type, a script's own error) is not a failure of the call: it is a Reply of type
// kError, whose status() the caller may take.
//
// Thread-safety: none; one owner at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <sandpool/base/status.hpp>

struct redisContext;

namespace sandpool::redis {

// Where the server is and how to log in.
struct Endpoint {
  std::string unix_path;  // set: a unix socket (then host is unused)
  std::string host;
  int port = 6379;
  std::string password;  // empty: no AUTH (read from service.redis.password_file, never YAML)
  int db = 0;            // SELECT, when not 0
  std::chrono::milliseconds timeout{2000};  // connecting, and each reply

  // "unix:/path/to/redis.sock" or "host:port" (port 6379 when missing).
  static Result<Endpoint> parse(std::string_view address);
  std::string describe() const;  // "unix:/path" or "host:port"
};

// One reply, as a value.
struct Reply {
  enum class Type : std::uint8_t { kNil, kInteger, kString, kStatus, kError, kArray };
  Type type = Type::kNil;
  std::int64_t integer = 0;     // kInteger
  std::string str;              // kString, kStatus, kError
  std::vector<Reply> elements;  // kArray

  bool is_nil() const { return type == Type::kNil; }
  bool is_error() const { return type == Type::kError; }
  // kError: kInternal with the server's text (kUnavailable for LOADING and BUSY, which pass);
  // else ok.
  Status status() const;
};

// A Lua script, run with EVALSHA: the SHA-1 comes from the server's SCRIPT LOAD, once per
// connection.
struct Script {
  std::string name;    // for errors: "claim", "finish"
  std::string source;  // the Lua text
};

class Connection {
 public:
  // Connects, logs in (AUTH) and selects the database.
  static Result<Connection> open(const Endpoint& endpoint);
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  ~Connection();

  // Sends one command and returns its reply.
  Result<Reply> command(std::initializer_list<std::string_view> args);
  Result<Reply> command(const std::vector<std::string>& args);
  // Pipelining: append() queues a command, read() returns the oldest reply not read yet.
  Status append(const std::vector<std::string>& args);
  Result<Reply> read();
  // Loads `script` on this connection unless it is loaded (SCRIPT LOAD; no round trip
  // then) and returns its SHA-1. A caller that must tell "not sent" from "sent, reply lost"
  // loads first: a failure of eval() after it means the EVALSHA went out and may have run.
  Result<std::string> load(const Script& script);
  // EVALSHA of `script` with its keys and arguments, loading it first when this connection
  // has not, and again when the server answers NOSCRIPT.
  Result<Reply> eval(const Script& script, const std::vector<std::string>& keys,
                     const std::vector<std::string>& args);
  // One EVALSHA of `script` per call, pipelined: one round trip for all; the replies in order.
  // Calls the server answered NOSCRIPT (it lost the script meanwhile: they did not run) are
  // sent again once it is loaded.
  struct Call {
    std::vector<std::string> keys, args;
  };
  Result<std::vector<Reply>> eval_many(const Script& script, const std::vector<Call>& calls);

  bool broken() const { return broken_; }
  // Broken while writing its buffered commands: the last one, at least, never reached Redis
  // whole (so a single command failing so did not run); false when it broke later, waiting
  // for a reply (then the commands may have run).
  bool broke_writing() const { return broken_ && write_failed_; }
  const Endpoint& endpoint() const { return endpoint_; }

 private:
  struct Free {
    void operator()(redisContext* c) const;
  };
  Connection(Endpoint endpoint, redisContext* c);
  Result<Reply> send(int argc, const char** argv, const std::size_t* lens);
  Status append_argv(int argc, const char** argv, const std::size_t* lens);
  Status failure(const char* what);                  // marks the connection broken
  Status flush();                                    // writes what append() buffered
  Result<std::string> sha_of(const Script& script);  // loading it when this connection has not

  Endpoint endpoint_;
  std::unique_ptr<redisContext, Free> ctx_;
  bool broken_ = false;
  bool write_failed_ = false;
  bool unsent_ = false;  // append() buffered commands that read() has not written yet
  std::unordered_map<std::string, std::string> shas_;  // a script's source: its SHA-1 here
};

}  // namespace sandpool::redis
