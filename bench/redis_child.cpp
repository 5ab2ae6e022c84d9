#include "redis_child.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <thread>

#include <sandpool/ipc/wake.hpp>

namespace sandpool::bench {

using ipc::monotonic_ns;

RedisChild::RedisChild(bool aof)
    : aof_(aof), dir_(aof && fs::is_directory("/dev/shm") ? "/dev/shm" : "/tmp") {}

RedisChild::~RedisChild() { kill9(); }

void RedisChild::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = 0;
}

bool RedisChild::start() {
  if (dir_.path().empty()) return false;
  socket_ = (dir_.path() / "redis.sock").string();
  pid_ = ::fork();
  if (pid_ < 0) return false;
  if (pid_ == 0) {
    const std::string dir = dir_.path().string(), log = (dir_.path() / "redis.log").string();
    ::execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", socket_.c_str(),
             "--unixsocketperm", "700", "--dir", dir.c_str(), "--save", "", "--appendonly",
             aof_ ? "yes" : "no", "--appendfsync", "always", "--daemonize", "no", "--logfile",
             log.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const std::int64_t until = monotonic_ns() + 30'000'000'000;
  while (monotonic_ns() < until) {
    if (auto c = redis::Connection::open(endpoint())) {
      auto pong = c->command({"PING"});  // LOADING while it reads its append-only file
      if (pong && !pong->is_error()) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::cerr << "sandpool-bench: redis-server did not start (is it installed?); its log: "
            << slurp(dir_.path() / "redis.log") << "\n";
  return false;
}

redis::Endpoint RedisChild::endpoint() const {
  redis::Endpoint e;
  e.unix_path = socket_;
  return e;
}

}  // namespace sandpool::bench
