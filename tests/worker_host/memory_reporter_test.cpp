// The real sandpool-worker under an address-space limit: a task that exhausts it ends the
// worker with a memory report (resource_limit: memory on the manager's side), whether the
// plugin noticed the failed allocation or crashed on it; a plain crash reports nothing.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <string>

#include "worker_host/worker_harness.hpp"

using namespace sandpool;
using sandpool::testing::plugin_path;
using sandpool::testing::test_plugin_path;
using sandpool::testing::worker_args;
using sandpool::testing::WorkerHarness;

namespace {

constexpr std::uint64_t kLimit = 256ull << 20;
constexpr auto kMemory = static_cast<std::uint32_t>(ipc::FatalReport::kMemory);

std::unique_ptr<WorkerHarness> limited_worker(const std::string& plugin,
                                              sandbox::SeccompProfile profile) {
  sandbox::WorkerArgs args = worker_args(plugin);
  args.policy.limits.address_space = kLimit;
  args.policy.profile = profile;
  auto w = WorkerHarness::spawn(args);
  REQUIRE(w->expect_ready().has_value());
  return w;
}

std::uint32_t fatal_report(const WorkerHarness& w) {
  return w.header().diagnostics.fatal_report.load();
}

}  // namespace

TEST_CASE("a task that fails with the address space exhausted ends its worker with a report") {
  const auto profile =
      GENERATE(sandbox::SeccompProfile::kStrict, sandbox::SeccompProfile::kRelaxed);
  auto w = limited_worker(plugin_path("alloc"), profile);
  w->send(w->task(1, "alloc", "1024"));  // alloc checks malloc and returns SP_FAIL
  auto status = w->wait_exit();
  INFO(w->output());
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == sandbox::kExitMemory);
  CHECK(fatal_report(*w) == kMemory);
  CHECK(w->header().started_task.load() == 1);  // the manager charges this task
  CHECK(w->output().find("alloc: out of memory after") != std::string::npos);
  for (const auto& m : w->late_messages()) {
    CHECK_FALSE(std::holds_alternative<ipc::ResultMsg>(m));  // no SP_FAIL reported
  }
}

TEST_CASE("a plugin that crashes on an exhausted address space dies of its signal, reported") {
  const auto profile =
      GENERATE(sandbox::SeccompProfile::kStrict, sandbox::SeccompProfile::kRelaxed);
  auto [payload, signal] =
      GENERATE(table<std::string, int>({{"segv", SIGSEGV}, {"abort", SIGABRT}}));
  auto w = limited_worker(test_plugin_path("exhaust"), profile);
  w->send(w->task(1, "exhaust", payload));
  auto status = w->wait_exit();
  INFO(w->output());
  REQUIRE(status.has_value());
  REQUIRE(WIFSIGNALED(*status));
  CHECK(WTERMSIG(*status) == signal);  // the truth, not SIGSYS or an exit code
  CHECK(fatal_report(*w) == kMemory);
  CHECK(w->output().find("address space exhausted") != std::string::npos);
}

TEST_CASE("a plain crash with memory to spare carries no memory report") {
  auto [payload, signal] =
      GENERATE(table<std::string, int>({{"segv", SIGSEGV}, {"abort", SIGABRT}}));
  auto w = limited_worker(test_plugin_path("exhaust"), sandbox::SeccompProfile::kStrict);
  w->send(w->task(1, "crash", payload));
  auto status = w->wait_exit();
  INFO(w->output());
  REQUIRE(status.has_value());
  REQUIRE(WIFSIGNALED(*status));
  CHECK(WTERMSIG(*status) == signal);
  CHECK(fatal_report(*w) == 0);
}
