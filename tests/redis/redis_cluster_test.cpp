// Redis pools in real poold nodes (docs/redis-pools.md): three nodes share a pool through a
// redis-server of the test's own; one is SIGKILLed and Redis is restarted (after a clean
// SHUTDOWN, or a SIGKILL under appendfsync always) during a batch, and every acknowledged task
// ends in exactly one terminal record. A node refuses submits while Redis is away and says so,
// and takes them again once it is back.
#include <signal.h>

#include <httplib.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "command_runner.hpp"
#include "poold_process.hpp"
#include "redis_server.hpp"
#include "redis_test_support.hpp"

namespace sandpool::testing {
namespace {

using namespace std::chrono_literals;

// A node of the cluster: its own dir, socket and state, the shared Redis, its own name.
// `heartbeat` is also the claim time's unit (an entry idle three beats is claimed): the
// tests where failover is not the subject beat slowly, so a node the machine starves for a
// moment does not lose its entries to another (or to itself).
struct ClusterNode : PooldFixture {
  ClusterNode(const RedisServer& redis, const std::string& name, const std::string& pool_extra,
              const std::string& heartbeat = "200ms")
      : PooldFixture("pools:\n" + pool_yaml("shared", "sleep",
                                            "    backend: redis\n"
                                            "    concurrency: 1\n"
                                            "    task_defaults: {timeout: 1m, retries: 5}\n" +
                                                pool_extra,
                                            "{min: 1, max: 4, initial: 2}"),
                     "  node: " + name + "\n  redis: {address: \"unix:" + redis.socket() +
                         "\", heartbeat: " + heartbeat + "}\n") {}
};

// A connection to the test's Redis, reopened after a restart.
redis::Connection open_redis(const RedisServer& server) {
  std::optional<redis::Connection> c;
  REQUIRE(eventually([&] {
    auto opened = redis::Connection::open(server.endpoint());
    if (opened) c.emplace(std::move(opened).value());
    return c.has_value();
  }));
  return std::move(*c);
}

std::uint64_t finished_in_redis(const RedisServer& server) {
  auto c = redis::Connection::open(server.endpoint());
  if (!c) return 0;
  auto n = c->command({"ZCARD", "sandpool:shared:done"});
  return n ? static_cast<std::uint64_t>(n->integer) : 0;
}

// Submits `n` sleep tasks of `ms` through `node` as one batch; the acknowledged ids.
std::vector<std::uint64_t> submit_sleeps(ClusterNode& node, int n, const std::string& ms) {
  Client c = node.connect();
  auto ids = c.submit_batch(std::vector<SubmitRequest>(n, task("sleep", ms)));
  std::vector<std::uint64_t> out;
  if (!ids) return out;
  for (const Submitted& s : *ids) {
    if (s.status.is_ok()) out.push_back(s.id);
  }
  return out;
}

// SIGSTOPs `node`'s poold and waits until the kernel says it is stopped (state T).
void stop_node(PooldProcess& node) {
  node.signal(SIGSTOP);
  const std::string stat = "/proc/" + std::to_string(node.pid()) + "/stat";
  REQUIRE(eventually([&] {
    const std::string text = slurp(stat);
    const auto paren = text.rfind(')');  // the name may hold spaces; the state follows it
    return paren != std::string::npos && text.compare(paren + 1, 3, " T ") == 0;
  }));
}

// The ids of the tasks whose entries (in the normal band) are pending for `consumer`.
std::set<std::uint64_t> tasks_pending_for(redis::Connection& c, const std::string& consumer) {
  // A round trip first: whatever a node sent before it stopped is in Redis's hands by then.
  REQUIRE(c.command({"PING"}));
  std::set<std::uint64_t> ids;
  auto pending =
      c.command({"XPENDING", "sandpool:shared:q:0", "sandpool", "-", "+", "1000", consumer});
  REQUIRE(pending);
  for (const auto& p : pending->elements) {
    const std::string& entry = p.elements.at(0).str;
    auto range = c.command({"XRANGE", "sandpool:shared:q:0", entry, entry});
    REQUIRE(range);
    REQUIRE(range->elements.size() == 1);
    const auto& fields = range->elements[0].elements.at(1).elements;
    for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
      if (fields[i].str == "id") ids.insert(std::stoull(fields[i + 1].str));
    }
  }
  return ids;
}

// What `node` claimed from other nodes (or from itself) since it started: its one pool's.
std::uint64_t claimed_by(ClusterNode& node) {
  auto st = node.connect().status();
  REQUIRE(st);
  REQUIRE(st->redis);
  REQUIRE(st->redis->pools.size() == 1);
  return st->redis->pools[0].claimed;
}

}  // namespace

