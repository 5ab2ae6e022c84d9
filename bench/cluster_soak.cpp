// The cluster soak (issue 36): o.cluster_soak_tasks tasks of the chaos plugin (soak.hpp's
// mix, without its cancels) through 3 poold processes from the build tree that share one
// Redis pool on a redis-server of the bench's own (append-only file on, fsynced per write),
// submitted in batches through the nodes' sockets, while
// - a node is SIGKILLed and started again every o.cluster_soak_kill_every_s seconds,
// - at a quarter of the submits a node is drained (resumed at half),
// - at half, Redis is SIGKILLed and started again on its append-only file,
// - at three quarters, a node reloads a config whose pool changed (its task_types: the
//   reload replaces the pool, the old one drains what it read).
// The submitter waits at each of those three points until the event began, so a short run
// has them too. A batch whose answer did not come (a node killed, Redis away) is sent again
// to the next node with the same request token: it must get the first try's tasks.
// Then every accepted task is read back from Redis: lost (not ended when the streams are
// empty), dup (a task whose end was written twice: two `ok` attempts in its history, or an
// `ends` count above 1 in its hash; a run on a killed node whose end was never written is a rerun,
// at least once by contract, not a dup), and the local soak's tally of how each ended.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <sandpool/control/client.hpp>
#include <sandpool/ipc/wake.hpp>
#include <sandpool/redis/task_producer.hpp>

#include "bench.hpp"
#include "poold_child.hpp"
#include "redis_child.hpp"
#include "soak.hpp"

namespace sandpool::bench {
namespace {

using ipc::monotonic_ns;

constexpr std::size_t kNodes = 3;
constexpr std::uint32_t kClusterSoakConcurrency = 16;
constexpr std::size_t kClusterSoakBatch = 500;  // tasks per submit_batch
constexpr std::uint64_t kWindow = 20000;        // accepted and not ended, at most
constexpr std::chrono::milliseconds kClusterSoakBeat{200};
constexpr std::size_t kReadChunk = 1000;  // tasks per pipelined round trip when checking
const char* const kPrefix = "soak:";
const char* const kPool = "soak";

struct SoakNode {
  ScratchDir dir;
  std::optional<Poold> poold;
  fs::path config() const { return dir.path() / "poold.yaml"; }
  std::string socket() const { return (dir.path() / "poold.sock").string(); }
};

// Node i's config; `reloaded`: the one its reload reads (the pool's task_types named, which
// the first one leaves to the plugin: a change a pool cannot take in place).
std::string node_config(const BenchOptions& o, const RedisChild& redis, const SoakNode& n,
                        std::size_t i, bool reloaded) {
  const std::string keep = std::to_string(o.cluster_soak_tasks + kWindow);
  return bench_config(n.dir.path(),
                      "  journal: off\n  node: n" + std::to_string(i) + "\n  redis: {address: \"" +
                          redis.address() + "\", prefix: \"" + kPrefix + "\", heartbeat: " +
                          std::to_string(kClusterSoakBeat.count()) + "ms, finished: " + keep +
                          ", finished_max_age: 24h, finished_max_bytes: 16GiB}\n",
                      kPool, plugin_path(o, "chaos"), o.workers, kClusterSoakConcurrency,
                      "    backend: redis\n    restart: {max_restarts: 1000000}\n" +
                          std::string(reloaded ? "    task_types: [chaos]\n" : ""));
}

// Kills and starts nodes, on its own thread: one every `every` (a pacing, not a wait on the
// system), and the three events when the submitter reaches them (gate()).
class Chaos {
 public:
  Chaos(const BenchOptions& o, RedisChild& redis, std::vector<SoakNode>& nodes)
      : o_(o), redis_(redis), nodes_(nodes), rng_(o.soak_seed ^ 0x9e3779b97f4a7c15ULL) {}
  ~Chaos() { (void)stop(); }

