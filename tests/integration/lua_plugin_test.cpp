// The lua plugin (plugins/lua/) on Debian's liblua5.4, through a real Pool under the default
// strict seccomp profile: payload format, results, the script's errors, the environment a
// script sees, named scripts and the limits from plugin_config. Hostile scripts (endless
// loops, endless allocation, escapes) are in tests/hostile/lua_test.cpp.
#include <catch2/catch.hpp>

#include <memory>
#include <sstream>
#include <string>

#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include "test_support.hpp"

using namespace sandpool;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;

namespace {

// A payload: the script, a NUL, the input.
std::string with_input(const std::string& script, const std::string& input) {
  return script + std::string(1, '\0') + input;
}

PoolOptions lua_pool(const std::string& plugin_config = "{}") {
  PoolOptions o = pool_options("lua", 1);
  o.plugin_config_json = plugin_config;
  return o;
}

TaskResult run_once(Pool& pool, std::string payload) {
  SubmitOptions so;
  so.retries = 0;
  return run(pool, "lua", std::move(payload), so);
}

}  // namespace

TEST_CASE("a lua script's return value is the task's result, and its input follows a NUL") {
  auto pool = make_pool(lua_pool());
  CHECK(run_once(*pool, with_input("return input:upper()", "hello")).result == "HELLO");
  CHECK(run_once(*pool, with_input("local s = ... return s:reverse()", "abc")).result == "cba");
  // The input is bytes: NULs past the first one belong to it, and so does a trailing newline.
  const auto r =
      run_once(*pool, with_input("return #input .. ':' .. input", std::string("a\0b\n", 4)));
  CHECK(r.result == std::string("4:a\0b\n", 6));
}

TEST_CASE("a lua script returning a number, nothing, or a table") {
  auto pool = make_pool(lua_pool());
  CHECK(run_once(*pool, "return 6 * 7").result == "42");
  CHECK(run_once(*pool, "return 0.5").result == "0.5");
  const auto nothing = run_once(*pool, "local x = 1");
  CHECK(nothing.state == TaskState::kCompleted);
  CHECK(nothing.result.empty());
  const auto table = run_once(*pool, "return {}");
  CHECK(table.state == TaskState::kDeadLettered);
  CHECK(table.reason == DeadReason::kPermanent);
  CHECK(table.error == "the script returned a table (expected a string, a number or nothing)");
}

TEST_CASE("a lua script's error, with its line, is the task's permanent error") {
  auto pool = make_pool(lua_pool());
  auto [script, error] = GENERATE(table<std::string, std::string>({
      {"local x = 1\nerror('boom')", "script:2: boom"},
      {"\n\nreturn nil + 1", "script:3: attempt to perform arithmetic on a nil value"},
      {"return (", "script:1: unexpected symbol near <eof>"},
      {"error({})", "(error object is a table value)"},
  }));
  const auto r = run_once(*pool, script);
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kPermanent);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kFailed);
  CHECK(r.error == error);
}

TEST_CASE("a lua script sees no os, io, debug, package, require, dofile, loadfile or string.dump") {
  auto pool = make_pool(lua_pool());
  const auto r = run_once(*pool,
                          "return table.concat({tostring(os), tostring(io), tostring(debug), "
                          "tostring(package), tostring(require), tostring(dofile), "
                          "tostring(loadfile), tostring(string.dump), tostring(('').dump)}, ' ')");
  CHECK(r.result == "nil nil nil nil nil nil nil nil nil");
  // What it does see: the base, string, table, math, utf8 and coroutine libraries.
  const auto libs = run_once(*pool,
                             "return type(string.format) .. type(table.sort) .. type(math.sqrt) "
                             ".. type(utf8.char) .. type(coroutine.wrap) .. type(pcall)");
  CHECK(libs.result == "functionfunctionfunctionfunctionfunctionfunction");
}

