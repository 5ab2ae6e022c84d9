// An in-process node of a Redis pool for the cluster group (cluster.cpp, cluster_batch.cpp):
// a local Pool of the echo plugin and its RedisFeeder, in either layout.
#pragma once

#include <memory>
#include <string>

#include <sandpool/pool/pool.hpp>
#include <sandpool/redis/redis_feeder.hpp>

#include "bench.hpp"
#include "redis_child.hpp"

namespace sandpool::bench {

struct ClusterNode {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<redis::RedisFeeder> feeder;
};

// Starts `name` on the redis-server's pool "echo" under `prefix`: o.workers workers of 64
// tasks each, a 100 ms beat, claims after 1 s; in the batch layout with retries 0 (slice 2
// runs a task once). False, said on stderr, when the pool or the feeder does not start.
bool start_cluster_node(const BenchOptions& o, const RedisChild& redis, const std::string& prefix,
                        const std::string& name, redis::Layout layout, ClusterNode* n);

}  // namespace sandpool::bench
