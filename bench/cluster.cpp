// The cluster group (issue 15): Redis pools, with a redis-server of the bench's own on a unix
// socket in a scratch directory (append-only file off: the figures are the nodes' and the
// scripts', not the disk's).
// - throughput_1 / throughput_3: no-op echo tasks, all added to the stream first, through 1
//   and 3 nodes (each with `--workers` workers); vs_local: throughput_1 over the same pool
//   fed directly (Pool::submit), in the same run. A node here is a local Pool plus a
//   RedisFeeder in this process, as poold runs one per Redis pool (no control plane between).
// - kill_lost / kill_reran / failover_ms: 3 poold processes from the build tree share the
//   pool; one is SIGKILLed at a random point of the run, holding entries (kill_held: those
//   claimed from it, each with a `lost` attempt); tasks that never reach a terminal state
//   (must be 0), tasks with more than one attempt, and the time from the kill to the first of
//   its entries claimed by another node (the first `lost` attempt's end, wall clock).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <sandpool/ipc/wake.hpp>
#include <sandpool/wall_clock.hpp>

#include "bench.hpp"
#include "poold_child.hpp"
#include "redis/redis_feeder.hpp"

namespace sandpool::bench {
namespace {

using ipc::monotonic_ns;
constexpr std::uint32_t kConcurrency = 64;
constexpr std::chrono::milliseconds kBeat{100}, kClaimAfter{1000};

// A redis-server on a unix socket in a scratch directory, killed at the end.
class RedisChild {
 public:
  bool start() {
    if (dir_.path().empty()) return false;
    socket_ = (dir_.path() / "redis.sock").string();
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      const std::string dir = dir_.path().string(), log = (dir_.path() / "redis.log").string();
      ::execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", socket_.c_str(),
               "--unixsocketperm", "700", "--dir", dir.c_str(), "--save", "", "--appendonly", "no",
               "--daemonize", "no", "--logfile", log.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const std::int64_t until = monotonic_ns() + 30'000'000'000;
    while (monotonic_ns() < until) {
      if (auto c = redis::Connection::open(endpoint())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::cerr << "sandpool-bench: cluster: redis-server did not start (is it installed?)\n";
    return false;
  }
  ~RedisChild() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  redis::Endpoint endpoint() const {
    redis::Endpoint e;
    e.unix_path = socket_;
    return e;
  }

 private:
  ScratchDir dir_;
  std::string socket_;
  pid_t pid_ = 0;
};

struct Node {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<redis::RedisFeeder> feeder;
};

bool start_node(const BenchOptions& o, const RedisChild& redis, const std::string& prefix,
                const std::string& name, Node* n) {
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
  auto feeder = redis::RedisFeeder::start(*n->pool, f);
  if (!feeder) {
    std::cerr << "sandpool-bench: cluster: " << feeder.status().to_string() << "\n";
    return false;
  }
  n->feeder = std::move(feeder).value();
  return true;
}

// Adds `tasks` echo tasks to the prefix's stream, pipelined; false on a Redis failure.
bool fill(const RedisChild& redis, const std::string& prefix, std::uint64_t tasks,
          std::uint32_t payload_size) {
  auto c = redis::Connection::open(redis.endpoint());
  if (!c) return false;
  const redis::TaskStream stream(prefix, "echo");
  if (!stream.ensure_group(*c)) return false;
  for (std::uint64_t i = 0; i < tasks; ++i) {
    redis::StreamTask t;
    t.type = "echo";
    t.payload = make_payload(i, payload_size);
    if (!stream.submit(*c, t, 1)) return false;
  }
  return true;
}

std::uint64_t finished(const std::vector<Node>& nodes) {
  std::uint64_t n = 0;
  for (const Node& node : nodes) n += node.feeder->stats().finished;
  return n;
}

// Runs `tasks` through `count` fresh nodes; returns tasks/s, or 0 on failure.
double through_nodes(const BenchOptions& o, const RedisChild& redis, const std::string& prefix,
                     std::uint64_t tasks, int count) {
  if (!fill(redis, prefix, tasks, o.payload_size)) return 0;
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
  return static_cast<double>(tasks) / (static_cast<double>(monotonic_ns() - t0) / 1e9);
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
                                                     const redis::TaskStream& stream) {
  std::map<std::string, std::uint64_t> out;
  for (const redis::Band b : redis::kBands) {
    auto p = c.command({"XPENDING", stream.stream_key(b), redis::TaskStream::kGroup});
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

// Three poold processes share the pool; one is SIGKILLed at a random point while it holds
// entries. Every task must reach a terminal state.
bool kill_run(const BenchOptions& o, const RedisChild& redis, std::uint64_t tasks, Report& r) {
  const std::string prefix = "kill:";
  if (!fill(redis, prefix, tasks, o.payload_size)) return false;
  struct PooldNode {
    ScratchDir dir;
    std::optional<Poold> poold;
  };
  std::vector<PooldNode> nodes(3);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    PooldNode& n = nodes[i];
    if (n.dir.path().empty()) return false;
    const fs::path config = n.dir.path() / "poold.yaml";
    std::ofstream(config) << bench_config(
        n.dir.path(),
        "  journal: off\n  node: n" + std::to_string(i) +
            "\n  redis: {address: \"unix:" + redis.endpoint().unix_path + "\", prefix: \"" +
            prefix + "\", heartbeat: " + std::to_string(kBeat.count()) + "ms}\n",
        "echo", plugin_path(o, "echo"), o.workers, kConcurrency, "    backend: redis\n");
    n.poold.emplace(n.dir.path(), config, "echo");
  }
  for (PooldNode& n : nodes) {
    if (!n.poold->ready(o.workers)) return false;
  }
  auto c = redis::Connection::open(redis.endpoint());
  if (!c) return false;
  const redis::TaskStream stream(prefix, "echo");
  const auto done = [&] {
    auto n = c->command({"ZCARD", prefix + "echo:done"});
    return n ? static_cast<std::uint64_t>(n->integer) : 0;
  };
  std::mt19937_64 rng(std::random_device{}());
  const std::uint64_t at = tasks / 5 + rng() % (tasks / 2);  // dies between 20% and 70%
  while (done() < at) std::this_thread::sleep_for(std::chrono::microseconds(500));
  // It dies holding entries (a node between two reads holds none, and its death costs nothing).
  // Stopped before the look, so what it holds cannot end between the look and the kill.
  for (;;) {
    if (!stop_process(nodes[0].poold->pid())) return nodes[0].poold->fail("SIGSTOP");
    // A round trip first: whatever it sent before it stopped is in Redis's hands by then.
    if (c->command({"PING"}) && pending_by_node(*c, stream)["n0"] > 0) break;
    ::kill(nodes[0].poold->pid(), SIGCONT);
    if (done() >= tasks) {
      std::string held;
      for (const auto& [node, n] : pending_by_node(*c, stream)) {
        held += " " + node + "=" + std::to_string(n);
      }
      return nodes[0].poold->fail("n0 was never caught holding an entry (looked from " +
                                  std::to_string(at) + " of " + std::to_string(tasks) +
                                  " done; pending now:" + held + ")");
    }
    std::this_thread::yield();
  }
  const std::int64_t died_ms = wall_clock_ms();
  const std::int64_t died = monotonic_ns();
  nodes[0].poold->kill9();
  const std::int64_t until = died + 600'000'000'000;
  for (;;) {
    std::uint64_t length = 0, open = 0;
    for (const redis::Band b : redis::kBands) {
      length += static_cast<std::uint64_t>(c->command({"XLEN", stream.stream_key(b)})->integer);
    }
    for (const auto& [node, n] : pending_by_node(*c, stream)) open += n;
    if ((length == 0 && open == 0) || monotonic_ns() > until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Every task, by id (the prefix's counter is this run's: ids from kFirstId on).
  std::uint64_t terminal = 0, reran = 0;
  std::vector<std::uint64_t> rerun_ids;
  const std::uint64_t first = redis::TaskStream::kFirstId, end = first + tasks;
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
    }
    if (h->elements[1].str != "1" && h->elements[1].str != "0") {
      ++reran;
      rerun_ids.push_back(id);
    }
  }
  // What the dead node left: the tasks claimed from it, each with one `lost` attempt, whose
  // end time is the claim's (failover: the first of them, from the signal).
  std::uint64_t held = 0;
  std::int64_t first_claim_ms = -1;
  for (const std::uint64_t id : rerun_ids) {
    auto attempts =
        c->command({"LRANGE", prefix + "task:" + std::to_string(id) + ":attempts", "0", "-1"});
    if (!attempts) return false;
    for (const redis::Reply& a : attempts->elements) {
      const auto j = nlohmann::json::parse(a.str, nullptr, false);
      if (j.is_discarded() || j.value("outcome", "") != "lost") continue;
      ++held;
      const std::int64_t at = j.value("ended_ms", std::int64_t{0});
      if (first_claim_ms < 0 || at < first_claim_ms) first_claim_ms = at;
    }
  }
  const double failover_ms =
      first_claim_ms < 0 ? -1.0 : static_cast<double>(first_claim_ms - died_ms);
  r.add("cluster", "kill_lost", static_cast<double>(tasks - terminal), "tasks");
  r.add("cluster", "kill_reran", static_cast<double>(reran), "tasks");
  r.add("cluster", "failover_ms", failover_ms, "ms");
  r.add("cluster", "kill_tasks", static_cast<double>(tasks), "tasks");
  r.add("cluster", "kill_held", static_cast<double>(held), "tasks");  // claimed from it
  return terminal == tasks;
}

}  // namespace

bool run_cluster(const BenchOptions& o, Report& r) {
  RedisChild redis;
  if (!redis.start()) return false;
  const std::uint64_t tasks = o.cluster_tasks;
  const double local = local_throughput(o, tasks);
  const double one = through_nodes(o, redis, "one:", tasks, 1);
  const double three = through_nodes(o, redis, "three:", tasks, 3);
  if (local <= 0 || one <= 0 || three <= 0) {
    std::cerr << "sandpool-bench: cluster: a run failed\n";
    return false;
  }
  r.add("cluster", "throughput_1", one, "tasks/s");
  r.add("cluster", "throughput_3", three, "tasks/s");
  r.add("cluster", "local", local, "tasks/s");
  r.add("cluster", "vs_local", one / local, "ratio");
  r.add("cluster", "tasks", static_cast<double>(tasks), "tasks");
  return kill_run(o, redis, tasks, r);
}

}  // namespace sandpool::bench
