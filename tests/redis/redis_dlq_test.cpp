// The dead letters of a Redis pool replayed and purged from any poold node
// (docs/redis-pools.md, "Dead letters"): real nodes, a real redis-server of the test's own.
// A letter made on one node is replayed from another and its task runs to its end with a
// fresh count of attempts; two nodes replaying the same letters at once make one task of
// each; purges by id, filter, age and all go through more letters than one script call takes.
#include <signal.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <set>
#include <thread>

#include "poold_process.hpp"
#include "redis_server.hpp"
#include "redis_test_support.hpp"

namespace sandpool::testing {
namespace redis_dlq_test {

using namespace std::chrono_literals;

constexpr std::uint64_t kClusterBase = std::uint64_t{1} << 52;

// A node serving pool `shared` (plugin `plugin`) through `redis`, with `defaults` as its
// task_defaults.
struct DlqNode : PooldFixture {
  DlqNode(const RedisServer& redis, const std::string& name, const std::string& plugin,
          const std::string& defaults)
      : PooldFixture("pools:\n" + pool_yaml("shared", plugin,
                                            "    backend: redis\n"
                                            "    task_defaults: " +
                                                defaults + "\n",
                                            "{min: 1, max: 4, initial: 2}"),
                     "  node: " + name + "\n  redis: {address: \"unix:" + redis.socket() +
                         "\", heartbeat: 200ms}\n") {}
};

template <class F>
bool soon(F done) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

redis::Connection connect_redis(const RedisServer& server) {
  auto c = redis::Connection::open(server.endpoint());
  REQUIRE(c);
  return std::move(c).value();
}

std::int64_t integer_of(redis::Connection& c, const std::vector<std::string>& command) {
  auto r = c.command(command);
  REQUIRE(r);
  REQUIRE_FALSE(r->is_error());
  return r->integer;
}

std::int64_t letters_in_redis(redis::Connection& c) {
  return integer_of(c, {"XLEN", "sandpool:shared:dlq"});
}

std::string hash_field(redis::Connection& c, std::uint64_t id, const std::string& field) {
  auto r = c.command({"HGET", "sandpool:task:" + std::to_string(id), field});
  REQUIRE(r);
  return r->str;
}

// The ids of `n` tasks of `payload` submitted as one batch.
std::vector<std::uint64_t> submit_many(Client& c, const std::string& type, int n,
                                       const std::string& payload) {
  auto sent = c.submit_batch(std::vector<SubmitRequest>(n, task(type, payload)));
  REQUIRE(sent);
  std::vector<std::uint64_t> ids;
  for (const Submitted& s : *sent) {
    REQUIRE(s.status.is_ok());
    ids.push_back(s.id);
  }
  return ids;
}

ops::DlqSelector by_id(std::uint64_t id) {
  ops::DlqSelector s;
  s.id = id;
  return s;
}

ops::DlqSelector all_letters() {
  ops::DlqSelector s;
  s.all = true;
  return s;
}

ops::DlqSelector in_pool(std::optional<std::string> reason = std::nullopt,
                         std::optional<std::string> type = std::nullopt) {
  ops::DlqSelector s;
  s.filter.emplace();
  s.filter->pool = "shared";
  s.filter->reason = std::move(reason);
  s.filter->type = std::move(type);
  return s;
}

}  // namespace redis_dlq_test

using namespace redis_dlq_test;

TEST_CASE("a redis pool's dead letters are replayed from another node and run to their end",
          "[redis][cluster][dlq]") {
  RedisServer redis;
  auto conn = connect_redis(redis);
  // Node a times its tasks out after 100 ms: a sleep of a second dies there.
  std::optional<DlqNode> a;
  a.emplace(redis, "da", "chaos", "{timeout: 100ms, retries: 0}");
  Client ca = a->connect();
  std::vector<std::uint64_t> timed_out;
  for (int i = 0; i < 2; ++i) {
    auto r = ca.submit_wait(task("chaos", "s1000"));
    REQUIRE(r);
    REQUIRE(r->account.state == "dead_lettered");
    CHECK(r->account.reason == "retries_exhausted");
    timed_out.push_back(r->account.id);
  }
  auto refused = ca.submit_wait(task("chaos", "no such step"));
  REQUIRE(refused);
  REQUIRE(refused->account.state == "dead_lettered");
  CHECK(refused->account.reason == "permanent");
  const std::uint64_t permanent = refused->account.id;
  a->poold->signal(SIGTERM);
  REQUIRE(a->poold->wait_exit() == 0);

  // Node b gives them a minute: replayed from b, they complete there.
  DlqNode b(redis, "db", "chaos", "{timeout: 1m, retries: 0}");
  Client cb = b.connect();
  REQUIRE(letters_in_redis(conn) == 3);

  SECTION("by id") {
    const std::uint64_t id = timed_out[0];
    auto replayed = cb.dlq_replay(by_id(id));
    REQUIRE(replayed);
    CHECK(replayed->ids == std::vector<std::uint64_t>{id});  // the task keeps its id
    CHECK(replayed->failed == 0);
    // The letter left Redis with the replay; a second replay finds nothing.
    CHECK(cb.dlq_show(id).status().code() == Code::kNotFound);
    auto again = cb.dlq_replay(by_id(id));
    REQUIRE_FALSE(again);
    CHECK(again.status().code() == Code::kNotFound);
    auto done = cb.wait(id, std::chrono::milliseconds(60000));
    REQUIRE(done);
    CHECK(done->account.state == "completed");
    // A fresh count: node a's timed-out attempt is gone, the replay's is attempt 1.
    REQUIRE(done->account.history.size() == 1);
    CHECK(done->account.history[0].number == 1);
    CHECK(done->account.history[0].outcome == "ok");
    CHECK(hash_field(conn, id, "node") == "db");
    // Two ends: the death on a, the completion on b.
    CHECK(stored_task(conn, id).ends == 2);
    CHECK(letters_in_redis(conn) == 2);
  }
  SECTION("an id no letter has") {
    auto unknown = cb.dlq_replay(by_id(kClusterBase + 999999));
    REQUIRE_FALSE(unknown);
    CHECK(unknown.status().code() == Code::kNotFound);
    CHECK(letters_in_redis(conn) == 3);
  }
  SECTION("by filter, then all") {
    auto exhausted = cb.dlq_replay(in_pool("retries_exhausted"));
    REQUIRE(exhausted);
    std::vector<std::uint64_t> ids = exhausted->ids;
    std::sort(ids.begin(), ids.end());
    CHECK(ids == timed_out);  // not the permanent one
    for (std::uint64_t id : timed_out) {
      auto done = cb.wait(id, std::chrono::milliseconds(60000));
      REQUIRE(done);
      CHECK(done->account.state == "completed");
    }
    auto rest = cb.dlq_list([] {
      ops::DlqListArgs l;
      l.filter.pool = "shared";
      return l;
    }());
    REQUIRE(rest);
    REQUIRE(rest->entries.size() == 1);
    CHECK(rest->entries[0].letter_id == permanent);
    // --all: the permanent one runs again, fails again, and is a letter again, once.
    auto all = cb.dlq_replay(all_letters());
    REQUIRE(all);
    CHECK(all->ids == std::vector<std::uint64_t>{permanent});
    CHECK(all->failed == 0);
    auto died = cb.wait(permanent, std::chrono::milliseconds(60000));
    REQUIRE(died);
    CHECK(died->account.state == "dead_lettered");
    CHECK(died->account.history.size() == 1);
    CHECK(letters_in_redis(conn) == 1);
  }
}

TEST_CASE("two nodes replaying the same redis dead letters at once make one task of each",
          "[redis][cluster][dlq]") {
  RedisServer redis;
  auto conn = connect_redis(redis);
  DlqNode a(redis, "ra", "fail", "{retries: 0}");
  DlqNode b(redis, "rb", "fail", "{retries: 0}");
  Client ca = a.connect();
  Client cb = b.connect();
  const std::vector<std::uint64_t> ids = submit_many(ca, "fail", 40, "no");
  REQUIRE(soon([&] { return letters_in_redis(conn) == 40; }));
  // Neither node runs anything while the replays race: a replayed task cannot die again
  // (a new letter) before both sweeps are over.
  REQUIRE(ca.drain("shared"));
  REQUIRE(cb.drain("shared"));

  // One id at a time, both nodes at once: one replay each gets it, the other finds it gone.
  const std::vector<std::uint64_t> first(ids.begin(), ids.begin() + 20);
  std::vector<int> won_a(first.size()), won_b(first.size());
  {
    std::atomic<int> ready{0};
    auto racer = [&](Client& c, std::vector<int>& won) {
      ready.fetch_add(1);
      while (ready.load() < 2) std::this_thread::yield();
      for (std::size_t i = 0; i < first.size(); ++i) {
        auto r = c.dlq_replay(by_id(first[i]));
        won[i] = r ? 1 : (r.status().code() == Code::kNotFound ? 0 : -1);
      }
    };
    std::thread ta([&] { racer(ca, won_a); });
    std::thread tb([&] { racer(cb, won_b); });
    ta.join();
    tb.join();
  }
  for (std::size_t i = 0; i < first.size(); ++i) {
    INFO("task " << first[i]);
    CHECK(won_a[i] + won_b[i] == 1);
    CHECK(won_a[i] >= 0);
    CHECK(won_b[i] >= 0);
  }
  // The rest with --all from both at once: each letter replayed by exactly one of them.
  std::optional<Result<ops::DlqReplayReply>> all_a, all_b;
  {
    std::thread ta([&] { all_a.emplace(ca.dlq_replay(all_letters())); });
    std::thread tb([&] { all_b.emplace(cb.dlq_replay(all_letters())); });
    ta.join();
    tb.join();
  }
  REQUIRE(*all_a);
  REQUIRE(*all_b);
  std::multiset<std::uint64_t> swept((*all_a)->ids.begin(), (*all_a)->ids.end());
  swept.insert((*all_b)->ids.begin(), (*all_b)->ids.end());
  CHECK(swept == std::multiset<std::uint64_t>(ids.begin() + 20, ids.end()));
  CHECK(letters_in_redis(conn) == 0);

  // Run them: each task ran once more (one entry each), so it ended twice in all, with one
  // attempt (the replay's), and is one letter again.
  REQUIRE(ca.resume("shared"));
  REQUIRE(cb.resume("shared"));
  REQUIRE(soon([&] {
    return letters_in_redis(conn) >= 40 && integer_of(conn, {"XLEN", "sandpool:shared:q:0"}) == 0;
  }));
  CHECK(letters_in_redis(conn) == 40);
  for (std::uint64_t id : ids) {
    INFO("task " << id);
    const redis::StoredTask t = stored_task(conn, id);
    CHECK(t.ends == 2);
    CHECK(t.history.size() == 1);
  }
}

TEST_CASE("a redis pool's dead letters are purged by id, filter, age and all, in chunks",
          "[redis][cluster][dlq]") {
  RedisServer redis;
  auto conn = connect_redis(redis);
  DlqNode node(redis, "pa", "chaos", "{timeout: 200ms, retries: 0}");
  Client c = node.connect();
  // 300 permanent letters (more than one script call takes), two timed out, and one written
  // two days ago (as a node's finish script writes it).
  const std::vector<std::uint64_t> failed = submit_many(c, "chaos", 300, "no such step");
  (void)submit_many(c, "chaos", 2, "s2000");
  REQUIRE(soon([&] { return letters_in_redis(conn) == 302; }));
  const auto old_id = std::to_string(integer_of(conn, {"INCR", "sandpool:ids"}));
  const auto two_days_ago = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch() - 48h)
                                .count();
  auto added = conn.command({"XADD", "sandpool:shared:dlq", "*", "id", old_id, "type", "chaos",
                             "payload", "x", "reason", "permanent", "error", "old",
                             "dead_lettered_ms", std::to_string(two_days_ago), "attempts", "1"});
  REQUIRE(added);
  REQUIRE_FALSE(added->is_error());

