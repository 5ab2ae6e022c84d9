// A redis-server of the bench's own (cluster.cpp, cluster_soak.cpp): on a unix socket in a
// scratch directory, killed at the end.
#pragma once

#include <sys/types.h>

#include <string>

#include <sandpool/redis/redis_client.hpp>

#include "poold_child.hpp"

namespace sandpool::bench {

class RedisChild {
 public:
  // `aof`: the append-only file on, fsynced at every write (`appendfsync always`), in a
  // directory on /dev/shm (fsync costs nothing there, and the file outlives the process, all
  // a restart needs): a SIGKILL then start() loses no acknowledged write. Without it, no
  // persistence at all (the figures are the nodes' and the scripts', not the disk's).
  explicit RedisChild(bool aof = false);
  ~RedisChild();
  RedisChild(const RedisChild&) = delete;
  RedisChild& operator=(const RedisChild&) = delete;

  // Starts redis-server (again, after kill9(): on the same directory and append-only file)
  // and waits until it answers PING (30 s at most; a restart loads its file first). False,
  // said on stderr, when it does not.
  bool start();
  void kill9();  // SIGKILL, reaped
  redis::Endpoint endpoint() const;
  std::string address() const { return "unix:" + socket_; }  // service.redis.address
  const fs::path& dir() const { return dir_.path(); }

 private:
  const bool aof_;
  ScratchDir dir_;
  std::string socket_;
  pid_t pid_ = 0;
};

}  // namespace sandpool::bench