  void start() {
    thread_ = std::thread([this] { run(); });
  }
  // Asks for event k (1: drain, 2: Redis restart, 3: reload) and waits until it is done;
  // false when it (or anything before it) failed.
  bool gate(int k) {
    std::unique_lock lock(mu_);
    asked_ = std::max(asked_, k);
    cv_.notify_all();
    cv_.wait(lock, [&] { return done_ >= k || !ok_; });
    return ok_;
  }
  // Stops the kills and joins; false when something failed (said on stderr).
  bool stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return ok_;
  }
  std::uint64_t kills() const { return kills_; }
  // What the drained node read or claimed between its drain's reply and its resume (its
  // status's counters; a read already under way at the drain may count); -1 when its
  // counters said nothing before the drain (then the figure would prove nothing).
  std::int64_t drained_reads() const { return drained_reads_; }

 private:
  void run() {
    std::unique_lock lock(mu_);
    while (!stopping_ && ok_) {
      if (asked_ > done_) {
        const int k = done_ + 1;
        lock.unlock();
        const bool ok = event(k);
        lock.lock();
        ok_ = ok_ && ok;
        done_ = k;
        cv_.notify_all();
        continue;
      }
      const auto every = std::chrono::seconds(o_.cluster_soak_kill_every_s);
      if (cv_.wait_for(lock, every, [&] { return stopping_ || asked_ > done_; })) continue;
      lock.unlock();
      const bool ok = kill_one();
      lock.lock();
      ok_ = ok_ && ok;
    }
    cv_.notify_all();
  }

  // SIGKILLs a node (not the drained one) and starts it again under its name.
  bool kill_one() {
    std::size_t i = rng_() % kNodes;
    if (drained_.load() == i) i = (i + 1) % kNodes;
    SoakNode& n = nodes_[i];
    n.poold->kill9();
    n.poold.reset();
    n.poold.emplace(n.dir.path(), n.config(), kPool);
    ++kills_;
    return n.poold->ready(o_.workers);
  }

  // A connection of its own per call: poold closes one idle past its idle_timeout (60 s),
  // longer than a drain lasts in a large run.
  Result<Client> admin(std::size_t i) { return Client::connect(nodes_[i].socket()); }
  // What node i read and claimed of the pool so far; 0 when it does not say.
  std::uint64_t taken_by(std::size_t i) {
    auto c = admin(i);
    auto s = c ? c->status() : Result<ops::StatusReply>(c.status());
    if (!s || !s->redis) return 0;
    for (const ops::RedisPoolStatus& p : s->redis->pools) {
      if (p.name == kPool) return p.read + p.claimed;
    }
    return 0;
  }

  bool event(int k) {
    if (!kill_one()) return false;
    if (k == 1) {
      auto c = admin(2);
      auto d = c ? c->drain(kPool) : Result<ops::PoolStateReply>(c.status());
      if (!d) return fail("drain: " + d.status().to_string());
      drained_.store(2);
      taken_at_drain_ = taken_by(2);
      return true;
    }
    if (k == 2) {
      const std::uint64_t taken = taken_by(2);  // n2 is not killed while drained
      drained_reads_ = taken_at_drain_ == 0
                           ? -1
                           : static_cast<std::int64_t>(taken - std::min(taken_at_drain_, taken));
      auto c = admin(2);
      auto r = c ? c->resume(kPool) : Result<ops::PoolStateReply>(c.status());
      if (!r) return fail("resume: " + r.status().to_string());
      drained_.store(kNodes);
      redis_.kill9();
      // Down long enough for the nodes to see it (their reads, ends and beats fail).
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      return redis_.start();
    }
    SoakNode& n = nodes_[1];
    std::ofstream(n.config()) << node_config(o_, redis_, n, 1, true);
    auto c = admin(1);
    auto r = c ? c->reload() : Result<ops::ReloadReply>(c.status());
    if (!r) return fail("reload: " + r.status().to_string());
    if (!r->failed.empty()) return fail("reload: the pool failed: " + r->failed[0].error);
    if (r->replaced.empty()) return fail("reload: the pool was not replaced");
    return true;
  }