TEST_CASE("three poold nodes share a redis pool through a SIGKILL of one and a restart of redis",
          "[redis][cluster]") {
  // Redis stops cleanly (SHUTDOWN), or is killed (SIGKILL) as a crash would: with the
  // append-only file and appendfsync always, neither loses an acknowledged task.
  const bool kill_redis = GENERATE(false, true);
  INFO((kill_redis ? "redis SIGKILLed" : "redis shut down"));
  RedisServer redis({.password = "", .append_only = true});
  std::vector<std::unique_ptr<ClusterNode>> nodes;
  for (const char* name : {"n0", "n1", "n2"}) {
    nodes.push_back(std::make_unique<ClusterNode>(redis, name, ""));
  }
  // Ids are the cluster's: above every local id, and unique across the nodes.
  std::vector<std::uint64_t> acked = submit_sleeps(*nodes[0], 300, "20");
  REQUIRE(acked.size() == 300);
  CHECK(acked.front() >= (std::uint64_t{1} << 52));
  {
    const auto more = submit_sleeps(*nodes[2], 300, "20");
    REQUIRE(more.size() == 300);
    acked.insert(acked.end(), more.begin(), more.end());
  }
  REQUIRE(std::set<std::uint64_t>(acked.begin(), acked.end()).size() == acked.size());

  // Mid-batch: node n1 dies holding entries, then Redis is shut down cleanly and restarted.
  // n1 is stopped first, so what it holds when it dies is read from Redis, not guessed.
  REQUIRE(eventually([&] { return finished_in_redis(redis) >= 60; }));
  std::set<std::uint64_t> held_by_n1;
  {
    redis::Connection c = open_redis(redis);
    REQUIRE(eventually([&] {
      stop_node(*nodes[1]->poold);
      held_by_n1 = tasks_pending_for(c, "n1");
      if (held_by_n1.empty()) nodes[1]->poold->signal(SIGCONT);  // between two reads: again
      return !held_by_n1.empty();
    }));
  }
  nodes[1]->poold->signal(SIGKILL);
  REQUIRE(nodes[1]->poold->wait_exit() == 128 + SIGKILL);
  if (kill_redis) {
    redis.kill9();
  } else {
    redis.shutdown();
  }
  // While Redis is away a node refuses submits, naming the pool and the server.
  {
    Client c = nodes[0]->connect();
    auto refused = c.submit(task("sleep", "1"));
    REQUIRE_FALSE(refused);
    // The wire code `unavailable` (the client keeps kUnavailable for a poold it cannot reach).
    CHECK_THAT(refused.status().message(), Catch::StartsWith("unavailable: redis pool shared") &&
                                               Catch::Contains(redis.socket()));
  }
  redis.start();
  // Back: the nodes reconnect by themselves and take submits again.
  // Every acknowledged task counts, those of a batch Redis refused in part too.
  REQUIRE(eventually([&] {
    const auto after = submit_sleeps(*nodes[2], 100, "5");
    acked.insert(acked.end(), after.begin(), after.end());
    return after.size() == 100;
  }));

  // Every acknowledged task ends, each with exactly one terminal record (one push of its
  // end list, which only the fenced finish makes), completed (retries cover the lost tries).
  redis::Connection c = open_redis(redis);
  const auto all_ended = [&] {
    for (std::uint64_t id : acked) {
      auto state = c.command({"HGET", "sandpool:task:" + std::to_string(id), "state"});
      if (!state || state->str != "completed") return false;
    }
    return true;
  };
  REQUIRE(eventually(all_ended));
  std::size_t lost_attempts = 0;
  for (std::uint64_t id : acked) {
    const redis::StoredTask t = stored_task(c, id);
    INFO("task " << id);
    CHECK(t.ends == 1);
    std::size_t lost_here = 0;
    for (const std::string& a : t.history) {
      if (a.find("\"lost\"") == std::string::npos) continue;
      ++lost_here;
      CHECK_THAT(a, Catch::Contains("claimed by n0") || Catch::Contains("claimed by n2"));
    }
    // What n1 held when it died, another node claimed, each with a `lost` attempt. (A live
    // node's entries may be claimed too: Redis was away meanwhile, and their idle time grew.)
    if (held_by_n1.count(id) != 0) CHECK(lost_here >= 1);
    lost_attempts += lost_here;
  }
  CHECK(lost_attempts >= held_by_n1.size());
  for (std::uint64_t id : held_by_n1) CHECK(std::count(acked.begin(), acked.end(), id) == 1);
  // Nothing is left pending in the group.
  auto pending = c.command({"XPENDING", "sandpool:shared:q:0", "sandpool"});
  REQUIRE(pending);
  CHECK(pending->elements.at(0).integer == 0);

  // Any node answers for any task: n2 reads one n0 took, with its history.
  Client n2 = nodes[2]->connect();
  auto t = n2.task(acked.front());
  REQUIRE(t);
  CHECK(t->account.state == "completed");
  CHECK(t->account.attempts >= 1);
  // And `status` shows the cluster: both live nodes alive, n1's name gone or not alive.
  auto st = n2.status();
  REQUIRE(st);
  REQUIRE(st->redis);
  CHECK(st->redis->node == "n2");
  CHECK(st->redis->up);
}

