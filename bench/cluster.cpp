// The cluster group (issue 15): Redis pools, with a redis-server of the bench's own on a unix
// socket in a scratch directory (append-only file off: the figures are the nodes' and the
// scripts', not the disk's).
// - throughput_1 / throughput_3: no-op echo tasks, all added to the stream first, through 1
//   and 3 nodes (each with `--workers` workers); vs_local: throughput_1 over the same pool
//   fed directly (Pool::submit), in the same run. A node here is a local Pool plus a
//   RedisFeeder in this process, as poold runs one per Redis pool (no control plane between).
// - redis_us_per_task: Redis's time per task over the throughput_1 run, from `INFO
//   commandstats` deltas: the usec of every script call (EVALSHA, EVAL: each one's commands
//   included; the commands a script calls are counted again under their own names, so those
//   are not summed) and of the commands sent outside scripts (XREADGROUP's blocking read, the
//   beat's own commands: every other command), over the tasks. redis_cpu_us_per_task: the
//   server's CPU time (INFO cpu, user + system) over the tasks, its I/O included.
//   redis_us_per_submit: the same commandstats figure over the fill (submit_many: one
//   submit_batch script per 512 tasks).
//   node_cpu_us_per_task: this process's CPU over the throughput_1 run (the node's pool and
//   feeder; its workers are processes of their own).
// - redis_us_submit / _read / _finish, redis_cpu_us_*: a profile of the same tasks submitted,
//   read and ended apart, each phase one script's (redis_profile.hpp).
// - w2_p50_us: one task at a time through one in-process node over Redis: the submit script,
//   then TaskProducer::await_end (the waiter registered, then BLPOP on the task's end list
//   P:end:ID, pipelined) until its end is written; the p50 of 500 (w2_p99_us: their p99).
//   `--only cluster-w2` measures just these two, on a redis-server of its own, and how the
//   node took them: w2_hand_off_share, w2_direct_end_share (Pool's counts) and w2_lone_end_share
//   (the ends its reader wrote itself, RedisFeeder's lone task), each per task.
// - kill_lost / kill_reran / failover_ms: 3 poold processes from the build tree share the
//   pool, with at least 100,000 tasks queued in Redis all along (kill_backlog_min: a thread
//   tops the stream up, 1,000 tasks a round trip, whenever fewer wait unread, until every
//   task the dead node held has ended); one, caught holding entries, is SIGKILLed at a
//   random point of the run (kill_held: the entries claimed after the kill, each with a
//   `lost` attempt; kill_claimed_before: those claimed before it, from a live node starved
//   past the claim time on a loaded machine); tasks that never reach a terminal state (must
//   be 0), tasks with more than one attempt, and the time from its SIGSTOP (it runs nothing
//   from then on; the SIGKILL follows) to the first entry claimed after it (the first such
//   `lost` attempt's end, wall clock), beside claim_ms (poold's claim time, three beats) and
//   their ratio; failover_done_ms: from the SIGSTOP until the last task it held ended.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <sandpool/base/wall_clock.hpp>
#include <sandpool/ipc/wake.hpp>

#include <sandpool/redis/redis_feeder.hpp>
#include <sandpool/redis/task_producer.hpp>
#include <sandpool/redis/task_upkeep.hpp>
#include "bench.hpp"
#include "cluster_node.hpp"
#include "poold_child.hpp"
#include "redis_child.hpp"
#include "redis_profile.hpp"