  bool fail(const std::string& why) {
    std::cerr << "sandpool-bench: cluster-soak: " << why << "\n";
    return false;
  }

  const BenchOptions& o_;
  RedisChild& redis_;
  std::vector<SoakNode>& nodes_;
  std::mt19937_64 rng_;
  std::mutex mu_;
  std::condition_variable cv_;
  int asked_ = 0, done_ = 0;
  bool stopping_ = false, ok_ = true;
  std::atomic<std::size_t> drained_{kNodes};  // the drained node, kNodes: none
  std::atomic<std::uint64_t> kills_{0};
  // The chaos thread's; read after stop().
  std::uint64_t taken_at_drain_ = 0;
  std::int64_t drained_reads_ = -1;
  std::thread thread_;
};

// The submitter's side: its own connections to the nodes (by socket, reconnected after a
// kill) and to Redis (the window's count of ended tasks).
class Submitter {
 public:
  Submitter(const RedisChild& redis, const std::vector<SoakNode>& nodes, std::uint64_t tasks)
      : redis_(redis), nodes_(nodes), ids_(tasks, 0), clients_(kNodes) {}

  // Submits tasks [first, first + plans.size()) as one batch under `token`, to the next node
  // that answers, again with the same token until every task has an answer; false iff the
  // deadline passed first.
  bool batch(std::uint64_t first, const std::vector<soak::Plan>& plans, const std::string& token,
             soak::Tally& tally, std::int64_t deadline_ns) {
    std::vector<SubmitRequest> reqs;
    for (std::size_t i = 0; i < plans.size(); ++i) {
      SubmitRequest q;
      q.type = "chaos";
      q.pool = kPool;
      q.payload = soak::payload_for(plans[i].kind, first + i);
      const SubmitOptions so = soak::submit_options_for(plans[i].kind);
      q.options.retries = so.retries;
      q.options.timeout = so.timeout;
      reqs.push_back(std::move(q));
    }
    for (bool first_try = true;; first_try = false) {
      if (monotonic_ns() > deadline_ns) return false;
      if (!first_try) {
        ++resent_;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a node restarting
      }
      std::optional<Client>& c = clients_[next_++ % kNodes];
      if (!c) {
        auto connected = Client::connect(nodes_[(next_ - 1) % kNodes].socket());
        if (!connected) continue;
        c.emplace(std::move(connected).value());
      }
      auto r = c->submit_batch(reqs, token);
      if (!r || r->size() != reqs.size()) {
        c.reset();
        continue;
      }
      bool again = false;
      for (std::size_t i = 0; i < reqs.size(); ++i) {
        const Submitted& s = (*r)[i];
        if (s.status) {
          record(first + i, s.id, tally);
        } else if (retryable(s.status.code())) {
          again = true;
        } else if (ids_[first + i] == 0) {
          if (tally.refused() == 0) {
            std::cerr << "sandpool-bench: cluster-soak: refused: " << s.status.to_string() << "\n";
          }
          tally.refuse();
          ids_[first + i] = kRefused;
        }
      }
      if (!again) return true;
    }
  }

  // Tasks that ended (the pool's finished set); nullopt while Redis does not answer.
  std::optional<std::uint64_t> ended() {
    if (!redis_conn_) {
      auto c = redis::Connection::open(redis_.endpoint());
      if (!c) return std::nullopt;
      redis_conn_.emplace(std::move(c).value());
    }
    auto n = redis_conn_->command({"ZCARD", std::string(kPrefix) + kPool + ":done"});
    if (!n || n->is_error()) {
      redis_conn_.reset();
      return std::nullopt;
    }
    return static_cast<std::uint64_t>(n->integer);
  }

  const std::vector<std::uint64_t>& ids() const { return ids_; }  // 0: none, kRefused
  std::uint64_t resent() const { return resent_; }
  // Tasks a resent batch answered with another id than an earlier try did.
  std::uint64_t token_mismatches() const { return token_mismatches_; }
  static constexpr std::uint64_t kRefused = ~std::uint64_t{0};

