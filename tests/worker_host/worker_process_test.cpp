// The real sandpool-worker, driven through its shared region by WorkerHarness: the task
// loop's conversation with the manager.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include <sandpool/plugin.h>

#include "worker_host/worker_harness.hpp"

using namespace sandpool;
using sandpool::ipc::TaskStatus;
using sandpool::testing::plugin_path;
using sandpool::testing::test_plugin_path;
using sandpool::testing::worker_args;
using sandpool::testing::WorkerHarness;
using sandpool::testing::WorkerMessage;

namespace {

// Spawns a worker for `args` and waits for its ReadyMsg.
std::unique_ptr<WorkerHarness> ready_worker(const sandbox::WorkerArgs& args,
                                            const ipc::RegionConfig& region = {}) {
  auto w = WorkerHarness::spawn(args, region);
  auto ready = w->expect_ready();
  INFO(w->output());
  REQUIRE(ready.has_value());
  return w;
}

bool exited_with(const std::optional<int>& status, int code) {
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == code;
}

// Waits, without sleeping, until pred() holds or `bound` passes (polling a shared word that
// has no event of its own).
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds bound = testing::kGenerous) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

TEST_CASE("an echo worker says ready with its pid and task types, then echoes a task") {
  auto w = WorkerHarness::spawn(worker_args(plugin_path("echo")));
  auto ready = w->expect_ready();
  INFO(w->output());
  REQUIRE(ready.has_value());
  CHECK(ready->pid == static_cast<std::uint32_t>(w->pid()));
  CHECK(ready->task_types == std::vector<std::string>{"echo"});
  CHECK(w->header().phase.load() == static_cast<std::uint32_t>(ipc::WorkerPhase::kReady));

  w->send(w->task(1, "echo", "hello, sandbox"));
  auto r = w->next_result();
  REQUIRE(r.has_value());
  CHECK(r->id == 1);
  CHECK(r->status == TaskStatus::kOk);
  CHECK(r->data == "hello, sandbox");
  CHECK(r->error.empty());
  CHECK(w->header().started_task.load() == 0);
}

TEST_CASE("an upper worker upper-cases ASCII and leaves other bytes alone") {
  auto w = ready_worker(worker_args(plugin_path("upper")));
  w->send(w->task(1, "upper", "Hello, wörld 42!"));
  auto r = w->next_result();
  REQUIRE(r.has_value());
  CHECK(r->status == TaskStatus::kOk);
  CHECK(r->data == "HELLO, WöRLD 42!");
}

TEST_CASE("a batch of 1000 tasks comes back complete and in order") {
  auto w = ready_worker(worker_args(plugin_path("echo")));
  const int n = 1000;
  for (int i = 1; i <= n; ++i) w->queue(w->task(i, "echo", "task-" + std::to_string(i)));
  w->publish();
  for (int i = 1; i <= n; ++i) {
    auto r = w->next_result();
    REQUIRE(r.has_value());
    REQUIRE(r->id == static_cast<std::uint64_t>(i));
    REQUIRE(r->status == TaskStatus::kOk);
    REQUIRE(r->data == "task-" + std::to_string(i));
  }
}

TEST_CASE("payloads and results larger than the rings pass whole") {
  ipc::RegionConfig region;
  region.task_ring_bytes = 64 * 1024;
  region.result_ring_bytes = 64 * 1024;
  auto w = ready_worker(worker_args(plugin_path("upper")), region);
  std::string payload(3 << 20, 'a');
  for (std::size_t i = 0; i < payload.size(); i += 4096) payload[i] = 'z';
  w->send(w->task(1, "upper", payload));
  auto r = w->next_result();
  REQUIRE(r.has_value());
  REQUIRE(r->status == TaskStatus::kOk);
  std::string expected = payload;
  std::transform(expected.begin(), expected.end(), expected.begin(),
                 [](char c) { return static_cast<char>(c - 'a' + 'A'); });
  CHECK(r->data == expected);
}