TEST_CASE("a task waiting out its backoff in redis survives the node that ran its first attempt",
          "[redis][cluster]") {
  RedisServer redis;
  // flaky: attempt 1 asks for a retry, attempt 2 answers "ok on attempt 2". The nodes beat
  // every 2 s: a due task is moved within one beat, and no entry is claimed before 6 s idle.
  const std::string flaky =
      "    backend: redis\n"
      "    task_defaults: {retries: 3}\n"
      "    retry: {base: 3s, max: 3s}\n";
  auto node_yaml = [&](const TempDir& dir, const std::string& name) {
    write_file(dir.path / "poold.yaml",
               service_yaml(dir.path, "  node: " + name + "\n  redis: {address: \"unix:" +
                                          redis.socket() + "\", heartbeat: 2s}\n") +
                   "pools:\n" + pool_yaml("shared", "flaky", flaky));
    return dir.path / "poold.yaml";
  };
  TempDir dir_a, dir_b;
  std::optional<PooldProcess> a;
  a.emplace(node_yaml(dir_a, "ra"));
  REQUIRE(a->wait_ready());
  auto ca = Client::connect((dir_a.path / "poold.sock").string());
  REQUIRE(ca);
  auto conn = open_redis(redis);
  // Node a is stopped once a task's first attempt ended. Full jitter may draw a backoff near
  // 0, so that a moved the task on before it stopped: then another task is tried. Stopped
  // with the task still in Redis's later set, a cannot run its second attempt.
  std::optional<Submitted> id;
  std::string h;
  for (int tries = 0; tries < 20 && !id; ++tries) {
    auto s = ca->submit(task("flaky", "x"));
    REQUIRE(s);
    h = "sandpool:task:" + std::to_string(s->id);
    REQUIRE(eventually([&] { return !stored_task(conn, s->id).history.empty(); }));
    stop_node(*a);
    auto st = conn.command({"HGET", h, "state"});
    REQUIRE(st);
    if (st->str == "retry_wait") {
      id = *s;
    } else {
      a->signal(SIGCONT);
    }
  }
  REQUIRE(id);
  // Its next attempt is due in Redis's later set, not in node a's memory: kill -9 node a.
  CHECK_FALSE(conn.command({"ZSCORE", "sandpool:shared:later", std::to_string(id->id)})->is_nil());
  a->signal(SIGKILL);
  REQUIRE(a->wait_exit() == 128 + SIGKILL);
  // Node b, started after, runs attempt 2 once it is due: numbered 2, no attempt lost.
  PooldProcess b(node_yaml(dir_b, "rb"));
  REQUIRE(b.wait_ready());
  auto cb = Client::connect((dir_b.path / "poold.sock").string());
  REQUIRE(cb);
  auto done = cb->wait(id->id, std::chrono::milliseconds(60000));
  REQUIRE(done);
  CHECK(done->account.state == "completed");
  CHECK(done->result == "ok on attempt 2");
  REQUIRE(done->account.history.size() == 2);
  CHECK(done->account.history[0].outcome == "error");
  CHECK(done->account.history[1].outcome == "ok");
  CHECK(done->account.history[1].number == 2);
  CHECK(conn.command({"HGET", h, "node"})->str == "rb");
  auto bst = cb->status();
  REQUIRE(bst);
  REQUIRE(bst->redis);
  CHECK(bst->redis->pools.at(0).claimed == 0);  // b read it from the stream: no entry was lost
}

