// Hostile patterns against the real regex plugin (plugins/regex/, Debian's libpcre2-8, JIT
// on) under the default strict seccomp profile: catastrophic backtracking with the limits on
// (the match limit stops it inside the plugin) and off (the task's timeout stops it, at the
// cost of its worker only), and patterns that go after the compiler. Each case: the attack's
// outcome, ordinary tasks beside it complete, both pools still serve, nothing is left behind.
#include <catch2/catch.hpp>

#include <algorithm>
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
