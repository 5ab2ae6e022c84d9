// The regex plugin (plugins/regex/) on Debian's libpcre2-8, through a real Pool under the
// default strict seccomp profile, JIT on (write_xor_execute off, as a pool that wants the JIT
// sets it): payload format, match offsets, replacement, errors, and the limits from
// plugin_config; and under strict's default write-xor-execute, the interpreter. Catastrophic
// patterns are in tests/hostile/regex_test.cpp.
#include <catch2/catch.hpp>

#include <initializer_list>
#include <string>

#include "test_support.hpp"

using namespace sandpool;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;

namespace {

// The fields joined by NUL bytes: command, pattern, [replacement,] subject.
std::string fields(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (!out.empty() || &p != parts.begin()) out += '\0';
    out += p;
  }
  return out;
}

PoolOptions regex_pool(const std::string& plugin_config = "{}") {
  PoolOptions o = pool_options("regex", 1);
  o.plugin_config_json = plugin_config;
  o.sandbox.write_xor_execute = false;  // the JIT maps executable memory in each task
  return o;
}

TaskResult run_regex_once(Pool& pool, std::string payload) {
  SubmitOptions so;
  so.retries = 0;
  return run(pool, "regex", std::move(payload), so);
}

std::string a_times(std::size_t n) { return std::string(n, 'a'); }

}  // namespace

TEST_CASE("a regex match answers the byte offsets of the match and of each group") {
  auto pool = make_pool(regex_pool());
  CHECK(run_regex_once(*pool, fields({"match", R"((\w+)@(\w+))", "mail bob@example now"})).result ==
        "5 16 5 8 9 16\n");
  // An unset group reads -1 -1; no match is an empty result, not an error.
  CHECK(run_regex_once(*pool, fields({"match", "(x)?(b)", "ab"})).result == "1 2 -1 -1 1 2\n");
  const auto none = run_regex_once(*pool, fields({"match", "z", "abc"}));
  CHECK(none.state == TaskState::kCompleted);
  CHECK(none.result.empty());
}

TEST_CASE("a regex match-all answers one line per match, empty matches advancing as Perl does") {
  auto pool = make_pool(regex_pool());
  CHECK(run_regex_once(*pool, fields({"match-all", "a*", "baaac"})).result ==
        "0 0\n1 4\n4 4\n5 5\n");
  // Without u an empty match advances a byte; with it, a character ("\xc3\xa9" is e-acute).
  CHECK(run_regex_once(*pool, fields({"match-all", "x*", "\xc3\xa9"})).result == "0 0\n1 1\n2 2\n");
  CHECK(run_regex_once(*pool, fields({"match-all/u", "x*", "\xc3\xa9"})).result == "0 0\n2 2\n");
  CHECK(run_regex_once(*pool, fields({"match-all/i", "AB", "ab xAb"})).result == "0 2\n4 6\n");
}

TEST_CASE("a regex replace substitutes the first match, replace-all every one") {
  auto pool = make_pool(regex_pool());
  CHECK(run_regex_once(*pool, fields({"replace", "(o)", "[$1]", "foo"})).result == "f[o]o");
  CHECK(run_regex_once(*pool, fields({"replace-all/i", "(o)", "[$1]", "FoO bar"})).result ==
        "F[o][O] bar");
  CHECK(run_regex_once(*pool, fields({"replace-all", "(?<w>\\w+)", "${w}!", "hi you"})).result ==
        "hi! you!");
  // The subject is bytes: NULs in it are matched like any other byte.
  CHECK(run_regex_once(*pool, fields({"replace-all", "\\x00", "0", std::string("a\0b\0", 4)}))
            .result == "a0b0");
}