TEST_CASE("a cluster task is cancelled from any node, queued or running on another node",
          "[redis][cluster]") {
  RedisServer redis;
  ClusterNode a(redis, "ca", "");
  ClusterNode b(redis, "cb", "");
  Client c = a.connect();
  // Four places in the cluster (two nodes, two workers each): four run, the fifth waits.
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 5; ++i) {
    auto s = c.submit(task("sleep", "60000"));
    REQUIRE(s);
    ids.push_back(s->id);
  }
  auto conn = open_redis(redis);
  REQUIRE(eventually([&] {
    auto p = conn.command({"XPENDING", "sandpool:shared:q:0", "sandpool"});
    return p && !p->elements.empty() && p->elements[0].integer == 4;
  }));
  // The one no node read: cancelled at once, by the other node.
  Client d = b.connect();
  const auto unread = std::find_if(ids.begin(), ids.end(), [&](std::uint64_t id) {
    auto entry = conn.command({"HGET", "sandpool:task:" + std::to_string(id), "entry"});
    auto p =
        conn.command({"XPENDING", "sandpool:shared:q:0", "sandpool", entry->str, entry->str, "1"});
    return p && p->elements.empty();
  });
  REQUIRE(unread != ids.end());
  auto queued = d.cancel(*unread);
  REQUIRE(queued);
  CHECK(queued->cancelled);
  CHECK(queued->state == "cancelled");
  // A running one: flagged, and the node running it cancels it at its next beat.
  const std::uint64_t run = *unread == ids[0] ? ids[1] : ids[0];
  auto running = d.cancel(run);
  REQUIRE(running);
  CHECK(running->cancelled);
  auto ended = d.wait(run, std::chrono::milliseconds(30000));
  REQUIRE(ended);
  CHECK(ended->account.state == "cancelled");
  // Ended: nothing more to cancel; unknown: not found.
  auto again = d.cancel(*unread);
  REQUIRE(again);
  CHECK_FALSE(again->cancelled);
  CHECK_FALSE(d.cancel((std::uint64_t{1} << 52) + 999999));
  for (std::uint64_t id : ids) (void)d.cancel(id);  // the nodes stop without waiting a minute
}

TEST_CASE(
    "a waited submit to a redis pool is answered by the node that submitted it, whichever runs it",
    "[redis][cluster]") {
  RedisServer redis;
  ClusterNode a(redis, "wa", "");
  ClusterNode b(redis, "wb", "");
  Client c = a.connect();
  auto r = c.submit_wait(task("sleep", "10"));
  REQUIRE(r);
  CHECK(r->account.state == "completed");
  CHECK(r->account.id >= (std::uint64_t{1} << 52));
  // `wait` by id from the other node, and on an id Redis never gave: not found.
  Client d = b.connect();
  auto w = d.wait(r->account.id, std::chrono::milliseconds(10000));
  REQUIRE(w);
  CHECK(w->account.state == "completed");
  auto unknown = d.wait((std::uint64_t{1} << 52) + 999999, std::chrono::milliseconds(10000));
  REQUIRE_FALSE(unknown);
  CHECK(unknown.status().code() == Code::kNotFound);
}

TEST_CASE("a redis pool's dead letters are listed and shown from redis, by their task's id",
          "[redis][cluster]") {
  RedisServer redis;
  PooldFixture node("pools:\n" + pool_yaml("failing", "fail", "    backend: redis\n"),
                    "  node: dl\n  redis: {address: \"unix:" + redis.socket() + "\"}\n");
  Client c = node.connect();
  auto r = c.submit_wait(task("fail", "bad input"));
  REQUIRE(r);
  CHECK(r->account.state == "dead_lettered");
  CHECK(r->account.reason == "permanent");
  ops::DlqListArgs args;
  args.filter.pool = "failing";
  auto list = c.dlq_list(args);
  REQUIRE(list);
  REQUIRE(list->entries.size() == 1);
  CHECK(list->entries[0].letter_id == r->account.id);
  CHECK(list->entries[0].pool == "failing");
  CHECK(list->entries[0].task.reason == "permanent");
  CHECK(list->entries[0].payload_bytes == 9);
  args.filter.reason = "retries_exhausted";
  auto none = c.dlq_list(args);
  REQUIRE(none);
  CHECK(none->entries.empty());
  auto shown = c.dlq_show(r->account.id);
  REQUIRE(shown);
  CHECK(shown->blob == "bad input");
  CHECK(shown->reply.letter.task.type == "fail");
  // The node's own store has none of it.
  auto local = c.dlq_list({});
  REQUIRE(local);
  CHECK(local->entries.empty());
}

