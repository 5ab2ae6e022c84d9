// Hostile patterns against the real regex plugin (plugins/regex/, Debian's libpcre2-8, JIT
// on) under the default strict seccomp profile: catastrophic backtracking with the limits on
// (the match limit stops it inside the plugin) and off (the task's timeout stops it, at the
// cost of its worker only), and patterns that go after the compiler. Each case: the attack's
// outcome, ordinary tasks beside it complete, both pools still serve, nothing is left behind.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>

#include "hostile_world.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::hostile::hostile_options;
using sandpool::hostile::HostileWorld;

namespace {

PoolOptions regex_options(const std::string& config = "{}") {
  PoolOptions o = hostile_options(std::string(SANDPOOL_PLUGIN_DIR) + "/libregex.so");
  o.plugin_config_json = config;
  return o;
}

bool regex_pool_has_worker(Pool& pool, std::int32_t pid) {
  const auto ws = pool.workers();
  return std::any_of(ws.begin(), ws.end(), [&](const WorkerInfo& w) { return w.pid == pid; });
}

// The classic ReDoS: nested quantifiers over a subject that almost matches (2^40 paths).
std::string redos_payload() {
  return std::string("match\0(a+)+$\0", 13) + std::string(40, 'a') + "!";
}

}  // namespace

TEST_CASE("a catastrophically backtracking pattern stops at the match limit, worker alive") {
  HostileWorld world;
  world.start(regex_options());
  const TaskResult r = world.attack("regex", redos_payload());
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kResourceLimit);
  CHECK(r.error == "regex: match limit exceeded (match_limit 10000000)");
  CHECK(regex_pool_has_worker(world.pool(), r.history[0].worker_pid));
  CHECK(world.pool().stats().restarts == 0);
  world.close_and_check_clean();
}

TEST_CASE("with the limits off, a catastrophic pattern is stopped by the task's timeout") {
  HostileWorld world;
  world.start(regex_options(R"({"match_limit": 0, "depth_limit": 0, "heap_limit": 0})"));
  SubmitOptions so;
  so.timeout = 1s;
  const TaskResult r = world.attack("regex", redos_payload(), so);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kTimedOut);  // its worker killed; the others served
  world.close_and_check_clean();
}

TEST_CASE("patterns that go after the compiler fail the task with PCRE2's error") {
  HostileWorld world;
  world.start(regex_options());
  const auto [pattern, error] = GENERATE(table<std::string, std::string>({
      {std::string(100000, '(') + std::string(100000, ')'),
       "regex: pattern error at offset 251: parentheses are too deeply nested"},
      {"(?<n>a)(?<n>b)",
       "regex: pattern error at offset 12: two named subpatterns have the "
       "same name (PCRE2_DUPNAMES not set)"},
      {"a{99999999}", "regex: pattern error at offset 7: number too big in {} quantifier"},
      {"(?C1)a", ""},  // a callout with no callout function: harmless, matches
  }));
  const TaskResult r =
      world.attack("regex", "match" + std::string(1, '\0') + pattern + std::string(1, '\0') + "a");
  REQUIRE(r.attempts() == 1);
  if (error.empty()) {
    CHECK(r.state == TaskState::kCompleted);
  } else {
    CHECK(r.history[0].outcome == Outcome::kFailed);
    CHECK(r.error == error);
  }
  CHECK(regex_pool_has_worker(world.pool(), r.history[0].worker_pid));
  world.close_and_check_clean();
}

// Replace bombs: a replacement whose output would be far larger than max_result. Before, the
// plugin had PCRE2 work out the whole would-be length (OVERFLOW_LENGTH over every match, tens
// of seconds of CPU) and built up to 256 MiB before write_result saw any of it. Now each
// match's replacement is counted against max_result before it is built: the task fails at the
// first match that would pass it, in milliseconds, and the worker's memory grows by no more
// than the result it may return (the host's copy and the plugin's buffer of one match, each
// at most max_result, and the doubling growth of the host's string) plus some slack.
namespace {

std::string replace_payload(const std::string& command, const std::string& pattern,
                            const std::string& replacement, const std::string& subject) {
  return command + std::string(1, '\0') + pattern + std::string(1, '\0') + replacement +
         std::string(1, '\0') + subject;
}

std::string dollar_ones(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += "$1";
  return s;
}

constexpr std::uint64_t kMaxResult = 8u << 20;  // hostile_options' (the default)
constexpr std::uint64_t kMemorySlack = 16u << 20;

// One regex task's account and what it cost its worker: CPU across the task (all threads, in
// 10 ms ticks) and how much its peak resident set grew.
struct Measured {
  TaskResult result;
  std::chrono::milliseconds cpu{0};
  std::uint64_t peak_rss_growth = 0;
};

Measured run_measured(HostileWorld& world, const std::string& payload) {
  std::map<std::int32_t, hostile::ProcessUsage> before;
  for (const WorkerInfo& w : world.pool().workers()) before[w.pid] = hostile::process_usage(w.pid);
  SubmitOptions so;
  so.timeout = 60s;
  Measured m;
  m.result = world.attack("regex", payload, so);
  REQUIRE(m.result.attempts() == 1);
  const std::int32_t pid = m.result.history[0].worker_pid;
  REQUIRE(before.count(pid) == 1);
  const hostile::ProcessUsage after = hostile::process_usage(pid);
  m.cpu = after.cpu - before[pid].cpu;
  m.peak_rss_growth = after.peak_rss - before[pid].peak_rss;
  return m;
}

}  // namespace

