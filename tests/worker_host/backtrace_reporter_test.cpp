// Hung-task diagnostics in the worker host: the real sandpool-worker answers a backtrace
// request inside its sandbox, and the in-process writer stays within the region's area.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include <sandpool/ipc/diagnostics.hpp>

#include "backtrace_reporter.hpp"
#include "worker_host/worker_harness.hpp"

using namespace sandpool;
using sandpool::testing::plugin_path;
using sandpool::testing::worker_args;
using sandpool::testing::WorkerHarness;

namespace {

void signal_task_thread(pid_t pid) {
  REQUIRE(::syscall(SYS_tgkill, pid, pid, ipc::backtrace_signal()) == 0);
}

std::uint32_t state_of(const WorkerHarness& w) {
  return w.header().diagnostics.backtrace_state.load();
}

constexpr auto kDone = static_cast<std::uint32_t>(ipc::BacktraceState::kDone);

}  // namespace

TEST_CASE("a sandboxed worker asked for a backtrace names the plugin function it is in") {
  const auto profile =
      GENERATE(sandbox::SeccompProfile::kStrict, sandbox::SeccompProfile::kRelaxed);
  sandbox::WorkerArgs args = worker_args(plugin_path("sleep"));
  args.policy.profile = profile;
  auto w = WorkerHarness::spawn(args);
  REQUIRE(w->expect_ready().has_value());
  w->send(w->task(7, "sleep", "2000"));  // long enough to be caught inside it
  REQUIRE(w->wait_until([&] { return w->header().started_task.load() == 7; }));

  ipc::request_backtrace(w->header().diagnostics);
  signal_task_thread(w->pid());
  REQUIRE(w->wait_until([&] { return state_of(*w) == kDone; }));  // the doorbell rings
  auto text = ipc::take_backtrace(w->header().diagnostics);
  REQUIRE(text.has_value());
  INFO(*text);
  CHECK(text->rfind("#0 ", 0) == 0);  // the interrupted frame first, the handler left out
  CHECK(text->find("on_backtrace_request") == std::string::npos);
  CHECK(text->find("sp_plugin_handle+0x") != std::string::npos);
  CHECK(text->find("(libsleep.so)") != std::string::npos);
  CHECK(text->size() <= ipc::kBacktraceBytes);

  // The task carries on as if nothing happened, within the sandbox.
  auto r = w->next_result();
  REQUIRE(r.has_value());
  CHECK(r->id == 7);
  CHECK(r->status == ipc::TaskStatus::kOk);
}

TEST_CASE("a backtrace signal nobody asked for is not answered") {
  auto w = WorkerHarness::spawn(worker_args(plugin_path("echo")));
  REQUIRE(w->expect_ready().has_value());
  signal_task_thread(w->pid());  // as a plugin raising it itself would
  w->send(w->task(1, "echo", "still here"));
  auto r = w->next_result();
  REQUIRE(r.has_value());
  CHECK(r->data == "still here");
  CHECK(state_of(*w) == static_cast<std::uint32_t>(ipc::BacktraceState::kIdle));
  CHECK_FALSE(ipc::take_backtrace(w->header().diagnostics).has_value());
}

namespace {

// Recurses past the writer's frame limit before writing.
__attribute__((noinline)) std::size_t deep(ipc::DiagnosticArea& area, int depth) {
  if (depth == 0) return worker::write_backtrace(area, nullptr);
  const std::size_t n = deep(area, depth - 1);
  asm volatile("" ::: "memory");  // not a tail call
  return n;
}

}  // namespace

TEST_CASE("the backtrace writer stays within the area, one frame per line") {
  auto area = std::make_unique<ipc::DiagnosticArea>();
  REQUIRE(worker::install_backtrace_reporter(area.get(), -1).is_ok());
  const std::size_t n = deep(*area, 200);
  CHECK(n > 0);
  CHECK(n <= ipc::kBacktraceBytes);
  CHECK(area->backtrace_len.load() == n);
  area->backtrace_state.store(kDone);
  auto text = ipc::take_backtrace(*area);
  REQUIRE(text.has_value());
  CHECK(text->rfind("#0 ", 0) == 0);
  CHECK(text->find("#63 ") != std::string::npos);  // as many frames as it keeps
  CHECK(text->find("#64 ") == std::string::npos);
  signal(ipc::backtrace_signal(), SIG_DFL);
}