TEST_CASE("a redis pool's scheduled task waits in redis, seen from any node, and runs when due",
          "[redis][cluster]") {
  RedisServer redis;
  // A due task is moved by the next beat: 1 s, so no entry is claimed before 3 s idle.
  ClusterNode a(redis, "sa", "", "1s");
  ClusterNode b(redis, "sb", "", "1s");
  Client ca = a.connect();
  const auto wall_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  // Due in an hour: scheduled whenever the test reads it, with its due time and tenant, seen
  // from the other node; a cancel ends it at once.
  SubmitRequest far = task("sleep", "1");
  far.delay = std::chrono::hours(1);
  far.options.tenant = "acme";
  const auto before_far = wall_ms();
  auto far_id = ca.submit(far);
  REQUIRE(far_id);
  Client cb = b.connect();
  auto seen = cb.task(far_id->id);
  REQUIRE(seen);
  CHECK(seen->state == "scheduled");
  CHECK(seen->account.not_before_ms >= before_far + 3600 * 1000);
  CHECK(seen->account.tenant == "acme");
  auto cancelled = cb.cancel(far_id->id);
  REQUIRE(cancelled);
  CHECK(cancelled->cancelled);
  CHECK(cancelled->state == "cancelled");
  // Due in 1.5 s: it runs once due, not before (the nodes share this machine's clock).
  SubmitRequest later = task("sleep", "1");
  later.delay = 1500ms;
  const auto before = wall_ms();
  auto id = ca.submit(later);
  REQUIRE(id);
  auto done = cb.wait(id->id, std::chrono::milliseconds(60000));
  REQUIRE(done);
  CHECK(done->account.state == "completed");
  CHECK(done->account.not_before_ms >= before + 1500);
  REQUIRE(done->account.history.size() == 1);
  CHECK(done->account.history[0].started_ms >= done->account.not_before_ms);
  CHECK(claimed_by(a) + claimed_by(b) == 0);
}

TEST_CASE("a redis pool's task runs in its priority band, and the hash says where it runs",
          "[redis][cluster]") {
  RedisServer redis;
  ClusterNode a(redis, "pa", "");
  Client c = a.connect();
  SubmitRequest urgent = task("sleep", "1");
  urgent.options.priority = 9;
  auto id = c.submit_wait(urgent);
  REQUIRE(id);
  CHECK(id->account.state == "completed");
  auto r = open_redis(redis);
  // It went through the high band's stream (its hash names the band).
  CHECK(r.command({"HGET", "sandpool:task:" + std::to_string(id->account.id), "band"})->str == "1");
  CHECK(r.command({"HGET", "sandpool:task:" + std::to_string(id->account.id), "node"})->str ==
        "pa");
  CHECK(r.command({"EXISTS", "sandpool:shared:q:1"})->integer == 1);
}

TEST_CASE("a reload that changes a redis pool's concurrency changes what its node reads",
          "[redis][cluster]") {
  RedisServer redis;
  ClusterNode a(redis, "ra", "");  // 2 workers x concurrency 1: holds 2
  const auto held_now = [&] {
    Client c = a.connect();
    auto s = c.status();
    REQUIRE(s);
    REQUIRE(s->redis);
    REQUIRE(s->redis->pools.size() == 1);
    return s->redis->pools[0].held;
  };
  REQUIRE(submit_sleeps(a, 60, "300").size() == 60);
  REQUIRE(eventually([&] { return held_now() == 2; }));
  // concurrency 1 -> 3 in the file, then reload: the node holds 2 x 3.
  std::string yaml = slurp(a.config);
  const auto at = yaml.find("concurrency: 1");
  REQUIRE(at != std::string::npos);
  yaml.replace(at, 14, "concurrency: 3");
  write_file(a.config, yaml);
  Client c = a.connect();
  REQUIRE(c.reload());
  CHECK(eventually([&] { return held_now() == 6; }));
  // Never more than 6 run: `held` also counts an end not written yet (a place is free from the
  // task's local end, docs/redis-pools.md), so it may read 7 for a round trip; the local pool's
  // tasks in flight may not.
  auto s = c.status();
  REQUIRE(s);
  REQUIRE(s->pools.size() == 1);
  CHECK(s->pools[0].in_flight <= 6);
}

