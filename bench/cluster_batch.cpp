// The cluster group's batch-layout figures (docs/redis-batch-layout.md, slice 2), beside the
// per-task layout's (cluster.cpp), on the same redis-server:
// - throughput_1_batch / throughput_3_batch: no-op echo tasks, all submitted first through
//   BatchStream::submit (batches of 512, one batch_submit script each, pipelined 20 batches a
//   round trip), then drained by 1 and by 3 fresh in-process nodes (a local Pool plus a
//   RedisFeeder with layout=batch, retries 0), as throughput_1 and _3 are for the per-task
//   layout. tasks_batch: the tasks per run (at least 100,000, so that a run lasts about a
//   second at the goal).
// - redis_cpu_us_per_task_batch: the server's CPU (INFO cpu) over the 1-node run, per task;
//   redis_cpu_us_per_submit_batch: the same over the submit; node_cpu_us_per_task_batch: this
//   process's CPU over the 1-node run (the node's pool and feeder; its workers not counted).
// - kill_lost_batch (must be 0), kill_reran_batch, kill_held_batches, failover_batch_ms: a
//   node of three killed mid-backlog (kill_run_batch below).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <thread>
#include <vector>

#include <sandpool/ipc/wake.hpp>

#include <sandpool/redis/batch_stream.hpp>
#include <sandpool/redis/redis_feeder.hpp>
#include "bench.hpp"
#include "cluster_node.hpp"
#include "redis_child.hpp"
#include "redis_profile.hpp"