TEST_CASE(
    "a replace bomb fails naming max_result in a fraction of a second of CPU, its memory "
    "bounded") {
  const auto [name, payload] = GENERATE(table<std::string, std::string>({
      {"an empty pattern with a 100 KB replacement over 200,000 bytes",
       replace_payload("replace-all", "", std::string(100000, 'x'), std::string(200000, 'a'))},
      {"60,000 $1 over a 5 MB subject, one match",
       replace_payload("replace/s", "(.*)", dollar_ones(60000), std::string(5000000, 'a'))},
      {"60,000 $1 over a 5 MB subject, a match per byte",
       replace_payload("replace-all", "(a)", dollar_ones(60000), std::string(5000000, 'a'))},
      {"an empty pattern with a 100 KB replacement over 2,000 bytes",
       replace_payload("replace-all", "", std::string(100000, 'x'), std::string(2000, 'a'))},
      {"60,000 references to an empty group at each of 200,000 matches",
       replace_payload("replace-all", "()", dollar_ones(60000), std::string(200000, 'a'))},
  }));
  INFO(name);
  HostileWorld world;
  world.start(regex_options());
  // The task's CPU is its worker's across the task, less what moving a payload of this size
  // costs the worker: a task of the same size that does nothing (an anchored pattern that
  // cannot match) measured the same way.
  const std::string idle =
      std::string("match\0\\A(?!)\0", 13) + std::string(payload.size() - 13, 'a');
  const Measured control = run_measured(world, idle);
  CHECK(control.result.state == TaskState::kCompleted);
  const Measured bomb = run_measured(world, payload);
  const TaskResult& r = bomb.result;
  CHECK(r.history[0].outcome == Outcome::kFailed);
  CHECK_THAT(r.error, Catch::Contains("max_result (8388608 bytes)"));
  INFO("worker CPU: bomb " << bomb.cpu.count() << " ms, a task of its size " << control.cpu.count()
                           << " ms; peak RSS grew by " << bomb.peak_rss_growth << " bytes");
  // Measured alone: 33-84 ms beyond the control (issue 41 asks under 100 ms); before the
  // bound these ran 37 s or to the timeout. The check is generous, as a test on a loaded
  // 2-core VM must be (CPU time is counted in 10 ms ticks, and an ASan run shares the cores):
  // it still fails by two orders of magnitude without the bound.
  CHECK(bomb.cpu - control.cpu < 1000ms);
  CHECK(bomb.peak_rss_growth < 3 * kMaxResult + kMemorySlack);
  CHECK(world.pool().stats().restarts == 0);
  world.close_and_check_clean();
}

TEST_CASE("replace and replace-all still give the replaced text, $1 and $$ expanded") {
  HostileWorld world;
  world.start(regex_options());
  const auto [payload, expected] = GENERATE(table<std::string, std::string>({
      {replace_payload("replace-all/i", "(o)", "[$1]", "FoO bar"), "F[o][O] bar"},
      {replace_payload("replace", "(o)", "[$1]", "foo"), "f[o]o"},
      {replace_payload("replace-all", "a*", "-", "baaac"), "-b--c-"},
      {replace_payload("replace-all", "x", "$$", "axbxc"), "a$b$c"},
      {replace_payload("replace-all", "(?<w>\\w+)", "<${w}>", "hi there"), "<hi> <there>"},
      {replace_payload("replace-all", "z", "y", "abc"), "abc"},
  }));
  const TaskResult r = world.attack("regex", payload);
  REQUIRE(r.attempts() == 1);
  INFO(r.error);
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.result == expected);
  world.close_and_check_clean();
}

TEST_CASE("a replacement naming a group that does not exist fails with PCRE2's error") {
  HostileWorld world;
  world.start(regex_options());
  const TaskResult r = world.attack("regex", replace_payload("replace-all", "(a)", "$2", "aaa"));
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kFailed);
  CHECK(r.error == "regex: unknown substring");
  world.close_and_check_clean();
}