TEST_CASE("a lua script's load compiles text, and refuses bytecode") {
  auto pool = make_pool(lua_pool());
  CHECK(run_once(*pool, "return load('return 1 + 1')()").result == "2");
  CHECK(run_once(*pool, "return load('return x', 'c', 't', {x = 'env'})()").result == "env");
  // An absent env keeps the globals; a chunk of bytecode (ESC "Lua") is refused by Lua itself.
  CHECK(run_once(*pool, "y = 3 return load('return y', 'c', nil)()").result == "3");
  CHECK(run_once(*pool, "local f, e = load('\\27Lua') return e").result ==
        "attempt to load a binary chunk (mode is 't')");
  const auto binary_mode = run_once(*pool, "return load('return 1', 'c', 'b')");
  CHECK(binary_mode.error.find("only text chunks may be loaded") != std::string::npos);
  // A payload of bytecode is refused the same way.
  const auto bytecode = run_once(*pool, "\x1bLua");
  CHECK(bytecode.state == TaskState::kDeadLettered);
  CHECK(bytecode.error.find("attempt to load a binary chunk") != std::string::npos);
}

TEST_CASE("a lua script's setmetatable and xpcall work as in Lua, finalizers aside") {
  auto pool = make_pool(lua_pool());
  CHECK(
      run_once(*pool, "return setmetatable({}, {__index = function(t, k) return k .. '!' end}).hi")
          .result == "hi!");
  CHECK(run_once(*pool,
                 "return select(2, xpcall(function() error('x', 0) end, "
                 "function(e) return 'handled ' .. e end))")
            .result == "handled x");
  CHECK(run_once(*pool, "return select('#', xpcall(function(...) return ... end, print, 1, 2))")
            .result == "3");
  // A finalizer would run with Lua's hooks off, out of the instruction limit's reach.
  const auto gc = run_once(*pool, "setmetatable({}, {__gc = print})");
  CHECK(gc.error.rfind("script:1: setmetatable: __gc metamethods are not allowed", 0) == 0);
}

TEST_CASE("each lua task starts from a fresh state: globals do not leak between tasks") {
  auto pool = make_pool(lua_pool());
  CHECK(run_once(*pool, "leaked = 'yes' string.upper = nil return 'set'").result == "set");
  CHECK(run_once(*pool, "return tostring(leaked) .. ('x'):upper()").result == "nilX");
}

TEST_CASE("a lua payload '@name' runs the named script of plugin_config on the input") {
  auto pool = make_pool(lua_pool(
      R"j({"scripts": {"words": "local n = 0 for _ in input:gmatch('%S+') do n = n + 1 end return n",)j"
      R"j( "bad": "local x = 1\nerror('named ' .. x)"}})j"));
  CHECK(run_once(*pool, with_input("@words", "one two  three")).result == "3");
  CHECK(run_once(*pool, "@words").result == "0");
  CHECK(run_once(*pool, "@bad").error == "bad:2: named 1");
  const auto unknown = run_once(*pool, with_input("@nope", "x"));
  CHECK(unknown.state == TaskState::kDeadLettered);
  CHECK(unknown.error == "lua: no script named 'nope' in plugin_config.scripts");
}

TEST_CASE("a lua pool with allow_payload_scripts false runs only its named scripts") {
  auto pool = make_pool(
      lua_pool(R"j({"allow_payload_scripts": false, "scripts": {"up": "return input:upper()"}})j"));
  CHECK(run_once(*pool, with_input("@up", "ok")).result == "OK");
  const auto r = run_once(*pool, "return 1");
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.error.find("plugin_config.allow_payload_scripts is false") != std::string::npos);
}