// The bound is the bucket's arithmetic: 17 tasks through a burst of 2 at 5 a second cannot all
// start within 3 s; with the limit per node (twice the rate over two nodes) they would in 1.3 s.
TEST_CASE(
    "two poold nodes share a redis pool's rate limit, shown as throttled in status and metrics",
    "[redis][cluster]") {
  RedisServer redis;
  const std::string limits =
      "    rate_limits: {task_types: {sleep: {tasks: 5, per: 1s, burst: 2}}}\n";
  // Slow beats: no entry is claimed before 15 s idle, so each task has its one attempt.
  ClusterNode a(redis, "ra", limits, "5s");
  ClusterNode b(redis, "rb", limits, "5s");
  Client c = a.connect();
  const auto began = std::chrono::steady_clock::now();
  const auto ids = submit_sleeps(a, 17, "1");
  REQUIRE(ids.size() == 17);
  for (std::uint64_t id : ids) {
    auto done = c.wait(id, std::chrono::milliseconds(60000));
    REQUIRE(done);
    CHECK(done->account.state == "completed");
    CHECK(done->account.history.size() == 1);  // held back is not an attempt
  }
  CHECK(std::chrono::steady_clock::now() - began >= 2900ms);
  std::uint64_t throttled = 0;
  for (ClusterNode* n : {&a, &b}) {
    auto st = n->connect().status();
    REQUIRE(st);
    REQUIRE(st->redis);
    REQUIRE(st->redis->pools.size() == 1);
    throttled += st->redis->pools[0].throttled;
  }
  CHECK(throttled > 0);
  CHECK(claimed_by(a) + claimed_by(b) == 0);
  httplib::Client http("127.0.0.1", metrics_port(*a.poold));
  http.set_read_timeout(30, 0);
  auto scraped = http.Get("/metrics");
  REQUIRE(scraped);
  CHECK(scraped->body.find("sandpool_redis_throttled_total{pool=\"shared\"}") != std::string::npos);
}

TEST_CASE("one poold node serves two redis pools under its one name", "[redis][cluster]") {
  RedisServer redis;
  PooldFixture node(
      "pools:\n" + pool_yaml("first", "echo", "    backend: redis\n") +
          pool_yaml("second", "upper", "    backend: redis\n"),
      "  node: two\n  redis: {address: \"unix:" + redis.socket() + "\", heartbeat: 200ms}\n");
  Client c = node.connect();
  auto echoed = c.submit_wait(task("echo", "a"));
  REQUIRE(echoed);
  CHECK(echoed->result == "a");
  auto upper = c.submit_wait(task("upper", "b"));
  REQUIRE(upper);
  CHECK(upper->result == "B");
  auto st = c.status();
  REQUIRE(st);
  REQUIRE(st->redis);
  CHECK(st->redis->pools.size() == 2);
}