TEST_CASE("progress messages arrive before the result, the latest last") {
  auto w = ready_worker(worker_args(plugin_path("progress")));
  w->send(w->task(3, "progress", "5"));
  std::vector<std::string> steps;
  std::optional<ipc::ResultMsg> result;
  while (auto m = w->next()) {
    if (auto* p = std::get_if<ipc::ProgressMsg>(&*m)) {
      CHECK(p->id == 3);
      steps.push_back(p->data);
    }
    if (auto* r = std::get_if<ipc::ResultMsg>(&*m)) {
      result = *r;
      break;
    }
  }
  REQUIRE(result.has_value());
  CHECK(result->data == "done");
  CHECK(steps == std::vector<std::string>{"1/5", "2/5", "3/5", "4/5", "5/5"});
}

TEST_CASE("cancelling a queued task answers kCancelled without running it") {
  auto w = ready_worker(worker_args(plugin_path("sleep")));
  w->queue(w->task(1, "sleep", "200"));
  w->queue(w->task(2, "sleep", "20000"));
  w->queue(ipc::CancelMsg{2});
  w->publish();
  auto first = w->next_result();
  auto second = w->next_result();
  REQUIRE(first.has_value());
  REQUIRE(second.has_value());
  // Task 2 was dropped when the batch was drained, before task 1 even finished.
  CHECK(first->id == 2);
  CHECK(first->status == TaskStatus::kCancelled);
  CHECK(second->id == 1);
  CHECK(second->status == TaskStatus::kOk);
}

TEST_CASE("started_task names the task inside handle, cancelled() stops it") {
  auto w = ready_worker(worker_args(plugin_path("sleep")));
  w->send(w->task(42, "sleep", "20000"));
  REQUIRE(eventually([&] { return w->header().started_task.load() == 42; }));
  w->header().cancel_task.store(42);
  auto r = w->next_result();
  REQUIRE(r.has_value());
  CHECK(r->id == 42);
  CHECK(r->status == TaskStatus::kFail);
  CHECK(r->error == "cancelled");
  CHECK(w->header().started_task.load() == 0);
}

TEST_CASE("handle's return value and errors map to the result's status") {
  auto w = ready_worker(worker_args(test_plugin_path("abi_probe")));
  struct Case {
    std::string type, payload;
    TaskStatus status;
    std::string error;
  };
  const Case c = GENERATE(Case{"error", "disk full", TaskStatus::kFail, "disk full"},
                          Case{"retry", "try later", TaskStatus::kRetry, "try later"},
                          Case{"limit", "fuel spent", TaskStatus::kLimit, "fuel spent"},
                          Case{"return", "7", TaskStatus::kFail, "handle returned 7"},
                          Case{"return", "-1", TaskStatus::kFail, "handle returned -1"});
  w->send(w->task(1, c.type, c.payload));
  auto r = w->next_result();
  REQUIRE(r.has_value());
  CHECK(r->status == c.status);
  CHECK(r->error == c.error);
  CHECK(r->data.empty());
}

TEST_CASE("the plugin sees the task's id, attempt, type and the host's sp_task size") {
  auto w = ready_worker(worker_args(test_plugin_path("abi_probe")));
  ipc::TaskMsg t = w->task(77, "task", "");
  t.attempt = 3;
  w->send(t);
  auto r = w->next_result();
  REQUIRE(r.has_value());
  CHECK(r->data == "id=77 attempt=3 type=task size=" + std::to_string(sizeof(sp_task)));
}

TEST_CASE("deadline_ms is what is left of the task's timeout, -1 without one") {
  auto w = ready_worker(worker_args(test_plugin_path("abi_probe")));
  w->send(w->task(1, "deadline", ""));
  auto none = w->next_result();
  REQUIRE(none.has_value());
  CHECK(none->data == "-1");

  ipc::TaskMsg t = w->task(2, "deadline", "");
  t.deadline_mono_ms = ipc::monotonic_ms() + 60000;
  w->send(t);
  auto left = w->next_result();
  REQUIRE(left.has_value());
  const long long ms = std::stoll(left->data);
  CHECK(ms > 60000 - testing::kGenerous.count());
  CHECK(ms <= 60000);

  t = w->task(3, "deadline", "");
  t.deadline_mono_ms = 1;  // long past
  w->send(t);
  auto past = w->next_result();
  REQUIRE(past.has_value());
  CHECK(past->data == "0");
}

