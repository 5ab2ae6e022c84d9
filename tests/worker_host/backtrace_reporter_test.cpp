// Hung-task diagnostics in the worker host: the real sandpool-worker answers a backtrace
// request inside its sandbox from every thread asked, and the in-process writer stays
// within its section.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <sandpool/ipc/diagnostics.hpp>

#include "backtrace_reporter.hpp"
#include "worker_host/worker_harness.hpp"

using namespace sandpool;
using sandpool::testing::plugin_path;
using sandpool::testing::test_plugin_path;
using sandpool::testing::worker_args;
using sandpool::testing::WorkerHarness;

namespace {

// What the manager's PoolLoop does: open a request, signal each thread, say how many
// (the order does not matter here).
std::uint32_t ask_every_thread(WorkerHarness& w) {
  ipc::DiagnosticArea& area = w.header().diagnostics;
  ipc::request_backtrace(area);
  std::uint32_t signalled = 0;
  const auto dir = std::filesystem::path("/proc") / std::to_string(w.pid()) / "task";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const pid_t tid = std::stoi(entry.path().filename().string());
    if (::syscall(SYS_tgkill, w.pid(), tid, ipc::backtrace_signal()) == 0) ++signalled;
  }
  ipc::expect_backtraces(area, signalled);
  return signalled;
}

std::optional<std::string> complete_answer(WorkerHarness& w) {
  std::optional<std::string> text;
  w.wait_until([&] {  // the doorbell rings with each answer
    text = ipc::take_backtrace(w.header().diagnostics);
    return text.has_value();
  });
  return text;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a sandboxed worker asked for a backtrace names the plugin function it is in") {
  const auto profile =
      GENERATE(sandbox::SeccompProfile::kStrict, sandbox::SeccompProfile::kRelaxed);
  sandbox::WorkerArgs args = worker_args(plugin_path("sleep"));
  args.policy.profile = profile;
  auto w = WorkerHarness::spawn(args);
  REQUIRE(w->expect_ready().has_value());
  w->send(w->task(7, "sleep", "600000"));  // runs until the test cancels it
  REQUIRE(w->wait_until([&] { return w->header().started_task.load() == 7; }));

  REQUIRE(ask_every_thread(*w) == 1);
  auto text = complete_answer(*w);
  REQUIRE(text.has_value());
  INFO(*text);
  const std::string first_line = "thread " + std::to_string(w->pid()) + " (task thread)\n#0 ";
  CHECK(text->rfind(first_line, 0) == 0);  // the interrupted frame first, the handler left out
  CHECK(text->find("on_backtrace_request") == std::string::npos);
  CHECK(text->find("sp_plugin_handle+0x") != std::string::npos);
  CHECK(text->find("(libsleep.so)") != std::string::npos);
  CHECK(text->size() <= ipc::kBacktraceBytes);

  // The task carries on as if nothing happened, within the sandbox: it still runs, and it
  // sees the cancel that ends it.
  CHECK(w->header().started_task.load() == 7);
  w->header().cancel_task.store(7);
  auto r = w->next_result();
  REQUIRE(r.has_value());
  CHECK(r->id == 7);
  CHECK(r->status == ipc::TaskStatus::kFail);
  CHECK(r->error == "cancelled");
}

TEST_CASE("every thread of a hung worker says where it is") {
  sandbox::WorkerArgs args = worker_args(test_plugin_path("threads"));
  args.policy.profile = sandbox::SeccompProfile::kRelaxed;  // the profile for threads
  auto w = WorkerHarness::spawn(args);
  REQUIRE(w->expect_ready().has_value());
  w->send(w->task(3, "spin", ""));
  REQUIRE(w->wait_until([&] { return w->header().started_task.load() == 3; }));

  REQUIRE(ask_every_thread(*w) == 3);  // the task thread and the plugin's two helpers
  auto text = complete_answer(*w);
  REQUIRE(text.has_value());
  INFO(*text);
  CHECK(count(*text, "thread ") == 3);  // in the order the threads answered
  CHECK(count(*text, "thread " + std::to_string(w->pid()) + " (task thread)\n") == 1);
  CHECK(text->find("threads_task_spin+0x") != std::string::npos);
  CHECK(count(*text, "threads_helper_park+0x") == 2);
  CHECK(text->find("not answered") == std::string::npos);

  // A second request is answered afresh by every thread, the first answer forgotten.
  REQUIRE(ask_every_thread(*w) == 3);
  auto again = complete_answer(*w);
  REQUIRE(again.has_value());
  CHECK(count(*again, "thread ") == 3);
}

TEST_CASE("a backtrace signal nobody asked for is not answered") {
  auto w = WorkerHarness::spawn(worker_args(plugin_path("echo")));
  REQUIRE(w->expect_ready().has_value());
  REQUIRE(::syscall(SYS_tgkill, w->pid(), w->pid(), ipc::backtrace_signal()) == 0);
  w->send(w->task(1, "echo", "still here"));  // as a plugin raising it itself would
  auto r = w->next_result();
  REQUIRE(r.has_value());
  CHECK(r->data == "still here");
  CHECK(w->header().diagnostics.backtrace_answered.load() == 0);
  CHECK_FALSE(ipc::take_backtrace(w->header().diagnostics, ipc::BacktraceRead::kWhatArrived));
}

namespace {

// Recurses past the writer's frame limit before writing.
__attribute__((noinline)) std::size_t deep(char* out, std::size_t cap, int depth) {
  if (depth == 0) return worker::write_thread_backtrace(out, cap, nullptr);
  const std::size_t n = deep(out, cap, depth - 1);
  asm volatile("" ::: "memory");  // not a tail call
  return n;
}

}  // namespace

TEST_CASE("the backtrace writer stays within its section, one frame per line") {
  auto area = std::make_unique<ipc::DiagnosticArea>();
  REQUIRE(worker::install_backtrace_reporter(area.get(), -1).is_ok());
  std::string section(4096, '\0');
  const std::size_t n = deep(section.data(), section.size(), 200);
  CHECK(n > 0);
  CHECK(n <= section.size());
  section.resize(n);
  CHECK(section.rfind("thread ", 0) == 0);
  CHECK(section.find("\n#0 ") != std::string::npos);
  CHECK(section.find("#63 ") != std::string::npos);  // as many frames as it keeps
  CHECK(section.find("#64 ") == std::string::npos);
  CHECK(worker::write_thread_backtrace(section.data(), 10, nullptr) == 10);
  signal(ipc::backtrace_signal(), SIG_DFL);
}