TEST_CASE("a regex task with a bad pattern or payload fails permanently, saying why") {
  auto pool = make_pool(regex_pool());
  auto [payload, error] = GENERATE(table<std::string, std::string>({
      {fields({"match", "(", "x"}),
       "regex: pattern error at offset 1: missing closing parenthesis"},
      {fields({"find", "x", "x"}),
       "regex: unknown command 'find' (match, match-all, replace, "
       "replace-all)"},
      {fields({"match/q", "x", "x"}), "regex: unknown flag in 'match/q' (i, m, s, x, u)"},
      {"match",
       "regex: the payload is <command> NUL <pattern> NUL [<replacement> NUL] <subject>; "
       "found no NUL"},
      {fields({"replace", "x"}) + std::string(1, '\0') + "y",
       "regex: replace needs <replacement> NUL before the subject"},
      {fields({"match/u", ".", "\xff"}), "regex: UTF-8 error: illegal byte (0xfe or 0xff)"},
  }));
  const auto r = run_regex_once(*pool, payload);
  CHECK(r.state == TaskState::kDeadLettered);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kFailed);
  CHECK(r.error == error);
}

TEST_CASE("a regex pool's limits come from plugin_config, and the JIT ignores depth_limit") {
  const std::string nested = fields({"match", "(a|b)+c", "ababababababababc"});
  // With the JIT (the default, and it works under strict) depth_limit does not apply ...
  auto jit = make_pool(regex_pool(R"({"depth_limit": 2})"));
  CHECK(run_regex_once(*jit, nested).result == "0 17 15 16\n");
  // ... while the interpreter stops at it, and at match_limit.
  auto interpreter = make_pool(regex_pool(R"({"jit": false, "depth_limit": 2})"));
  const auto deep = run_regex_once(*interpreter, nested);
  REQUIRE(deep.attempts() == 1);
  CHECK(deep.history[0].outcome == Outcome::kResourceLimit);
  CHECK(deep.error == "regex: matching depth limit exceeded (depth_limit 2)");
  auto counted = make_pool(regex_pool(R"({"jit": false, "match_limit": 5})"));
  CHECK(run_regex_once(*counted, nested).error == "regex: match limit exceeded (match_limit 5)");
  // The JIT's stack: a capturing group repeated 10,000 times needs more than 32 KiB, less than the
  // default 1 MiB.
  auto small_stack = make_pool(regex_pool(R"({"jit_stack": "32KiB"})"));
  CHECK(run_regex_once(*small_stack, fields({"match", "^(a)*$", a_times(10000)})).error ==
        "regex: JIT stack limit reached (jit_stack 32768 bytes)");
  auto default_stack = make_pool(regex_pool());
  CHECK(run_regex_once(*default_stack, fields({"match", "^(a)*$", a_times(10000)})).result ==
        "0 10000 9999 10000\n");
}

TEST_CASE("under strict's write-xor-execute the regex JIT is refused and the interpreter matches") {
  const std::string nested = fields({"match", "(a|b)+c", "ababababababababc"});
  PoolOptions o = regex_pool(R"({"depth_limit": 2})");
  o.sandbox.write_xor_execute.reset();  // strict's default: on
  auto pool = make_pool(o);
  // The JIT's mmap(PROT_EXEC) fails with EPERM: the plugin logs it and interprets, where
  // depth_limit applies (the JIT would have finished, as the case above shows).
  const auto deep = run_regex_once(*pool, nested);
  REQUIRE(deep.attempts() == 1);
  CHECK(deep.history[0].outcome == Outcome::kResourceLimit);
  CHECK(deep.error == "regex: matching depth limit exceeded (depth_limit 2)");
  // Without the depth limit the interpreter answers as the JIT does.
  PoolOptions plain = regex_pool();
  plain.sandbox.write_xor_execute.reset();
  auto interpreted = make_pool(plain);
  CHECK(run_regex_once(*interpreted, nested).result == "0 17 15 16\n");
  CHECK(run_regex_once(*interpreted, fields({"match", R"((\w+)@(\w+))", "mail bob@example now"}))
            .result == "5 16 5 8 9 16\n");
}

TEST_CASE("a regex pool whose plugin_config is wrong does not start") {
  auto config = GENERATE(as<std::string>{}, R"({"match_limt": 5})", R"({"jit": "yes"})",
                         R"({"jit_stack": "1KiB"})", R"({"match_limit": -1})");
  PoolOptions o = regex_pool(config);
  o.max_init_failures = 1;
  auto pool = Pool::create(o);
  CHECK_FALSE(pool);
}