TEST_CASE("a plugin's log lines reach the manager with the task's id") {
  auto w = ready_worker(worker_args(test_plugin_path("abi_probe")));
  const std::size_t startup_logs = w->logs().size();  // the lock-down steps' debug lines
  w->send(w->task(5, "log", "working on it"));
  w->send(w->task(6, "log-null", "background note"));
  REQUIRE(w->next_result().has_value());
  REQUIRE(w->next_result().has_value());
  REQUIRE(w->logs().size() == startup_logs + 2);
  CHECK(w->logs()[startup_logs].id == 5);
  CHECK(w->logs()[startup_logs].level == 1);
  CHECK(w->logs()[startup_logs].text == "working on it");
  CHECK(w->logs()[startup_logs + 1].id == 0);
  CHECK(w->logs()[startup_logs + 1].text == "background note");
}

TEST_CASE("writing past max_result fails the attempt with kResultTooLarge") {
  sandbox::WorkerArgs args = worker_args(test_plugin_path("big_result"));
  args.max_result = 10000;
  auto w = ready_worker(args);
  w->send(w->task(1, "big", ""));
  auto r = w->next_result();
  REQUIRE(r.has_value());
  CHECK(r->status == TaskStatus::kResultTooLarge);
  CHECK(r->error == "result exceeds max_result (10000 bytes)");
  CHECK(r->data.empty());
}

TEST_CASE("flaky asks for a retry on the first attempt and succeeds on the next") {
  auto w = ready_worker(worker_args(plugin_path("flaky")));
  w->send(w->task(1, "flaky", ""));
  auto first = w->next_result();
  REQUIRE(first.has_value());
  CHECK(first->status == TaskStatus::kRetry);
  CHECK(first->error == "flaky: attempt 1 fails on purpose");
  ipc::TaskMsg again = w->task(1, "flaky", "");
  again.attempt = 2;
  w->send(again);
  auto second = w->next_result();
  REQUIRE(second.has_value());
  CHECK(second->status == TaskStatus::kOk);
  CHECK(second->data == "ok on attempt 2");
}

TEST_CASE("StopMsg finishes the queued tasks, then the worker exits 0") {
  auto w = ready_worker(worker_args(plugin_path("echo")));
  for (int i = 1; i <= 3; ++i) w->queue(w->task(i, "echo", std::to_string(i)));
  w->queue(ipc::StopMsg{});
  w->publish();
  for (int i = 1; i <= 3; ++i) {
    auto r = w->next_result();
    REQUIRE(r.has_value());
    CHECK(r->id == static_cast<std::uint64_t>(i));
  }
  auto status = w->wait_exit();
  INFO(w->output());
  CHECK(exited_with(status, sandbox::kExitOk));
  CHECK(w->header().phase.load() == static_cast<std::uint32_t>(ipc::WorkerPhase::kStopping));
}

TEST_CASE("an idle worker sleeps and still beats its heartbeat") {
  sandbox::WorkerArgs args = worker_args(plugin_path("echo"));
  args.heartbeat_ms = 20;
  auto w = ready_worker(args);
  REQUIRE(eventually([&] { return w->header().task_ring.consumer_sleeping.load() == 1; }));
  std::uint64_t last = w->header().heartbeat_ms.load();
  for (int beats = 0; beats < 3; ++beats) {
    REQUIRE(eventually([&] { return w->header().heartbeat_ms.load() > last; }));
    last = w->header().heartbeat_ms.load();
  }
  // Still answering after sleeping.
  w->send(w->task(1, "echo", "awake"));
  auto r = w->next_result();
  REQUIRE(r.has_value());
  CHECK(r->data == "awake");
}

TEST_CASE("a crashing plugin dies of SIGSEGV with its task marked as started") {
  auto w = ready_worker(worker_args(plugin_path("crash")));
  w->send(w->task(9, "crash", ""));
  auto status = w->wait_exit();
  REQUIRE(status.has_value());
  CHECK(WIFSIGNALED(*status));
  CHECK(WTERMSIG(*status) == SIGSEGV);
  CHECK(w->header().started_task.load() == 9);
}

TEST_CASE("an undecodable task message makes the worker exit with kExitProtocol") {
  auto w = ready_worker(worker_args(plugin_path("echo")));
  w->queue_raw(ipc::MsgKind::kTask, "\x01\x02 not a task");
  w->publish();
  auto status = w->wait_exit();
  INFO(w->output());
  CHECK(exited_with(status, sandbox::kExitProtocol));
  CHECK(w->output().find("decoding TaskMsg") != std::string::npos);
}