  // A letter of a live task (only a hand-written XADD makes one) is not replayed: its task
  // is queued already. It is purged like any other.
  const auto live_id = std::to_string(integer_of(conn, {"INCR", "sandpool:ids"}));
  REQUIRE(conn.command(
      {"HSET", "sandpool:task:" + live_id, "state", "queued", "pool", "shared", "type", "chaos"}));
  REQUIRE(conn.command({"XADD", "sandpool:shared:dlq", "*", "id", live_id, "type", "chaos",
                        "payload", "x", "reason", "permanent", "error", "e", "dead_lettered_ms",
                        "1", "attempts", "1"}));
  auto live = c.dlq_replay(by_id(std::stoull(live_id)));
  REQUIRE_FALSE(live);
  CHECK(live.status().code() == Code::kInvalidArgument);
  CHECK_THAT(live.status().message(), Catch::Contains("is live (queued)"));
  CHECK(letters_in_redis(conn) == 304);
  CHECK(integer_of(conn, {"XLEN", "sandpool:shared:q:0"}) == 0);
  auto live_purged = c.dlq_purge(by_id(std::stoull(live_id)));
  REQUIRE(live_purged);
  CHECK(live_purged->purged == 1);

  // By id: that letter only, once.
  auto one = c.dlq_purge(by_id(failed[7]));
  REQUIRE(one);
  CHECK(one->purged == 1);
  CHECK(c.dlq_show(failed[7]).status().code() == Code::kNotFound);
  auto none = c.dlq_purge(by_id(failed[7]));
  REQUIRE(none);
  CHECK(none->purged == 0);
  // The task's account stays (it is a finished task).
  CHECK(hash_field(conn, failed[7], "state") == "dead_lettered");
  // By age: the one of two days ago.
  ops::DlqSelector older;
  older.older_than_ms = std::chrono::milliseconds(24h);
  auto aged = c.dlq_purge(older);
  REQUIRE(aged);
  CHECK(aged->purged == 1);
  // By filter: a type no letter has, then the two timed out.
  auto other = c.dlq_purge(in_pool(std::nullopt, "other"));
  REQUIRE(other);
  CHECK(other->purged == 0);
  auto exhausted = c.dlq_purge(in_pool("retries_exhausted"));
  REQUIRE(exhausted);
  CHECK(exhausted->purged == 2);
  CHECK(letters_in_redis(conn) == 299);
  // All: the 299 left, over two script calls.
  auto all = c.dlq_purge(all_letters());
  REQUIRE(all);
  CHECK(all->purged == 299);
  CHECK(letters_in_redis(conn) == 0);
}