TEST_CASE("a lua pool whose plugin_config is wrong does not start, and says why") {
  auto [config, says] = GENERATE(table<std::string, std::string>({
      {R"j({"max_instrucions": 5})j", "max_instrucions: unknown key"},
      {R"j({"max_memory": "lots"})j", "max_memory: expected a size like 64MiB"},
      {R"j({"max_instructions": -1})j", "max_instructions: expected a count"},
      {R"j({"scripts": {"broken": "return ("}})j",
       "scripts.broken: broken:1: unexpected symbol near <eof>"},
  }));
  std::ostringstream log;
  PoolOptions o = lua_pool(config);
  o.max_init_failures = 1;
  o.logger = std::make_shared<spdlog::logger>(
      "lua", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  auto pool = Pool::create(o);
  REQUIRE_FALSE(pool);
  CHECK(pool.status().message().find("init failed") != std::string::npos);
  INFO(log.str());
  CHECK(log.str().find("lua: plugin_config: " + says) != std::string::npos);
}

TEST_CASE("a script stopped at its instruction limit is resource_limit, retried in its worker") {
  auto pool = make_pool(lua_pool(R"j({"max_instructions": 100000})j"));
  SubmitOptions so;
  so.retries = 1;
  const auto r = run(*pool, "lua", "while true do end", so);
  REQUIRE(r.attempts() == 2);
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kRetriesExhausted);
  for (const auto& a : r.history) {
    CHECK(a.outcome == Outcome::kResourceLimit);
    CHECK(a.error == "lua: instruction limit reached (100000 instructions)");
  }
  CHECK(r.history[1].worker_pid == r.history[0].worker_pid);  // the plugin stopped, not a kill
  CHECK(pool->stats().restarts == 0);
}

TEST_CASE("a lua pool's limits come from plugin_config") {
  const std::string loop = "local n = 0 for i = 1, 1000000 do n = n + i end return n";
  const std::string grow =
      "local t = {} for i = 1, 100000 do t[i] = ('x'):rep(100) .. i end return #t";
  auto defaults = make_pool(lua_pool());
  CHECK(run_once(*defaults, loop).result == "500000500000");
  CHECK(run_once(*defaults, grow).result == "100000");
  auto tight = make_pool(lua_pool(R"j({"max_instructions": 100000, "max_memory": "1MiB"})j"));
  const auto slow = run_once(*tight, loop);
  REQUIRE(slow.attempts() == 1);
  CHECK(slow.history[0].outcome == Outcome::kResourceLimit);
  CHECK(slow.error == "lua: instruction limit reached (100000 instructions)");
  const auto big = run_once(*tight, grow);
  REQUIRE(big.attempts() == 1);
  CHECK(big.history[0].outcome == Outcome::kResourceLimit);
  CHECK(big.error == "lua: memory limit reached (1048576 bytes)");
  auto unlimited = make_pool(lua_pool(R"j({"max_instructions": 0, "max_memory": 0})j"));
  CHECK(run_once(*unlimited, loop).result == "500000500000");
}

TEST_CASE(
    "a lua script without an instruction limit stops when cancelled, and its worker survives") {
  auto pool = make_pool(lua_pool(R"({"max_instructions": 0})"));
  auto t = pool->submit("lua", "while true do end");
  REQUIRE(t);
  sandpool::testing::wait_running(*t);
  const auto pid = pool->workers().at(0).pid;
  REQUIRE(t->cancel());
  REQUIRE(t->wait_for(sandpool::testing::kPatience));
  const TaskResult r = t->wait();
  CHECK(r.state == TaskState::kCancelled);
  CHECK(r.error == "cancelled");  // the plugin's own answer, not a kill
  CHECK(run_once(*pool, "return 1").history.at(0).worker_pid == pid);
}

TEST_CASE("a lua script's print writes one line to the manager's log, not to stdout") {
  std::ostringstream log;
  PoolOptions o = lua_pool();
  o.logger = std::make_shared<spdlog::logger>(
      "lua", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  o.logger->set_level(spdlog::level::info);
  auto pool = make_pool(o);
  CHECK(run_once(*pool,
                 "print('hello', 1, nil, setmetatable({}, {__tostring = function() "
                 "return 'obj' end})) return 'ok'")
            .result == "ok");
  pool->close();
  INFO(log.str());
  // The host escapes the tabs; the line is the plugin's log, not the worker's stdout.
  CHECK(log.str().find("plugin: hello\\t1\\tnil\\tobj") != std::string::npos);
  CHECK(log.str().find("output: hello") == std::string::npos);
}
