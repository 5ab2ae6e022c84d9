// Hostile Lua scripts against the real lua plugin (plugins/lua/, Debian's liblua5.4) under
// the default strict seccomp profile: scripts that loop or allocate without end, that
// swallow the limit's error to go on, that reach for the file system, bytecode or the
// process, or that hide work in C code where the instruction count cannot see it. Each case:
// the attack's outcome, ordinary tasks beside it complete, both pools still serve, nothing
// is left behind (HostileWorld).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "hostile_world.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::hostile::hostile_options;
using sandpool::hostile::HostileWorld;

namespace {

std::string lua_plugin() { return std::string(SANDPOOL_PLUGIN_DIR) + "/liblua.so"; }

// The hostile pool on the lua plugin; 20M instructions (~0.15 s of a busy loop) keeps the
// cases quick, and 32 MiB is far below the pool's 512 MiB address-space limit.
PoolOptions lua_options(const std::string& config = R"({"max_instructions": 20000000,
                                                         "max_memory": "32MiB"})") {
  PoolOptions o = hostile_options(lua_plugin());
  o.plugin_config_json = config;
  return o;
}

bool has_worker(Pool& pool, std::int32_t pid) {
  const auto ws = pool.workers();
  return std::any_of(ws.begin(), ws.end(), [&](const WorkerInfo& w) { return w.pid == pid; });
}

// The attempt was stopped by the plugin itself: its worker lives on, nothing was restarted.
void require_stopped_by_the_plugin(HostileWorld& world, const TaskResult& r,
                                   const std::string& error) {
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.history[0].outcome == Outcome::kResourceLimit);
  CHECK(r.history[0].error == error);
  CHECK(has_worker(world.pool(), r.history[0].worker_pid));
  CHECK(world.pool().stats().restarts == 0);
}

}  // namespace

TEST_CASE("a lua script that loops forever stops at the default instruction limit") {
  HostileWorld world;
  world.start(lua_options("{}"));
  const TaskResult r = world.attack("lua", "while true do end");
  require_stopped_by_the_plugin(world, r,
                                "lua: instruction limit reached (100000000 instructions)");
  world.close_and_check_clean();
}

TEST_CASE("a lua script that catches the instruction limit's error cannot go on") {
  HostileWorld world;
  world.start(lua_options());
  // pcall in a loop, two levels deep, a coroutine that is resumed again after it died, and
  // an error handler that loops: each catches the limit's error and tries to carry on.
  const auto script = GENERATE(
      as<std::string>{}, "while true do pcall(function() while true do end end) end",
      "while true do pcall(function() while true do pcall(function() end) end end) end",
      "while true do local co = coroutine.create(function() while true do end end) "
      "coroutine.resume(co) end",
      "while true do xpcall(function() while true do end end, function() while true do end "
      "end) end",
      // Not caught, but spread over two threads: the coroutine counts too.
      "local co = coroutine.wrap(function() while true do coroutine.yield() end end) "
      "while true do co() end");
  INFO(script);
  const TaskResult r = world.attack("lua", script);
  require_stopped_by_the_plugin(world, r, "lua: instruction limit reached (20000000 instructions)");
  world.close_and_check_clean();
}

TEST_CASE("a lua script that allocates without end stops at the memory cap") {
  HostileWorld world;
  world.start(lua_options());
  const auto script = GENERATE(
      as<std::string>{}, "local t = {} while true do t[#t + 1] = ('x'):rep(4096) .. #t end",
      "return ('x'):rep(1 << 30)",
      // Lua-to-Lua calls grow Lua's own stack, not the C stack: the cap comes first.
      "local function f() return 1 + f() end return f()",
      // Caught, and tried again: the first refusal after a collection is final.
      "local t = {} while true do pcall(function() t[#t + 1] = ('y'):rep(65536) .. #t end) end",
      "local s = 'z' while true do s = s .. s end",
      // Inside a C function that calls back into Lua.
      "return ('a'):rep(100):gsub('a', function(c) return c:rep(1e6) end)");
  INFO(script);
  const TaskResult r = world.attack("lua", script);
  require_stopped_by_the_plugin(world, r, "lua: memory limit reached (33554432 bytes)");
  world.close_and_check_clean();
}

TEST_CASE("a lua script that reaches for files, the process or bytecode gets a plain error") {
  HostileWorld world;
  world.start(lua_options());
  const auto [script, error] = GENERATE(table<std::string, std::string>({
      {"return io.open('/etc/passwd'):read('a')",
       "script:1: attempt to index a nil value (global 'io')"},
      {"os.execute('id')", "script:1: attempt to index a nil value (global 'os')"},
      {"return require('io')", "script:1: attempt to call a nil value (global 'require')"},
      {"return dofile('/etc/passwd')", "script:1: attempt to call a nil value (global 'dofile')"},
      {"return loadfile('/etc/passwd')",
       "script:1: attempt to call a nil value (global 'loadfile')"},
      {"return debug.getregistry()", "script:1: attempt to index a nil value (global 'debug')"},
      {"return string.dump(print)", "script:1: attempt to call a nil value (field 'dump')"},
      {"return load('\\27Lua\\x54\\0', 'x', 'b')()",
       "script:1: load: only text chunks may be "
       "loaded (mode \"t\"), not \"b\""},
      {"return assert(load('\\27Lua\\x54\\0'))()",
       "script:1: attempt to load a binary chunk (mode is 't')"},
      // The parser's nesting is bounded by Lua's C-call limit (200), not by the C stack.
      {"return " + std::string(10000, '(') + "1" + std::string(10000, ')'), "C stack overflow"},
      {"setmetatable({}, {__gc = function() while true do end end})",
       "script:1: setmetatable: __gc metamethods are not allowed"},
  }));
  INFO(script);
  const TaskResult r = world.attack("lua", script);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kFailed);  // the script's error: no violation, no kill
  CHECK(r.error.rfind(error, 0) == 0);
  CHECK(has_worker(world.pool(), r.history[0].worker_pid));
  CHECK(world.pool().stats().restarts == 0);
  world.close_and_check_clean();
}

// Lua's pattern matcher is C: a backtracking pattern burns CPU where the instruction count
// cannot see it. The task's timeout is what stops it, at the cost of its worker only
// (docs/plugin-guide.md, "lua").
TEST_CASE("a lua pattern that backtracks in C is stopped by the task's timeout") {
  HostileWorld world;
  world.start(lua_options());
  SubmitOptions so;
  so.timeout = 1s;
  const TaskResult r =
      world.attack("lua", "return (('a'):rep(5000)):find(('a*'):rep(20) .. 'b')", so);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kTimedOut);
  world.close_and_check_clean();
}

// string.rep of an empty string (and an empty separator) loops n times in C, copying nothing,
// where the instruction count cannot see it: ('').rep('', 1 << 40) took an hour of CPU. The
// plugin's string.rep answers "" at once; any other call builds its string through the capped
// allocator, its work bounded by max_memory.
TEST_CASE("a lua string.rep of nothing a trillion times answers at once") {
  HostileWorld world;
  world.start(lua_options());
  const auto [script, result] = GENERATE(table<std::string, std::string>({
      {"return (''):rep(1 << 40)", ""},
      {"return string.rep('', 1 << 40, '')", ""},
      {"return #(('ab'):rep(3, ','))", "8"},
  }));
  INFO(script);
  SubmitOptions so;
  so.timeout = std::chrono::seconds(20);
  const TaskResult r = world.attack("lua", script, so);
  INFO(r.error);
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.result == result);
  world.close_and_check_clean();
}