 private:
  static bool retryable(Code c) {
    return c == Code::kTimeout || c == Code::kUnavailable || c == Code::kClosed ||
           c == Code::kQueueFull || c == Code::kSystem;
  }
  void record(std::uint64_t seq, std::uint64_t id, soak::Tally& tally) {
    if (ids_[seq] == 0) {
      ids_[seq] = id;
      tally.accept(seq, id);
    } else if (ids_[seq] != id) {
      if (token_mismatches_++ == 0) {
        std::cerr << "sandpool-bench: cluster-soak: task " << seq << " resent got id " << id
                  << ", its first try " << ids_[seq] << "\n";
      }
    }
  }

  const RedisChild& redis_;
  const std::vector<SoakNode>& nodes_;
  std::vector<std::uint64_t> ids_;
  std::vector<std::optional<Client>> clients_;
  std::optional<redis::Connection> redis_conn_;
  std::size_t next_ = 0;
  std::uint64_t resent_ = 0, token_mismatches_ = 0;
};

// Submits every task, the window bounding what is open, stopping at each quarter until the
// chaos's event began; false (said on stderr) on a deadline or a failed event.
bool submit_all(const BenchOptions& o, Submitter& sub, Chaos& chaos, soak::Tally& tally,
                std::int64_t deadline_ns) {
  std::mt19937_64 rng(o.soak_seed);
  const std::uint64_t tasks = o.cluster_soak_tasks;
  int gate = 1;
  std::uint64_t ended = 0;
  for (std::uint64_t first = 0; first < tasks; first += kClusterSoakBatch) {
    while (gate <= 3 && first >= tasks * static_cast<std::uint64_t>(gate) / 4) {
      if (!chaos.gate(gate++)) return false;
    }
    while (tally.accepted() > ended + kWindow) {
      if (monotonic_ns() > deadline_ns) {
        std::cerr << "sandpool-bench: cluster-soak: deadline passed while submitting\n";
        return false;
      }
      if (auto e = sub.ended()) ended = *e;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::vector<soak::Plan> plans;
    for (std::uint64_t seq = first; seq < std::min(tasks, first + kClusterSoakBatch); ++seq) {
      soak::Plan p = soak::draw_plan(rng);
      p.cancel = false;  // no cancels here: a cancel's timing is the local soak's subject
      tally.plan(seq, p);
      plans.push_back(p);
    }
    const std::string token =
        "cluster-soak-" + std::to_string(o.soak_seed) + "-" + std::to_string(first);
    if (!sub.batch(first, plans, token, tally, deadline_ns)) {
      std::cerr << "sandpool-bench: cluster-soak: deadline passed while submitting\n";
      return false;
    }
  }
  return true;
}

bool terminal(const std::string& state) {
  return state == "completed" || state == "dead_lettered" || state == "cancelled" ||
         state == "failed";
}

// Waits until every accepted task's hash says it ended and nothing is left in the streams,
// their pending lists or the later set; false (said on stderr) at the deadline.
bool wait_all_ended(const RedisChild& redis, const std::vector<std::uint64_t>& ids,
                    std::int64_t deadline_ns) {
  std::size_t from = 0;  // every task before it ended
  const redis::TaskProducer stream(redis::PoolKeys(kPrefix, kPool));
  for (;;) {
    auto c = redis::Connection::open(redis.endpoint());
    while (c && from < ids.size()) {
      const std::size_t to = std::min(ids.size(), from + kReadChunk);
      for (std::size_t i = from; i < to; ++i) {
        if (ids[i] != 0 && ids[i] != Submitter::kRefused) {
          (void)c->append(
              {"HGET", std::string(kPrefix) + "task:" + std::to_string(ids[i]), "state"});
        }
      }
      std::size_t i = from;
      bool open = false;
      for (; i < to; ++i) {
        if (ids[i] == 0 || ids[i] == Submitter::kRefused) continue;
        auto h = c->read();
        if (!h) return false;
        if (!open && !terminal(h->str)) open = true;
        if (!open) from = i + 1;
      }
      if (open) break;
      from = to;
    }
    if (c && from == ids.size()) {
      auto s = stream.summary(*c);
      if (s && s->length == 0 && s->pending == 0 && s->later == 0) return true;
    }
    if (monotonic_ns() > deadline_ns) {
      std::cerr << "sandpool-bench: cluster-soak: deadline passed with task seq " << from
                << " (and maybe more) not ended\n";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// The ending as the tally reads it: state, result and reason from the hash.
TaskResult result_of(const redis::StoredTask& t) {
  TaskResult r;
  const std::string& state = t.state;
  r.state = state == "completed"       ? TaskState::kCompleted
            : state == "dead_lettered" ? TaskState::kDeadLettered
            : state == "cancelled"     ? TaskState::kCancelled
                                       : TaskState::kQueued;
  r.result = t.result;
  for (int i = 0; i <= static_cast<int>(DeadReason::kRejected); ++i) {
    if (t.reason == to_string(static_cast<DeadReason>(i))) r.reason = static_cast<DeadReason>(i);
  }
  r.error = t.error;
  return r;
}

struct Checked {
  std::uint64_t dup = 0, reran = 0, lost_attempts = 0;
  std::string first_dup;
};

// Reads every accepted task back (TaskProducer::task's reads, pipelined): its end goes to the
// tally; its history and its count of ends say whether its end was written twice (dup) and
// whether it ran again after a node died.
bool check_all(const RedisChild& redis, const std::vector<std::uint64_t>& ids, soak::Tally& tally,
               Checked* out) {
  auto c = redis::Connection::open(redis.endpoint());
  if (!c) return false;
  const redis::TaskProducer producer(redis::PoolKeys(kPrefix, kPool));
  for (std::size_t from = 0; from < ids.size(); from += kReadChunk) {
    const std::size_t to = std::min(ids.size(), from + kReadChunk);
    std::size_t per_task = 0;
    for (std::size_t i = from; i < to; ++i) {
      if (ids[i] == 0 || ids[i] == Submitter::kRefused) continue;
      const auto reads = producer.task_reads(ids[i]);
      per_task = reads.size();
      for (const auto& r : reads) (void)c->append(r);
    }
    for (std::size_t i = from; i < to; ++i) {
      if (ids[i] == 0 || ids[i] == Submitter::kRefused) continue;
      std::vector<redis::Reply> replies;
      for (std::size_t k = 0; k < per_task; ++k) {
        auto one = c->read();
        if (!one) return false;
        replies.push_back(std::move(one).value());
      }
      if (replies.size() != 2) return false;
      // No hash (nullopt): not ended, so not tallied: lost.
      const redis::StoredTask t = redis::TaskProducer::stored_task(ids[i], replies[0], replies[1])
                                      .value_or(redis::StoredTask{});
      const std::uint64_t ends = t.ends;
      std::uint64_t ok = 0, lost = 0;
      for (const std::string& a : t.history) {
        const auto j = nlohmann::json::parse(a, nullptr, false);
        const std::string outcome = j.is_object() ? j.value("outcome", "") : "";
        ok += outcome == to_string(Outcome::kOk);
        lost += outcome == to_string(Outcome::kLost);
      }
      if (ok > 1 || ends > 1) {
        if (out->dup++ == 0) {
          out->first_dup = "task " + std::to_string(ids[i]) + " (seq " + std::to_string(i) +
                           "): " + std::to_string(ok) + " ok attempts, " + std::to_string(ends) +
                           " ends";
        }
      }
      out->reran += lost > 0;
      out->lost_attempts += lost;
      TaskResult r = result_of(t);
      r.id = ids[i];
      if (terminal(t.state)) tally.on_done(i, r);
    }
  }
  return true;
}

}  // namespace

bool run_cluster_soak(const BenchOptions& o_in, Report& r) {
  BenchOptions o = o_in;
  if (o.soak_seed == 0) o.soak_seed = std::random_device{}() | 1;
  RedisChild redis(/*aof=*/true);
  if (!redis.start()) return false;
  std::vector<SoakNode> nodes(kNodes);
  for (std::size_t i = 0; i < kNodes; ++i) {
    if (nodes[i].dir.path().empty()) return false;
    std::ofstream(nodes[i].config()) << node_config(o, redis, nodes[i], i, false);
    nodes[i].poold.emplace(nodes[i].dir.path(), nodes[i].config(), kPool);
  }
  for (SoakNode& n : nodes) {
    if (!n.poold->ready(o.workers)) return false;
  }
  const std::uint64_t tasks = o.cluster_soak_tasks;
  soak::Tally tally(tasks, kWindow);
  Submitter sub(redis, nodes, tasks);
  Chaos chaos(o, redis, nodes);
  const std::int64_t deadline = monotonic_ns() + std::int64_t{o.soak_deadline_s} * 1'000'000'000;
  const std::int64_t t0 = monotonic_ns();
  chaos.start();
  bool ok = submit_all(o, sub, chaos, tally, deadline);
  // The kills go on until the pool's finished set holds every accepted task, then stop, so
  // that what the last one left is claimed and run before the check.
  for (std::uint64_t ended = 0; ok && ended < tally.accepted();) {
    if (monotonic_ns() > deadline) break;  // wait_all_ended says what is left
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (auto e = sub.ended()) ended = *e;
  }
  ok = chaos.stop() && ok;
  ok = ok && wait_all_ended(redis, sub.ids(), deadline);
  const double wall = static_cast<double>(monotonic_ns() - t0) / 1e9;
  Checked checked;
  if (!check_all(redis, sub.ids(), tally, &checked)) {
    std::cerr << "sandpool-bench: cluster-soak: reading the tasks back from Redis failed\n";
    return false;
  }
  r.note("cluster-soak seed " + std::to_string(o.soak_seed) + ", " + std::to_string(kNodes) +
         " poold nodes of " + std::to_string(o.workers) + " workers");
  r.note("cluster-soak: lost " + std::to_string(tally.open()) + " dup " +
         std::to_string(checked.dup));
  if (checked.dup != 0) r.note("cluster-soak: first dup: " + checked.first_dup);
  if (tally.unexpected() != 0)
    r.note("cluster-soak: first unexpected end: " + tally.first_unexpected());
  for (const std::string& s : tally.open_tasks(10)) r.note("cluster-soak: lost: seq " + s);
  r.add("cluster-soak", "tasks", static_cast<double>(tally.accepted()), "tasks");
  r.add("cluster-soak", "lost", static_cast<double>(tally.open()), "tasks");
  r.add("cluster-soak", "dup", static_cast<double>(checked.dup), "tasks");
  r.add("cluster-soak", "completed", static_cast<double>(tally.completed()), "tasks");
  r.add("cluster-soak", "dead_lettered", static_cast<double>(tally.dead_lettered()), "tasks");
  r.add("cluster-soak", "unexpected", static_cast<double>(tally.unexpected()), "tasks");
  r.add("cluster-soak", "refused", static_cast<double>(tally.refused()), "tasks");
  r.add("cluster-soak", "kills", static_cast<double>(chaos.kills()), "nodes");
  r.add("cluster-soak", "reran", static_cast<double>(checked.reran), "tasks");
  r.add("cluster-soak", "lost_attempts", static_cast<double>(checked.lost_attempts), "attempts");
  r.add("cluster-soak", "drained_node_reads", static_cast<double>(chaos.drained_reads()),
        "entries");
  r.add("cluster-soak", "batches_resent", static_cast<double>(sub.resent()), "batches");
  r.add("cluster-soak", "token_mismatches", static_cast<double>(sub.token_mismatches()), "tasks");
  r.add("cluster-soak", "wall", wall, "s");
  r.add("cluster-soak", "throughput", static_cast<double>(tally.accepted()) / wall, "tasks/s");
  return ok && tally.open() == 0 && checked.dup == 0 && tally.unexpected() == 0 &&
         tally.refused() == 0 && sub.token_mismatches() == 0;
}

}  // namespace sandpool::bench