namespace sandpool::bench {
namespace {

using ipc::monotonic_ns;
constexpr std::uint32_t kConcurrency = 64;
constexpr std::chrono::milliseconds kBeat{100}, kClaimAfter{1000};
// The profile's reads and ends per script: what a node with 2 workers x kConcurrency free
// places does in throughput_1 (about 44 a script, from its calls per task).
constexpr std::size_t kProfileBatch = 48;

using Node = ClusterNode;

bool start_node(const BenchOptions& o, const RedisChild& redis, const std::string& prefix,
                const std::string& name, Node* n) {
  return start_cluster_node(o, redis, prefix, name, redis::Layout::kTask, n);
}

// Adds `tasks` echo tasks to the prefix's stream in batches (TaskProducer::submit_many, as a
// node's submit_batch does); false on a Redis failure.
bool fill(const RedisChild& redis, const std::string& prefix, std::uint64_t tasks,
          std::uint32_t payload_size) {
  constexpr std::uint64_t kFillBatch = 5000;
  auto c = redis::Connection::open(redis.endpoint());
  if (!c) return false;
  const redis::PoolKeys keys(prefix, "echo");
  if (!redis::TaskUpkeep(keys).ensure_group(*c)) return false;
  const redis::TaskProducer stream(keys);
  for (std::uint64_t from = 0; from < tasks; from += kFillBatch) {
    std::vector<redis::StreamTask> batch(std::min(kFillBatch, tasks - from));
    for (std::size_t i = 0; i < batch.size(); ++i) {
      batch[i].type = "echo";
      batch[i].payload = make_payload(from + i, payload_size);
    }
    auto ids = stream.submit_many(*c, batch, 1);
    if (!ids) return false;
    for (const auto& id : *ids) {
      if (!id) return false;
    }
  }
  return true;
}

// Redis's own accounting of its time: commandstats' usec and the server's CPU, summed.
struct RedisTime {
  double script_us = 0;  // EVALSHA and EVAL: each script's commands included
  double direct_us = 0;  // commands sent outside scripts (XREADGROUP BLOCK, PING, ...)
  double cpu_us = 0;     // used_cpu_user + used_cpu_sys
};

// The commands the pool's scripts call: their usec is within the scripts' already.
bool run_by_scripts(std::string_view name) {
  static const std::set<std::string_view> kInner = {
      "xpending", "rpush",      "hincrby", "pexpire", "xrange",        "xadd",    "hset",
      "incrby",   "xack",       "xdel",    "zadd",    "zcard",         "zpopmin", "hget",
      "del",      "decrby",     "hdel",    "srem",    "get",           "set",     "incr",
      "exists",   "xreadgroup", "zrem",    "xclaim",  "zrangebyscore", "zrange",  "time",
      "hmget",    "sismember",  "scard",   "sadd",    "pttl"};
  return kInner.count(name) != 0;
}

std::optional<RedisTime> redis_time(redis::Connection& c) {
  auto stats = command_stats(c);
  auto cpu = redis_cpu_us(c);
  if (!stats || !cpu) return std::nullopt;
  RedisTime t;
  t.cpu_us = *cpu;
  for (const auto& [name, k] : *stats) {
    if (name == "evalsha" || name == "eval") {
      t.script_us += k.us;
    } else if (!run_by_scripts(name)) {
      t.direct_us += k.us;
    }
  }
  return t;
}

std::uint64_t finished(const std::vector<Node>& nodes) {
  std::uint64_t n = 0;
  for (const Node& node : nodes) n += node.feeder->stats().finished;
  return n;
}

// Runs `tasks` through `count` fresh nodes; returns tasks/s, or 0 on failure. `spent`, when
// set, gets Redis's time over the fill (`submits`) and over the run (`run`).
struct Spent {
  RedisTime submits, run;
  double node_cpu_us = 0;  // process_cpu_us() over the run
};
double through_nodes(const BenchOptions& o, const RedisChild& redis, const std::string& prefix,
                     std::uint64_t tasks, int count, Spent* spent = nullptr) {
  auto c = redis::Connection::open(redis.endpoint());
  if (!c) return 0;
  const std::optional<RedisTime> before_fill = redis_time(*c);
  if (!fill(redis, prefix, tasks, o.payload_size)) return 0;
  const std::optional<RedisTime> before = redis_time(*c);
  const double cpu_before = process_cpu_us();
  std::vector<Node> nodes(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    if (!start_node(o, redis, prefix, "node-" + std::to_string(i),
                    &nodes[static_cast<std::size_t>(i)])) {
      return 0;
    }
  }
  const std::int64_t t0 = monotonic_ns();
  while (finished(nodes) < tasks) {
    if (monotonic_ns() - t0 > 600'000'000'000) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double per_s =
      static_cast<double>(tasks) / (static_cast<double>(monotonic_ns() - t0) / 1e9);
  const std::optional<RedisTime> after = redis_time(*c);
  if (spent) {
    spent->node_cpu_us = process_cpu_us() - cpu_before;
    if (!before_fill || !before || !after) return 0;
    const auto minus = [](const RedisTime& a, const RedisTime& b) {
      return RedisTime{a.script_us - b.script_us, a.direct_us - b.direct_us, a.cpu_us - b.cpu_us};
    };
    spent->submits = minus(*before, *before_fill);
    spent->run = minus(*after, *before);
  }
  return per_s;
}

// One waited task at a time over Redis (W2's shape): the round trips' p50 and p99 in µs, or
// -1 and -1.
struct Waited {
  double p50 = -1, p99 = -1;
  // Of the rounds: the tasks the node's pool took by the direct hand-off, those it ended on
  // the waiting (reader's) thread, and the ends the reader wrote itself (the lone task's way,
  // redis_feeder.hpp).
  double hand_offs = 0, direct_ends = 0, lone_ends = 0;
};
Waited waited_us(const BenchOptions& o, const RedisChild& redis) {
  constexpr int kRounds = 500;
  const std::string prefix = "w2:";
  redis::Endpoint at = redis.endpoint();
  at.timeout = std::chrono::seconds(15);  // past await_end's own 10 s
  auto c = redis::Connection::open(at);
  if (!c) return {};
  const redis::PoolKeys keys(prefix, "echo");
  if (!redis::TaskUpkeep(keys).ensure_group(*c)) return {};
  const redis::TaskProducer stream(keys);
  Node node;
  if (!start_node(o, redis, prefix, "w2-node", &node)) return {};
  std::vector<double> us;
  for (int i = 0; i < kRounds; ++i) {
    redis::StreamTask t;
    t.type = "echo";
    t.payload = make_payload(static_cast<std::uint64_t>(i), o.payload_size);
    const std::int64_t t0 = monotonic_ns();
    auto id = stream.submit(*c, t, wall_clock_ms());
    if (!id) return {};
    auto end = stream.await_end(*c, id->id, std::chrono::seconds(10));
    if (!end || !end->has_value()) return {};
    us.push_back(static_cast<double>(monotonic_ns() - t0) / 1e3);
  }
  std::sort(us.begin(), us.end());
  const auto share = [](std::uint64_t n) { return static_cast<double>(n) / kRounds; };
  return {us[kRounds / 2], us[kRounds * 99 / 100], share(node.pool->hand_offs()),
          share(node.pool->direct_ends()), share(node.feeder->stats().lone_ends)};
}

double local_throughput(const BenchOptions& o, std::uint64_t tasks) {
  auto pool = start_pool(pool_options(o, plugin_path(o, "echo"), o.workers, kConcurrency));
  if (!pool) return 0;
  std::atomic<std::uint64_t> done{0};
  const std::int64_t t0 = monotonic_ns();
  for (std::uint64_t i = 0; i < tasks; ++i) {
    SubmitOptions so;
    so.on_done = [&done](const TaskResult&) { done.fetch_add(1, std::memory_order_relaxed); };
    if (!pool->submit("echo", make_payload(i, o.payload_size), std::move(so))) return 0;
  }
  while (done.load() < tasks) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return static_cast<double>(tasks) / (static_cast<double>(monotonic_ns() - t0) / 1e9);
}

// The consumers' pending counts, summed over the pool's bands.
std::map<std::string, std::uint64_t> pending_by_node(redis::Connection& c,
                                                     const redis::PoolKeys& stream) {
  std::map<std::string, std::uint64_t> out;
  for (const redis::Band b : redis::kBands) {
    auto p = c.command({"XPENDING", stream.stream_key(b), redis::PoolKeys::kGroup});
    if (!p || p->elements.size() != 4) continue;
    for (const redis::Reply& per : p->elements[3].elements) {
      if (per.elements.size() == 2) out[per.elements[0].str] += std::stoull(per.elements[1].str);
    }
  }
  return out;
}

// SIGSTOPs `pid` and waits (10 s at most) until /proc says it is stopped; false if it is not.
bool stop_process(pid_t pid) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  const std::string stat = "/proc/" + std::to_string(pid) + "/stat";
  const std::int64_t until = monotonic_ns() + 10'000'000'000;
  while (monotonic_ns() < until) {
    std::ifstream in(stat);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = text.rfind(')');  // the name may hold spaces; the state follows it
    if (paren != std::string::npos && text.compare(paren + 1, 3, " T ") == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// The entries of band 0 that wait unread: the stream's length less its pending entries (an
// entry is deleted with its end, so the stream holds only those two).
std::optional<std::uint64_t> kill_queued(redis::Connection& c, const redis::PoolKeys& stream) {
  auto len = c.command({"XLEN", stream.stream_key(0)});
  auto pending = c.command({"XPENDING", stream.stream_key(0), redis::PoolKeys::kGroup});
  if (!len || !pending || len->is_error() || pending->elements.size() != 4) return std::nullopt;
  const auto held = static_cast<std::int64_t>(pending->elements[0].integer);
  return static_cast<std::uint64_t>(std::max<std::int64_t>(0, len->integer - held));
}

// Keeps at least kKillBacklog tasks queued in the kill run's stream while it runs: a thread
// of its own, on a connection of its own, adds kKillTopUp tasks (one pipelined round trip)
// whenever fewer than kKillBacklog + kKillMargin wait unread (the margin covers what the
// nodes take between two looks). `added()` counts every task it added, so the run knows its
// ids.
constexpr std::uint64_t kKillBacklog = 100'000, kKillTopUp = 1'000, kKillMargin = 10'000;
class KillBacklog {
 public:
  KillBacklog(const RedisChild& redis, std::string prefix, std::uint32_t payload_size)
      : redis_(redis), prefix_(std::move(prefix)), payload_size_(payload_size) {}
  ~KillBacklog() { stop(); }
  KillBacklog(const KillBacklog&) = delete;
  KillBacklog& operator=(const KillBacklog&) = delete;

  void start() {
    thread_ = std::thread([this] { keep(); });
  }
  // Stops topping up; returns false iff a top-up failed (the backlog may have run low).
  bool stop() {
    stopping_.store(true);
    if (thread_.joinable()) thread_.join();
    return !failed_.load();
  }
  std::uint64_t added() const { return added_.load(); }

 private:
  void keep() {
    auto c = redis::Connection::open(redis_.endpoint());
    if (!c) return failed_.store(true);
    const redis::TaskProducer stream(redis::PoolKeys(prefix_, "echo"));
    std::vector<redis::StreamTask> chunk(kKillTopUp);
    for (redis::StreamTask& t : chunk) {
      t.type = "echo";
      t.payload = make_payload(0, payload_size_);
    }
    while (!stopping_.load()) {
      const std::optional<std::uint64_t> queued = kill_queued(*c, stream.keys());
      if (!queued) return failed_.store(true);
      if (*queued >= kKillBacklog + kKillMargin) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      auto ids = stream.submit_many(*c, chunk, wall_clock_ms());
      if (!ids) return failed_.store(true);
      for (const auto& id : *ids) {
        if (!id) return failed_.store(true);
        added_.fetch_add(1);
      }
    }
  }

  const RedisChild& redis_;
  const std::string prefix_;
  const std::uint32_t payload_size_;
  std::atomic<bool> stopping_{false}, failed_{false};
  std::atomic<std::uint64_t> added_{0};
  std::thread thread_;
};

// The task ids of the entries of band 0 pending for `node`, or nullopt on an error.
std::optional<std::vector<std::uint64_t>> kill_pending_tasks(redis::Connection& c,
                                                             const redis::PoolKeys& stream,
                                                             const std::string& node) {
  auto pending = c.command(
      {"XPENDING", stream.stream_key(0), redis::PoolKeys::kGroup, "-", "+", "1000000", node});
  if (!pending || pending->is_error()) return std::nullopt;
  for (const redis::Reply& p : pending->elements) {
    if (p.elements.empty()) return std::nullopt;
    const std::string& entry = p.elements[0].str;
    if (!c.append({"XRANGE", stream.stream_key(0), entry, entry})) return std::nullopt;
  }
  std::vector<std::uint64_t> ids;
  for (std::size_t i = 0; i < pending->elements.size(); ++i) {
    auto e = c.read();
    if (!e) return std::nullopt;
    if (e->elements.size() != 1 || e->elements[0].elements.size() != 2) continue;  // ended
    const auto& fields = e->elements[0].elements[1].elements;
    for (std::size_t f = 0; f + 1 < fields.size(); f += 2) {
      if (fields[f].str == "id") ids.push_back(std::stoull(fields[f + 1].str));
    }
  }
  return ids;
}

// Three poold processes share the pool, with at least kKillBacklog tasks queued in Redis all
// along (KillBacklog); one is SIGKILLed at a random point while it holds entries. Every task
// must reach a terminal state, and the dead node's must end while the backlog still waits.
bool kill_run(const BenchOptions& o, const RedisChild& redis, const std::uint64_t first_fill,
              Report& r) {
  const std::string prefix = "kill:";
  std::uint64_t tasks = first_fill;  // and those the backlog's thread adds
  if (!fill(redis, prefix, tasks, o.payload_size)) return false;
  auto c = redis::Connection::open(redis.endpoint());
  if (!c) return false;
  const redis::PoolKeys stream(prefix, "echo");
  // The backlog is made before the nodes start (one pipelined round trip per kKillTopUp
  // tasks), then kept.
  KillBacklog backlog(redis, prefix, o.payload_size);
  backlog.start();
  for (;;) {
    const std::optional<std::uint64_t> queued = kill_queued(*c, stream);
    if (!queued) return false;
    if (*queued >= kKillBacklog + kKillMargin) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  struct PooldNode {
    ScratchDir dir;
    std::optional<Poold> poold;
  };
  std::vector<PooldNode> nodes(3);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    PooldNode& n = nodes[i];
    if (n.dir.path().empty()) return false;
    const fs::path config = n.dir.path() / "poold.yaml";
    // Every task's hash is kept for the checks after the run (the default `finished`, 100,000,
    // would evict the first tasks' under the backlog).
    std::ofstream(config) << bench_config(
        n.dir.path(),
        "  journal: off\n  node: n" + std::to_string(i) +
            "\n  redis: {address: \"unix:" + redis.endpoint().unix_path + "\", prefix: \"" +
            prefix + "\", heartbeat: " + std::to_string(kBeat.count()) +
            "ms, finished: 10000000, finished_max_bytes: 4GiB}\n",
        "echo", plugin_path(o, "echo"), o.workers, kConcurrency, "    backend: redis\n");
    n.poold.emplace(n.dir.path(), config, "echo");
  }
  for (PooldNode& n : nodes) {
    if (!n.poold->ready(o.workers)) return false;
  }
  const auto done = [&] {
    auto n = c->command({"ZCARD", prefix + "echo:done"});
    return n ? static_cast<std::uint64_t>(n->integer) : 0;
  };
  std::mt19937_64 rng(std::random_device{}());
  const std::uint64_t at = first_fill / 5 + rng() % (first_fill / 2);  // dies after 20-70%
  while (done() < at) std::this_thread::sleep_for(std::chrono::microseconds(500));
  // The node killed is one caught holding entries (a node between two reads holds none, and
  // its death costs nothing): looked for with every node running, since a node stopped and
  // resumed over and over never gets the CPU to read under load while the others end the run
  // (n0 alone was looked for until 2026-12-06: 2 runs in 5 under load never caught it). Then
  // stopped, so what it holds cannot end between the look and the kill; if it ended them just
  // before the stop it is resumed, and only entries seen held again stop a node once more.
  // The backlog never runs out, so the look goes on for 60 s at most.
  std::size_t victim = nodes.size();
  std::int64_t stopped_ms = 0;
  std::uint64_t looks = 0, seen = 0;
  std::vector<std::uint64_t> victim_tasks;
  const std::int64_t look_until = monotonic_ns() + 60'000'000'000;
  for (;;) {
    ++looks;
    for (const auto& [node, n] : pending_by_node(*c, stream)) {
      if (n == 0 || node.size() != 2 || node[0] != 'n') continue;
      ++seen;
      const std::size_t i = static_cast<std::size_t>(node[1] - '0');
      if (i >= nodes.size()) continue;
      stopped_ms = wall_clock_ms();
      if (!stop_process(nodes[i].poold->pid())) return nodes[i].poold->fail("SIGSTOP");
      // A round trip first: whatever it sent before it stopped is in Redis's hands by then.
      if (c->command({"PING"}) && pending_by_node(*c, stream)[node] > 0) {
        auto held = kill_pending_tasks(*c, stream, node);
        if (!held) return false;
        victim_tasks = std::move(*held);
        victim = i;
        break;
      }
      ::kill(nodes[i].poold->pid(), SIGCONT);
    }
    if (victim < nodes.size()) break;
    if (monotonic_ns() > look_until) {
      std::cerr << "sandpool-bench: cluster: no node was caught holding an entry in 60 s (" << looks
                << " looks, " << seen << " saw a node holding, none held after its stop)\n";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // It ran nothing from its SIGSTOP on: failover is timed from then, not from the kill (a
  // stop on a loaded machine may last past the claim time).
  const std::int64_t died_ms = stopped_ms;
  const std::int64_t died = monotonic_ns();
  const std::optional<std::uint64_t> backlog_at_stop = kill_queued(*c, stream);
  nodes[victim].poold->kill9();
  // The backlog stays until every task the dead node held has ended (claimed by a live node
  // and run), 2 minutes at most; its smallest size meanwhile is reported.
  std::uint64_t backlog_min = backlog_at_stop.value_or(0);
  std::int64_t victim_done_ms = -1;
  for (const std::int64_t until = died + 120'000'000'000; monotonic_ns() < until;) {
    if (const auto q = kill_queued(*c, stream)) backlog_min = std::min(backlog_min, *q);
    for (const std::uint64_t id : victim_tasks) {
      if (!c->append({"HMGET", prefix + "task:" + std::to_string(id), "state", "finished_ms"}))
        return false;
    }
    bool all = true;
    std::int64_t last = 0;
    for (std::size_t i = 0; i < victim_tasks.size(); ++i) {
      auto h = c->read();
      if (!h || h->elements.size() != 2) return false;
      const std::string& state = h->elements[0].str;
      if (state != "completed" && state != "failed" && state != "cancelled" &&
          state != "dead_lettered") {
        all = false;
      } else {
        last = std::max<std::int64_t>(last, std::atoll(h->elements[1].str.c_str()));
      }
    }
    if (all) {
      victim_done_ms = last;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const bool kept = backlog.stop();
  tasks += backlog.added();
  // Until every task is out of the streams, the pending lists and the later set (a task
  // claimed from the dead node may wait out a backoff there), 10 minutes at most.
  const std::int64_t until = died + 600'000'000'000;
  for (;;) {
    auto s = redis::TaskProducer(stream).summary(*c);
    if (!s) return false;
    if ((s->length == 0 && s->pending == 0 && s->later == 0) || monotonic_ns() > until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Every task, by id (the prefix's counter is this run's: ids from kFirstId on).
  std::uint64_t terminal = 0, reran = 0;
  std::vector<std::uint64_t> rerun_ids;
  std::map<std::string, std::uint64_t> unended;  // state -> tasks, for the message
  const std::uint64_t first = redis::PoolKeys::kFirstId, end = first + tasks;
  for (std::uint64_t id = first; id < end; ++id) {
    if (!c->append({"HMGET", prefix + "task:" + std::to_string(id), "state", "attempts"}))
      return false;
  }
  for (std::uint64_t id = first; id < end; ++id) {
    auto h = c->read();
    if (!h || h->elements.size() != 2) return false;
    const std::string& state = h->elements[0].str;
    if (state == "completed" || state == "failed" || state == "cancelled" ||
        state == "dead_lettered") {
      ++terminal;
    } else {
      ++unended[state.empty() ? "(no hash)" : state];
    }
    if (h->elements[1].str != "1" && h->elements[1].str != "0") {
      ++reran;
      rerun_ids.push_back(id);
    }
  }
  // What the dead node left: the tasks claimed after its stop, each with a `lost` attempt whose
  // end time is the claim's (failover: the first of them, from the signal). A task is counted
  // once, though a loaded machine may have it claimed again from a starved live node.
  std::uint64_t held = 0, stolen = 0;
  std::int64_t first_claim_ms = -1, last_claim_ms = -1;
  const redis::TaskProducer producer(stream);
  for (const std::uint64_t id : rerun_ids) {
    auto task = producer.task(*c, id);
    if (!task) return false;
    bool after = false, before = false;
    for (const std::string& a : task->history) {
      const auto j = nlohmann::json::parse(a, nullptr, false);
      if (j.is_discarded() || j.value("outcome", "") != "lost") continue;
      const std::int64_t at = j.value("ended_ms", std::int64_t{0});
      // A claim before the stop took a live node's entries: one starved past the claim time
      // (a loaded machine); counted apart, not as the dead node's.
      if (at < died_ms) {
        before = true;
        continue;
      }
      after = true;
      if (first_claim_ms < 0 || at < first_claim_ms) first_claim_ms = at;
      last_claim_ms = std::max(last_claim_ms, at);
    }
    held += after ? 1 : 0;
    stolen += before ? 1 : 0;
  }
  if (terminal != tasks) {
    std::cerr << "sandpool-bench: cluster: tasks left unended, by state:";
    for (const auto& [state, n] : unended) std::cerr << " " << state << "=" << n;
    std::cerr << "\n";
  }
  if (!kept) std::cerr << "sandpool-bench: cluster: a top-up of the kill run's backlog failed\n";
  // poold claims entries idle for three heartbeats (redis_pools.cpp: claim_after).
  const double claim_ms = static_cast<double>(3 * kBeat.count());
  const double failover_ms =
      first_claim_ms < 0 ? -1.0 : static_cast<double>(first_claim_ms - died_ms);
  r.add("cluster", "kill_lost", static_cast<double>(tasks - terminal), "tasks");
  r.add("cluster", "kill_reran", static_cast<double>(reran), "tasks");
  r.add("cluster", "failover_ms", failover_ms, "ms");
  r.add("cluster", "claim_ms", claim_ms, "ms");
  r.add("cluster", "failover_vs_claim", failover_ms / claim_ms, "ratio");
  // From the stop until the last of its tasks was claimed (its `lost` attempt recorded), and
  // until the last had ended on a live node.
  r.add("cluster", "failover_last_claim_ms",
        last_claim_ms < 0 ? -1.0 : static_cast<double>(last_claim_ms - died_ms), "ms");
  r.add("cluster", "failover_done_ms",
        victim_done_ms < 0 ? -1.0 : static_cast<double>(victim_done_ms - died_ms), "ms");
  r.add("cluster", "kill_backlog_at_stop", static_cast<double>(backlog_at_stop.value_or(0)),
        "tasks");
  r.add("cluster", "kill_backlog_min", static_cast<double>(backlog_min), "tasks");
  r.add("cluster", "kill_tasks", static_cast<double>(tasks), "tasks");
  r.add("cluster", "kill_held", static_cast<double>(held), "tasks");  // claimed from it
  r.add("cluster", "kill_claimed_before", static_cast<double>(stolen), "tasks");
  return terminal == tasks && kept && victim_done_ms >= 0;
}

// Each script's Redis µs per task, phase by phase (redis_profile.hpp): redis_us_<phase>, and
// the commands the phase's script calls, the costliest first, on stderr.
bool add_profile(const BenchOptions& o, const RedisChild& redis, Report& r) {
  const auto phases = profile_scripts(redis.endpoint(), "profile:", o.cluster_tasks, kProfileBatch);
  if (!phases) {
    std::cerr << "sandpool-bench: cluster: the per-script profile failed\n";
    return false;
  }
  const double tasks = static_cast<double>(o.cluster_tasks);
  for (const auto& [phase, p] :
       {std::pair{"submit", &phases->submit}, std::pair{"read", &phases->read},
        std::pair{"finish", &phases->finish}}) {
    const CommandStats& stats = p->commands;
    const auto script = stats.find("evalsha");
    r.add("cluster", std::string("redis_us_") + phase,
          script == stats.end() ? 0 : script->second.us / tasks, "us");
    r.add("cluster", std::string("redis_cpu_us_") + phase, p->cpu_us / tasks, "us");
    std::vector<std::pair<std::string, Calls>> inner(stats.begin(), stats.end());
    std::sort(inner.begin(), inner.end(),
              [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
    std::cerr << "sandpool-bench: cluster: profile " << phase << ", us/calls per task:";
    for (const auto& [name, k] : inner) {
      std::cerr << " " << name << "=" << k.us / tasks << "/"
                << static_cast<double>(k.calls) / tasks;
    }
    std::cerr << "\n";
  }
  return true;
}

}  // namespace

bool start_cluster_node(const BenchOptions& o, const RedisChild& redis, const std::string& prefix,
                        const std::string& name, redis::Layout layout, ClusterNode* n) {
  n->pool = start_pool(pool_options(o, plugin_path(o, "echo"), o.workers, kConcurrency));
  if (!n->pool) return false;
  redis::FeederOptions f;
  f.endpoint = redis.endpoint();
  f.prefix = prefix;
  f.pool = "echo";
  f.consumer = name;
  f.capacity = std::size_t{o.workers} * kConcurrency;
  f.heartbeat = kBeat;
  f.claim_after = kClaimAfter;
  f.layout = layout;
  if (layout == redis::Layout::kBatch) f.default_retries = 0;  // slice 2 runs a task once
  auto feeder = redis::RedisFeeder::start(*n->pool, f);
  if (!feeder) {
    std::cerr << "sandpool-bench: cluster: node " << name << ": " << feeder.status().to_string()
              << "\n";
    return false;
  }
  n->feeder = std::move(feeder).value();
  return true;
}

bool run_cluster(const BenchOptions& o, Report& r) {
  RedisChild redis;
  if (!redis.start()) return false;
  const std::uint64_t tasks = o.cluster_tasks;
  const double local = local_throughput(o, tasks);
  Spent spent;
  const double one = through_nodes(o, redis, "one:", tasks, 1, &spent);
  const double three = through_nodes(o, redis, "three:", tasks, 3);
  if (local <= 0 || one <= 0 || three <= 0) {
    std::cerr << "sandpool-bench: cluster: a run failed\n";
    return false;
  }
  r.add("cluster", "throughput_1", one, "tasks/s");
  r.add("cluster", "throughput_3", three, "tasks/s");
  r.add("cluster", "local", local, "tasks/s");
  r.add("cluster", "vs_local", one / local, "ratio");
  const double n = static_cast<double>(tasks);
  r.add("cluster", "redis_us_per_task", (spent.run.script_us + spent.run.direct_us) / n, "us");
  r.add("cluster", "redis_cpu_us_per_task", spent.run.cpu_us / n, "us");
  r.add("cluster", "redis_us_per_submit", (spent.submits.script_us + spent.submits.direct_us) / n,
        "us");
  r.add("cluster", "node_cpu_us_per_task", spent.node_cpu_us / n, "us");
  if (!add_cluster_batch(o, redis, r)) return false;
  if (!add_profile(o, redis, r)) return false;
  r.add("cluster", "tasks", static_cast<double>(tasks), "tasks");
  const Waited w2 = waited_us(o, redis);
  r.add("cluster", "w2_p50_us", w2.p50, "us");
  r.add("cluster", "w2_p99_us", w2.p99, "us");
  return kill_run(o, redis, tasks, r);
}

bool run_cluster_w2(const BenchOptions& o, Report& r) {
  RedisChild redis;
  if (!redis.start()) return false;
  const Waited w2 = waited_us(o, redis);
  if (w2.p50 < 0) {
    std::cerr << "sandpool-bench: cluster-w2: a waited task failed\n";
    return false;
  }
  r.add("cluster-w2", "w2_p50_us", w2.p50, "us");
  r.add("cluster-w2", "w2_p99_us", w2.p99, "us");
  r.add("cluster-w2", "w2_hand_off_share", w2.hand_offs, "ratio");
  r.add("cluster-w2", "w2_direct_end_share", w2.direct_ends, "ratio");
  r.add("cluster-w2", "w2_lone_end_share", w2.lone_ends, "ratio");
  return true;
}

}  // namespace sandpool::bench