namespace sandpool::bench {
namespace {

using ipc::monotonic_ns;
constexpr std::uint64_t kBatchMinTasks = 100'000;
constexpr std::size_t kBatchSubmitRound = 20 * redis::batch::kMaxTasks;  // tasks a round trip

using BatchLayoutNode = ClusterNode;

bool start_batch_node(const BenchOptions& o, const RedisChild& redis, const std::string& prefix,
                      const std::string& name, BatchLayoutNode* n) {
  return start_cluster_node(o, redis, prefix, name, redis::Layout::kBatch, n);
}

// Submits `tasks` echo tasks to the prefix's batch streams; false on a Redis failure.
bool fill_batches(redis::Connection& c, const std::string& prefix, std::uint64_t tasks,
                  std::uint32_t payload_size, std::vector<std::uint64_t>* ids = nullptr) {
  const redis::BatchStream batches(redis::PoolKeys(prefix, "echo"));
  if (Status s = batches.ensure_group(c); !s) {
    std::cerr << "sandpool-bench: cluster: batch streams: " << s.to_string() << "\n";
    return false;
  }
  for (std::uint64_t from = 0; from < tasks; from += kBatchSubmitRound) {
    std::vector<redis::StreamTask> round(std::min<std::uint64_t>(kBatchSubmitRound, tasks - from));
    for (std::size_t i = 0; i < round.size(); ++i) {
      round[i].type = "echo";
      round[i].payload = make_payload(from + i, payload_size);
    }
    auto made = batches.submit(c, round, 1);
    if (!made) {
      std::cerr << "sandpool-bench: cluster: batch submit: " << made.status().to_string() << "\n";
      return false;
    }
    if (ids) ids->insert(ids->end(), made->ids.begin(), made->ids.end());
  }
  return true;
}

struct BatchLayoutRun {
  double per_s = 0;
  double submit_cpu_us = 0, redis_cpu_us = 0, node_cpu_us = 0;  // over the submit, the run
};

// `tasks` submitted in batches, then run by `count` fresh batch nodes; per_s 0 on a failure.
BatchLayoutRun through_batch_nodes(const BenchOptions& o, const RedisChild& redis,
                                   const std::string& prefix, std::uint64_t tasks, int count) {
  BatchLayoutRun out;
  auto c = redis::Connection::open(redis.endpoint());
  if (!c) return out;
  const std::optional<double> before_fill = redis_cpu_us(*c);
  if (!fill_batches(*c, prefix, tasks, o.payload_size)) return out;
  const std::optional<double> before = redis_cpu_us(*c);
  const double node_before = process_cpu_us();
  std::vector<BatchLayoutNode> nodes(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    if (!start_batch_node(o, redis, prefix, "batch-node-" + std::to_string(i),
                          &nodes[static_cast<std::size_t>(i)])) {
      return out;
    }
  }
  const auto ended = [&] {
    std::uint64_t n = 0;
    for (const BatchLayoutNode& node : nodes) n += node.feeder->stats().finished;
    return n;
  };
  const std::int64_t t0 = monotonic_ns();
  while (ended() < tasks) {
    if (monotonic_ns() - t0 > 600'000'000'000) return out;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double secs = static_cast<double>(monotonic_ns() - t0) / 1e9;
  const std::optional<double> after = redis_cpu_us(*c);
  out.node_cpu_us = process_cpu_us() - node_before;
  if (before_fill && before && after) {
    out.submit_cpu_us = *before - *before_fill;
    out.redis_cpu_us = *after - *before;
  }
  out.per_s = static_cast<double>(tasks) / secs;
  return out;
}

std::uint64_t ended_by(const std::vector<BatchLayoutNode>& nodes) {
  std::uint64_t n = 0;
  for (const BatchLayoutNode& node : nodes) n += node.feeder->stats().finished;
  return n;
}

// The kill run in the batch layout: `tasks` submitted in batches, 3 in-process batch nodes,
// node 0 dies (RedisFeeder::die: every thread stopped at once, nothing more written, as a
// SIGKILL) once a tenth has ended and while it holds batches; the others claim its batches.
// Then every task is looked up (BatchStream::lookup): kill_lost_batch, those with no end
// record or not completed (must be 0); kill_reran_batch, those run again after a `lost`
// attempt (the dead node's tasks with no record); failover_batch_ms, from the death until
// every task had its record.
bool kill_run_batch(const BenchOptions& o, const RedisChild& redis, std::uint64_t tasks,
                    Report& r) {
  auto c = redis::Connection::open(redis.endpoint());
  if (!c) return false;
  const std::string prefix = "batch-kill:";
  std::vector<std::uint64_t> ids;
  if (!fill_batches(*c, prefix, tasks, o.payload_size, &ids)) return false;
  std::vector<BatchLayoutNode> nodes(3);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!start_batch_node(o, redis, prefix, "kill-node-" + std::to_string(i), &nodes[i])) {
      return false;
    }
  }
  const std::int64_t t0 = monotonic_ns();
  const auto waited_too_long = [&] { return monotonic_ns() - t0 > 120'000'000'000; };
  while (ended_by(nodes) < tasks / 10 || nodes[0].feeder->stats().held == 0) {
    if (waited_too_long() || ended_by(nodes) >= tasks) {
      std::cerr << "sandpool-bench: cluster: the batch kill run found no node to kill\n";
      return false;
    }
    std::this_thread::yield();
  }
  const auto held_at_death = nodes[0].feeder->stats().held;
  const std::int64_t died = monotonic_ns();
  nodes[0].feeder->die();
  while (ended_by(nodes) < tasks) {
    if (waited_too_long()) break;  // counted below as lost
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double failover_ms = static_cast<double>(monotonic_ns() - died) / 1e6;
  const redis::BatchStream batches(redis::PoolKeys(prefix, "echo"));
  std::uint64_t lost = 0, reran = 0;
  for (const std::uint64_t id : ids) {
    auto t = batches.lookup(*c, id);
    if (!t) return false;
    if (!t->has_value() || !(*t)->end || (*t)->state != "completed") {
      ++lost;
    } else if ((*t)->end->attempt_log.size() > 1) {
      ++reran;
    }
  }
  r.add("cluster", "kill_lost_batch", static_cast<double>(lost), "tasks");
  r.add("cluster", "kill_reran_batch", static_cast<double>(reran), "tasks");
  r.add("cluster", "kill_held_batches", static_cast<double>(held_at_death), "batches");
  r.add("cluster", "failover_batch_ms", failover_ms, "ms");
  return lost == 0;
}

}  // namespace

double process_cpu_us() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  const auto us = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e6 + t.tv_usec; };
  return us(u.ru_utime) + us(u.ru_stime);
}

bool add_cluster_batch(const BenchOptions& o, const RedisChild& redis, Report& r) {
  const std::uint64_t tasks = std::max(o.cluster_tasks, kBatchMinTasks);
  const BatchLayoutRun one = through_batch_nodes(o, redis, "batch-one:", tasks, 1);
  const BatchLayoutRun three = through_batch_nodes(o, redis, "batch-three:", tasks, 3);
  if (one.per_s <= 0 || three.per_s <= 0) {
    std::cerr << "sandpool-bench: cluster: a batch-layout run failed\n";
    return false;
  }
  const double n = static_cast<double>(tasks);
  r.add("cluster", "throughput_1_batch", one.per_s, "tasks/s");
  r.add("cluster", "throughput_3_batch", three.per_s, "tasks/s");
  r.add("cluster", "redis_cpu_us_per_task_batch", one.redis_cpu_us / n, "us");
  r.add("cluster", "redis_cpu_us_per_submit_batch", one.submit_cpu_us / n, "us");
  r.add("cluster", "node_cpu_us_per_task_batch", one.node_cpu_us / n, "us");
  r.add("cluster", "tasks_batch", n, "tasks");
  return kill_run_batch(o, redis, tasks, r);
}

}  // namespace sandpool::bench