TEST_CASE("a redis pool's dead letters are listed page by page with a cursor, each once",
          "[redis][cluster]") {
  RedisServer redis;
  DlqNode node(redis, "n0", "chaos", "{retries: 0}");
  auto conn = connect_redis(redis);
  // 250 letters, every other one of type `odd`, written as a node writes them.
  std::set<std::uint64_t> odd;
  for (int i = 0; i < 250; ++i) {
    const std::uint64_t id = kClusterBase + 1000 + static_cast<std::uint64_t>(i);
    const std::string type = i % 2 == 1 ? "odd" : "even";
    if (i % 2 == 1) odd.insert(id);
    REQUIRE(conn.command({"XADD", "sandpool:shared:dlq", "*", "id", std::to_string(id), "type",
                          type, "payload", "x", "reason", "permanent", "error", "no",
                          "dead_lettered_ms", std::to_string(1000 + i), "attempts", "1"}));
  }
  Client c = node.connect();
  ops::DlqListArgs args;
  args.filter.pool = "shared";
  args.filter.type = "odd";
  args.limit = 40;
  std::vector<std::uint64_t> seen;
  for (int page = 0; page < 10; ++page) {
    auto l = c.dlq_list(args);
    REQUIRE(l);
    CHECK(l->entries.size() <= 40);
    for (const auto& e : l->entries) seen.push_back(e.task.id);
    if (!l->next_cursor) break;
    args.cursor = l->next_cursor;
  }
  CHECK(seen.size() == odd.size());  // 125 over four pages: none twice, none missed
  CHECK(std::set<std::uint64_t>(seen.begin(), seen.end()) == odd);
  CHECK(std::is_sorted(seen.rbegin(), seen.rend()));  // newest first
  args.cursor = "not-a-cursor";
  auto bad = c.dlq_list(args);
  REQUIRE_FALSE(bad);
  CHECK(bad.status().code() == Code::kInvalidArgument);
}

}  // namespace sandpool::testing
