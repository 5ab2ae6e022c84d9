// Hostile Python handlers against the real python plugin (plugins/python/, Debian's
// libpython3.11) under the default strict seccomp profile: a handler that swallows every
// exception to run forever, that allocates until the address space is gone, that takes the
// import guard off to read files anyway, that calls libc through ctypes, signals init,
// crashes the interpreter in C, or raises an exception that cannot be printed.
// Each case: the attack's outcome, ordinary tasks beside it complete, both pools still serve,
// nothing is left behind (HostileWorld).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "hostile_world.hpp"
#include "public_dir.hpp"
#include "python_init_paths.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::hostile::hostile_options;
using sandpool::hostile::HostileWorld;
using sandpool::testing::PublicDir;

namespace {

// One module of hostile handlers, dispatching on the payload.
constexpr const char* kHostileModule = R"py(import ctypes, json, os, sys
import importlib.machinery

def forever():
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass

def hog():
    kept = []
    while True:
        kept.append(bytearray(16 << 20))

def hog_swallowed():
    kept = []
    while True:
        try:
            kept.append(bytearray(16 << 20))
        except MemoryError:
            return b'survived %d' % len(kept)

def unguarded_import():
    sys.meta_path.insert(0, importlib.machinery.PathFinder)
    import decimal
    return decimal.__name__

def ctypes_kill():
    ctypes.CDLL(None).kill(1, 9)

def ctypes_exec():
    ctypes.CDLL(None).execv(b'/bin/sh', None)

def os_kill():
    os.kill(1, 9)

def deep_json():
    sys.setrecursionlimit(10 ** 8)
    nested = []
    for _ in range(10 ** 6):
        nested = [nested]
    return json.dumps(nested)

class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError('no')

def unprintable():
    raise Unprintable()

def handle(payload):
    return globals()[payload.decode()]()

def read_secret():
    return open('/etc/shadow', 'rb').read()
)py";

std::string python_plugin_path() { return std::string(SANDPOOL_PLUGIN_DIR) + "/libpython.so"; }

PoolOptions python_options(const PublicDir& dir) {
  PoolOptions o = hostile_options(python_plugin_path());
  o.plugin_config_json = R"({"handler": "hostile_tasks:handle", "path": [")" + dir.path() + "\"]}";
  o.sandbox.init.read_paths = sandpool::testing::python_init_read_paths(o.plugin_config_json);
  return o;
}

bool python_pool_has_worker(Pool& pool, std::int32_t pid) {
  const auto ws = pool.workers();
  return std::any_of(ws.begin(), ws.end(), [&](const WorkerInfo& w) { return w.pid == pid; });
}

}  // namespace

TEST_CASE("a python handler that swallows every exception to run forever meets the timeout") {
  PublicDir dir;
  dir.write("hostile_tasks.py", kHostileModule);
  HostileWorld world;
  world.start(python_options(dir));
  SubmitOptions so;
  so.timeout = 1s;
  const TaskResult r = world.attack("python", "forever", so);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kTimedOut);  // its worker killed; the others served
  world.close_and_check_clean();
}

TEST_CASE("a python handler that allocates without end is resource_limit, its worker alive") {
  PublicDir dir;
  dir.write("hostile_tasks.py", kHostileModule);
  HostileWorld world;
  world.start(python_options(dir));  // RLIMIT_AS 512 MiB
  const TaskResult r = world.attack("python", "hog");
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kResourceLimit);
  CHECK(r.error.rfind("python: out of memory, the worker's limits.memory reached: MemoryError",
                      0) == 0);
  CHECK(python_pool_has_worker(world.pool(), r.history[0].worker_pid));
  CHECK(world.pool().stats().restarts == 0);
  // One that catches its MemoryError has what it kept freed when it returns, and the worker
  // serves on.
  const TaskResult swallowed = world.attack("python", "hog_swallowed");
  CHECK(swallowed.state == TaskState::kCompleted);
  CHECK(swallowed.result.rfind("survived ", 0) == 0);
  world.close_and_check_clean();
}

TEST_CASE("a python handler that escapes the interpreter's rules meets the sandbox") {
  PublicDir dir;
  dir.write("hostile_tasks.py", kHostileModule);
  HostileWorld world;
  world.start(python_options(dir));
  const auto [what, syscall] = GENERATE(table<std::string, std::string>({
      // The import guard is a courtesy: taken off, the import needs a file, and that is
      // where the sandbox stops it.
      {"unguarded_import", "openat"},
      {"read_secret", "openat"},
      {"ctypes_kill", "kill"},
      {"ctypes_exec", "execve"},
      {"os_kill", "kill"},
  }));
  INFO(what);
  const TaskResult r = world.attack("python", what);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kSandboxViolation);
  CHECK(r.history[0].error == "sandbox_violation: " + syscall);
  world.close_and_check_clean();
}

TEST_CASE("a python handler that crashes the interpreter in C costs its worker only") {
  PublicDir dir;
  dir.write("hostile_tasks.py", kHostileModule);
  HostileWorld world;
  world.start(python_options(dir));
  // The recursion limit raised past the C stack: json's C encoder recurses until SIGSEGV.
  const TaskResult r = world.attack("python", "deep_json");
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kLost);
  world.close_and_check_clean();
}

TEST_CASE("a python exception that cannot be printed still fails its task plainly") {
  PublicDir dir;
  dir.write("hostile_tasks.py", kHostileModule);
  HostileWorld world;
  world.start(python_options(dir));
  const TaskResult r = world.attack("python", "unprintable");
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kFailed);
  CHECK(r.error == "Unprintable: (str() of the exception failed) (at " + dir.path() +
                       "/hostile_tasks.py:51, in unprintable)");
  world.close_and_check_clean();
}
