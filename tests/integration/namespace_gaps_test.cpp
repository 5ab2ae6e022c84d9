// Doors of the namespace sandbox, with real processes: /proc without a pid namespace. A
// combination of namespaces the kernel refuses ends the test as skipped (exit code 77).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sandpool/spawner.hpp>

#include "test_support.hpp"

using namespace sandpool;
using sandbox::Namespace;
using sandbox::NamespaceSet;

namespace {

const std::string kProbe = std::string(SANDPOOL_TEST_PLUGIN_DIR) + "/libns_probe.so";

NamespaceSet set_of(std::initializer_list<Namespace> list) {
  NamespaceSet s;
  for (Namespace ns : list) s.add(ns);
  return s;
}

// Ends the test as skipped unless this process may create every namespace of `wanted`.
void require_namespaces(NamespaceSet wanted) {
  std::string why;
  if (probe_namespaces(wanted, &why) == wanted) return;
  std::fprintf(stderr, "skipped: the kernel refuses namespaces here: %s\n", why.c_str());
  std::exit(77);
}

std::string probe(Pool& pool, const std::string& cmd) {
  TaskResult r = sandpool::testing::run(pool, "probe", cmd);
  REQUIRE(r.state == TaskState::kCompleted);
  return r.result;
}

}  // namespace

TEST_CASE("without a pid namespace the worker's /proc shows its own process, not the host's") {
  const NamespaceSet wanted =
      GENERATE(set_of({Namespace::kMount}), set_of({Namespace::kUser, Namespace::kMount}),
               set_of({Namespace::kUser, Namespace::kMount, Namespace::kNet, Namespace::kIpc,
                       Namespace::kUts}));
  require_namespaces(wanted);
  PoolOptions o;
  o.name = "test-proc";
  o.plugin_path = kProbe;
  o.worker_path = SANDPOOL_WORKER_PATH;
  o.workers = 1;
  o.sandbox.profile = sandbox::SeccompProfile::kOff;  // the probe opens files
  o.sandbox.namespaces.wanted = wanted;
  auto pool = sandpool::testing::make_pool(o);
  const std::string pid = probe(*pool, "pid");
  CHECK(pid == std::to_string(pool->workers().at(0).pid));  // the host's pid: no pid namespace
  // Its own entry, through /proc/self; no other process's: not the host's init, not the
  // manager (absent, not merely refused: Landlock alone would answer EACCES).
  CHECK(probe(*pool, "read /proc/self/comm").rfind("read:sandpool-work", 0) == 0);
  CHECK(probe(*pool, "read /proc/" + pid + "/comm").rfind("read:sandpool-work", 0) == 0);
  const std::string absent = "error:" + std::to_string(ENOENT);
  CHECK(probe(*pool, "read /proc/1/comm") == absent);
  CHECK(probe(*pool, "read /proc/" + std::to_string(::getpid()) + "/status") == absent);
  CHECK(probe(*pool, "read /proc/meminfo") == absent);
}
