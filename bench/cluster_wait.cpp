// The cluster-wait group: a waited task's latency through poold over Redis. One poold process
// from the build tree serves a Redis pool `echo` (a redis-server of the bench's own on a unix
// socket); the real Client submits one no-op task at a time with submit_wait (the protocol's
// `wait`: poold submits to Redis, then answers once the task's end is in Redis, on its
// sp-redis-waits thread) and times each from the send to the final answer.
// - w2_poold_p50_us, w2_poold_p99_us: over kWaitRounds tasks, after kWaitWarmup not counted.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <vector>

#include <sandpool/ipc/wake.hpp>

#include "bench.hpp"
#include "poold_child.hpp"
#include "redis_child.hpp"

namespace sandpool::bench {
namespace {

constexpr int kWaitRounds = 400;
constexpr int kWaitWarmup = 20;

}  // namespace

bool run_cluster_wait(const BenchOptions& o, Report& r) {
  RedisChild redis;
  if (!redis.start()) return false;
  ScratchDir dir;
  if (dir.path().empty()) return false;
  const fs::path config = dir.path() / "poold.yaml";
  std::ofstream(config) << bench_config(
      dir.path(),
      "  journal: off\n  node: w\n  redis: {address: \"unix:" + redis.endpoint().unix_path +
          "\", prefix: \"wait:\"}\n",
      "echo", plugin_path(o, "echo"), 1, 1, "    backend: redis\n");
  Poold poold(dir.path(), config, "echo");
  if (!poold.ready(1)) return false;
  std::vector<double> us;
  for (int i = 0; i < kWaitWarmup + kWaitRounds; ++i) {
    SubmitRequest t;
    t.type = "echo";
    t.payload = make_payload(static_cast<std::uint64_t>(i), o.payload_size);
    const std::int64_t t0 = ipc::monotonic_ns();
    auto done = poold.client().submit_wait(t);
    if (!done || done->state != "completed") {
      return poold.fail("a waited task: " + (done ? done->state : done.status().to_string()));
    }
    if (i >= kWaitWarmup) us.push_back(static_cast<double>(ipc::monotonic_ns() - t0) / 1e3);
  }
  std::sort(us.begin(), us.end());
  r.add("cluster-wait", "w2_poold_p50_us", us[us.size() / 2], "us");
  r.add("cluster-wait", "w2_poold_p99_us", us[us.size() * 99 / 100], "us");
  return true;
}

}  // namespace sandpool::bench
