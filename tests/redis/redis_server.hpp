// A redis-server of the test's own: on a unix socket in a temporary directory (never the
// machine's default instance), started and stopped by the test, with its files in that
// directory. Ownership: the server process and the directory; the destructor kills the one
// and removes the other.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/redis/redis_client.hpp>

namespace sandpool::testing {

struct RedisServerOptions {
  std::string password;      // requirepass, when set
  bool append_only = false;  // appendonly yes, with appendfsync always
};

class RedisServer {
 public:
  using Options = RedisServerOptions;
  RedisServer() : RedisServer(Options()) {}
  explicit RedisServer(Options o) : opts_(std::move(o)) {
    char tmpl[] = "/tmp/sandpool_redis_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    start();
  }
  ~RedisServer() {
    kill9();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  std::string socket() const { return dir_ + "/redis.sock"; }
  redis::Endpoint endpoint() const {
    redis::Endpoint e;
    e.unix_path = socket();
    e.password = opts_.password;
    return e;
  }

  // Starts the server on this directory (its data, if any, is loaded) and waits until it
  // answers PING.
  void start() {
    REQUIRE(pid_ == 0);
    std::vector<std::string> args = {"redis-server",
                                     "--port",
                                     "0",
                                     "--unixsocket",
                                     socket(),
                                     "--unixsocketperm",
                                     "700",
                                     "--dir",
                                     dir_,
                                     "--save",
                                     "",
                                     "--daemonize",
                                     "no",
                                     "--logfile",
                                     dir_ + "/redis.log",
                                     "--appendonly",
                                     opts_.append_only ? "yes" : "no",
                                     "--appendfsync",
                                     "always"};
    if (!opts_.password.empty()) {
      args.push_back("--requirepass");
      args.push_back(opts_.password);
    }
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp("redis-server", argv.data());
      ::_exit(127);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      auto c = redis::Connection::open(endpoint());
      if (c) {
        auto pong = c->command({"PING"});
        if (pong && pong->str == "PONG") return;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        FAIL("redis-server exited at start; see " << dir_ << "/redis.log");
      }
      REQUIRE(std::chrono::steady_clock::now() < until);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // SIGKILL, as a crash: what the append-only file holds survives.
  void kill9() {
    if (pid_ == 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

  // SIGSTOP: the server stalls (as under a long fork, a swap storm or a slow disk) with its
  // sockets open; what clients send meanwhile waits in the kernel and runs at resume().
  void pause() {
    REQUIRE(pid_ != 0);
    REQUIRE(::kill(pid_, SIGSTOP) == 0);
  }
  void resume() {
    REQUIRE(pid_ != 0);
    REQUIRE(::kill(pid_, SIGCONT) == 0);
  }

  // A clean SHUTDOWN (the server writes what it must), waited for.
  void shutdown() {
    if (pid_ == 0) return;
    if (auto c = redis::Connection::open(endpoint())) (void)c->command({"SHUTDOWN"});
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

 private:
  Options opts_;
  std::string dir_;
  pid_t pid_ = 0;
};

}  // namespace sandpool::testing