// Each node has 2 workers, so with the cap per node 4 tasks would run at once; the cluster's
// cap of 2 lets 2. Two tasks run until the test has seen both hold the cap's leases, then are
// cancelled; ten short ones follow. Read from the attempts' own start and end times.
TEST_CASE("two poold nodes share a redis pool's cap on a type's running tasks",
          "[redis][cluster]") {
  RedisServer redis;
  const std::string cap = "    concurrency_per_type: {sleep: 2}\n";
  // Slow beats: no entry is claimed before 15 s idle; a cancel lands within 5 s.
  ClusterNode a(redis, "ca", cap, "5s");
  ClusterNode b(redis, "cb", cap, "5s");
  Client c = a.connect();
  auto r = open_redis(redis);
  const auto long_ids = submit_sleeps(a, 2, "600000");
  REQUIRE(long_ids.size() == 2);
  REQUIRE(eventually([&] {
    return r.command({"SCARD", "sandpool:shared:running:sleep"})->integer == 2;
  }));
  const auto short_ids = submit_sleeps(a, 10, "50");
  REQUIRE(short_ids.size() == 10);
  for (std::uint64_t id : long_ids) REQUIRE(c.cancel(id));
  std::vector<std::pair<std::int64_t, int>> edges;  // (time, +1 start / -1 end)
  const auto ended = [&](std::uint64_t id, const std::string& state) {
    auto done = c.wait(id, std::chrono::milliseconds(120000));
    REQUIRE(done);
    CHECK(done->account.state == state);
    REQUIRE(done->account.history.size() == 1);  // held back is not an attempt
    edges.emplace_back(done->account.history[0].started_ms, 1);
    edges.emplace_back(done->account.history[0].ended_ms, -1);
  };
  for (std::uint64_t id : long_ids) ended(id, "cancelled");
  for (std::uint64_t id : short_ids) ended(id, "completed");
  std::sort(edges.begin(), edges.end());  // an end before a start at the same ms
  int running = 0, most = 0;
  for (const auto& [at, step] : edges) most = std::max(most, running += step);
  CHECK(most == 2);  // the two long ones ran together, and nothing beside them
  CHECK(r.command({"SCARD", "sandpool:shared:running:sleep"})->integer == 0);  // all given back
  CHECK(claimed_by(a) + claimed_by(b) == 0);
}

TEST_CASE(
    "a submit whose reply redis did not send in time answers unknown, and its retry under the "
    "same request token makes no second task",
    "[redis][cluster]") {
  RedisServer redis;
  ClusterNode n0(redis, "n0", "");
  ClusterNode n1(redis, "n1", "");  // a lane of its own for the batch (n0's waits to reconnect)
  Client c = n0.connect();
  Client d = n1.connect();
  // Each node's request lane has its submit (c) or submit_batch (d) script loaded: what stalls
  // below is the EVALSHA.
  auto loaded = d.submit_batch({task("sleep", "1")});
  REQUIRE(loaded);
  REQUIRE(loaded->at(0).status.is_ok());
  auto first = c.submit(task("sleep", "1"));
  REQUIRE(first);
  auto r = open_redis(redis);
  const auto ids_given = [&] {
    auto n = r.command({"GET", "sandpool:ids"});
    REQUIRE(n);
    return std::stoull(n->str);
  };
  REQUIRE(ids_given() == first->id);

  SubmitRequest one = task("sleep", "1");
  one.request_token = "retry-one";
  std::vector<SubmitRequest> batch(3, task("sleep", "1"));
  // Redis stalls past the node's reply timeout (2 s) with the submits in its socket: they
  // run when it resumes, after the node has answered.
  redis.pause();
  auto lost = c.submit(one);
  // At once on the same node: its lane waits to reconnect (or, past that gap on a slow
  // machine, finds Redis stalled): nothing is sent, and the answer must not say otherwise
  // (it said the earlier submit's "may have been accepted" until 2026-12-07).
  auto unsent = c.submit(task("sleep", "1"));
  auto lost_batch = d.submit_batch(batch, "retry-batch");
  redis.resume();
  REQUIRE_FALSE(lost);
  CHECK(lost.status().code() == Code::kTimeout);  // wire `timeout`, not `unavailable`
  CHECK_THAT(lost.status().message(), Catch::Contains("may have been accepted"));
  REQUIRE_FALSE(unsent);
  CHECK(unsent.status().code() == Code::kClosed);  // wire `unavailable`: nothing accepted
  CHECK_THAT(unsent.status().message(),
             !Catch::Contains("may have been accepted") && !Catch::Contains("outcome unknown"));
  REQUIRE(lost_batch);
  for (const Submitted& s : *lost_batch) {
    CHECK(s.status.code() == Code::kTimeout);
    CHECK_THAT(s.status.message(), Catch::Contains("outcome unknown"));
  }

  // The retries, on n0 (a token is the cluster's; n1 failed last and waits to reconnect), get
  // what the first tries made: no task was made twice.
  auto batch_again = c.submit_batch(batch, "retry-batch");
  REQUIRE(batch_again);
  auto again = c.submit(one);
  REQUIRE(again);
  std::set<std::uint64_t> made = {again->id};
  for (const Submitted& s : *batch_again) {
    REQUIRE(s.status.is_ok());
    made.insert(s.id);
  }
  CHECK(made.size() == 4);
  CHECK(ids_given() == first->id + 4);
  for (const std::uint64_t id : made) {
    auto w = c.wait(id, std::chrono::milliseconds(30000));
    REQUIRE(w);
    CHECK(w->account.state == "completed");
  }

  // poolctl batch, a load generator (no request token, nothing sent again), counts the tasks
  // whose replies were lost as unknown, not as refused: they may exist (until 2026-12-07 it
  // said `refused`).
  redis.pause();
  const auto b = sandpool::testing::run_command(
      std::string(SANDPOOL_BIN_DIR) + "/poolctl",
      {"--socket", n0.socket, "--json", "batch", "sleep", "3", "--pool", "shared"});
  redis.resume();
  INFO("poolctl batch: " << b.out << b.err);
  CHECK(b.exit_code == 1);
  CHECK_THAT(b.out, Catch::Contains("\"unknown\":3") && Catch::Contains("\"refused\":0") &&
                        Catch::Contains("\"accepted\":0"));
}

TEST_CASE(
    "a node stopped while redis is away keeps its unwritten ends and writes them when it starts "
    "again, so no completed task runs twice",
    "[redis][cluster]") {
  RedisServer redis(RedisServer::Options{"", true});  // append-only: the entry outlives a kill
  ClusterNode n0(redis, "n0", "");
  Client c = n0.connect();
  auto id = c.submit(task("sleep", "3000"));  // long enough to be seen running
  REQUIRE(id);
  {
    auto r = open_redis(redis);
    REQUIRE(eventually([&] { return tasks_pending_for(r, "n0").count(id->id) == 1; }));
  }
  // Pending for n0 in Redis is not yet held by n0: the read's reply and the take that follows
  // it must have come back, or the node never runs the task (it is claimed after a restart).
  // Its pool running it is the sign that both did (CI once killed Redis between the two).
  REQUIRE(eventually([&] {
    auto st = c.stats("shared");
    return st && st->pools.size() == 1 && st->pools[0].in_flight == 1;
  }));
  redis.kill9();
  // The task completes on n0 while Redis is away: its end waits in the node's memory.
  REQUIRE(eventually([&] {
    auto st = c.stats("shared");
    return st && st->pools.size() == 1 && st->pools[0].completed == 1;
  }));
  n0.poold->signal(SIGTERM);
  REQUIRE(n0.poold->wait_exit() == 0);  // one attempt to write, then kept: no hang
  const auto kept = n0.dir.path / "state" / "redis-unwritten-ends-shared.jsonl";
  REQUIRE(std::filesystem::exists(kept));

  redis.start();
  n0.poold.reset();
  n0.start();  // writes the kept end before it reads or claims anything
  CHECK_FALSE(std::filesystem::exists(kept));
  Client again = n0.connect();
  auto t = again.wait(id->id, std::chrono::milliseconds(30000));
  REQUIRE(t);
  CHECK(t->account.state == "completed");
  CHECK(t->account.attempts == 1);  // it ran once: the end was written, not the task re-run
  auto r = open_redis(redis);
  CHECK(tasks_pending_for(r, "n0").empty());
}

TEST_CASE(
    "a purge of every dead letter while redis is away answers what the store purged, and why "
    "it stopped",
    "[redis][cluster]") {
  RedisServer redis;
  PooldFixture node(
      "pools:\n" + pool_yaml("fail", "fail") + pool_yaml("shared", "sleep", "    backend: redis\n"),
      "  node: n0\n  redis: {address: \"unix:" + redis.socket() + "\", heartbeat: 200ms}\n");
  Client c = node.connect();
  auto dead = c.submit_wait(task("fail", "no"));
  REQUIRE(dead);
  REQUIRE(dead->account.state == "dead_lettered");
  REQUIRE(eventually([&] {
    auto l = c.dlq_list();
    return l && !l->entries.empty();
  }));
  redis.kill9();
  ops::DlqSelector all;
  all.all = true;
  auto purged = c.dlq_purge(all);
  REQUIRE(purged);  // not an error: the store's letter is gone, and the reply says so
  CHECK(purged->purged == 1);
  CHECK_THAT(purged->first_error, Catch::Contains("unreachable"));
  auto l = c.dlq_list();
  REQUIRE(l);
  CHECK(l->entries.empty());
}

}  // namespace sandpool::testing
