// The host API (sp_host_api) in-process, through the table a plugin receives.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "host_api.hpp"
#include "worker_host/local_channel.hpp"

using sandpool::ipc::LogMsg;
using sandpool::ipc::ProgressMsg;
using sandpool::testing::LocalChannel;
using sandpool::testing::WorkerMessage;
using sandpool::worker::HostApi;
using sandpool::worker::HostLimits;
using sandpool::worker::kMaxError;
using sandpool::worker::kMaxLogLine;

namespace {

HostLimits limits_with_max_result(std::uint64_t max_result) {
  HostLimits l;
  l.max_result = max_result;
  return l;
}

void log_text(const sp_host_api* api, sp_call* call, int level, const std::string& text) {
  api->log(call, level, text.data(), text.size());
}

}  // namespace

TEST_CASE("the host table carries ABI version 1, its size and every member") {
  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  const sp_host_api* api = host.table();
  CHECK(api->abi_version == SP_PLUGIN_ABI_VERSION);
  CHECK(api->size == sizeof(sp_host_api));
  CHECK(api->write_result != nullptr);
  CHECK(api->progress != nullptr);
  CHECK(api->heartbeat != nullptr);
  CHECK(api->set_error != nullptr);
  CHECK(api->cancelled != nullptr);
  CHECK(api->log != nullptr);
}

TEST_CASE("write_result appends until max_result, then refuses and marks the result too large") {
  LocalChannel channel;
  HostApi host(channel.worker(), limits_with_max_result(10));
  const sp_host_api* api = host.table();
  sp_call* call = host.begin_task(1);
  CHECK(api->write_result(call, "hello", 5) == 0);
  CHECK(api->write_result(call, "world", 5) == 0);  // exactly max_result
  auto ok = host.end_task();
  CHECK(ok.result == "helloworld");
  CHECK_FALSE(ok.result_too_large);

  call = host.begin_task(2);
  CHECK(api->write_result(call, "hello", 5) == 0);
  CHECK(api->write_result(call, "world!", 6) == -1);
  CHECK(api->write_result(call, "x", 1) == -1);  // stays refused
  auto too_large = host.end_task();
  CHECK(too_large.result_too_large);
  CHECK(too_large.result.empty());

  call = host.begin_task(3);  // a new task starts clean
  CHECK(api->write_result(call, "abc", 3) == 0);
  CHECK_FALSE(host.end_task().result_too_large);
}

TEST_CASE("calls on a call context whose task has ended are ignored") {
  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  const sp_host_api* api = host.table();
  sp_call* call = host.begin_task(1);
  (void)host.end_task();
  channel.header().cancel_task.store(1);
  CHECK(api->write_result(call, "late", 4) == -1);
  api->progress(call, "late", 4);
  log_text(api, call, 1, "late log");  // still logged, but no longer attributed to task 1
  CHECK(api->cancelled(call) == 0);
  auto messages = channel.drain();
  REQUIRE(messages.size() == 1);
  CHECK(std::get<LogMsg>(messages[0]).id == 0);
}

TEST_CASE("a stale sp_call kept from an earlier task cannot touch the running one") {
  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  const sp_host_api* api = host.table();
  sp_call* stale = host.begin_task(1);
  (void)host.end_task();
  sp_call* current = host.begin_task(2);
  REQUIRE(current != stale);
  CHECK(api->write_result(stale, "stale", 5) == -1);
  api->set_error(stale, "stale", 5);
  CHECK(api->write_result(current, "fresh", 5) == 0);
  auto outcome = host.end_task();
  CHECK(outcome.result == "fresh");
  CHECK(outcome.error.empty());
}

TEST_CASE("set_error keeps the last reason, capped") {
  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  const sp_host_api* api = host.table();
  sp_call* call = host.begin_task(1);
  api->set_error(call, "first", 5);
  api->set_error(call, "second", 6);
  CHECK(host.end_task().error == "second");
  call = host.begin_task(2);
  const std::string huge(kMaxError * 3, 'e');
  api->set_error(call, huge.data(), huge.size());
  CHECK(host.end_task().error.size() == kMaxError);
}

TEST_CASE("cancelled() is non-zero iff the header's cancel_task is this task's id") {
  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  const sp_host_api* api = host.table();
  sp_call* call = host.begin_task(42);
  CHECK(api->cancelled(call) == 0);
  channel.header().cancel_task.store(41);
  CHECK(api->cancelled(call) == 0);
  channel.header().cancel_task.store(42);
  CHECK(api->cancelled(call) != 0);
  (void)host.end_task();
  CHECK(api->cancelled(call) == 0);
}

TEST_CASE("progress and heartbeat beat the shared heartbeat word") {
  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  const sp_host_api* api = host.table();
  sp_call* call = host.begin_task(1);
  channel.header().heartbeat_ms.store(0);
  api->heartbeat(call);
  CHECK(channel.header().heartbeat_ms.load() > 0);
  channel.header().heartbeat_ms.store(0);
  api->progress(call, "1/2", 3);
  CHECK(channel.header().heartbeat_ms.load() > 0);
  (void)host.end_task();
  auto messages = channel.drain();
  REQUIRE(messages.size() == 1);
  CHECK(std::get<ProgressMsg>(messages[0]).id == 1);
  CHECK(std::get<ProgressMsg>(messages[0]).data == "1/2");
}

TEST_CASE("progress behind a full result ring is coalesced: the latest goes out before the end") {
  sandpool::ipc::RegionConfig small;
  small.task_ring_bytes = 4096;
  small.result_ring_bytes = 4096;
  LocalChannel channel(small);
  HostApi host(channel.worker(), HostLimits{});
  const sp_host_api* api = host.table();
  sp_call* call = host.begin_task(7);
  // Nobody consumes: the ring fills after a few dozen updates; the rest are coalesced.
  const int updates = 2000;
  for (int i = 1; i <= updates; ++i) {
    const std::string step =
        std::to_string(i) + "/" + std::to_string(updates) + std::string(40, '.');
    api->progress(call, step.data(), step.size());
  }
  CHECK(host.coalesced_progress() > 0);
  (void)host.end_task();
  CHECK(channel.worker().queued_bytes() > 0);  // the latest waits behind the full ring

  std::vector<std::string> seen;
  while (true) {
    auto batch = channel.drain();
    CHECK(channel.worker().flush(1'000'000).is_ok());
    if (batch.empty()) break;
    for (const WorkerMessage& m : batch) seen.push_back(std::get<ProgressMsg>(m).data);
  }
  REQUIRE(seen.size() < static_cast<std::size_t>(updates));
  CHECK(seen.back().rfind(std::to_string(updates) + "/", 0) == 0);  // latest wins
}

TEST_CASE("log lines carry the task id and level, and are capped at 4 KiB") {
  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  const sp_host_api* api = host.table();
  log_text(api, nullptr, 1, "before any task");
  sp_call* call = host.begin_task(9);
  log_text(api, call, 2, "during task 9");
  log_text(api, call, 17, "level out of range");
  log_text(api, call, 0, std::string(3 * kMaxLogLine, 'x'));
  (void)host.end_task();
  auto logs = channel.drain_logs();
  REQUIRE(logs.size() == 4);
  CHECK(logs[0].id == 0);
  CHECK(logs[0].text == "before any task");
  CHECK(logs[1].id == 9);
  CHECK(logs[1].level == 2);
  CHECK(logs[2].level == 3);
  CHECK(logs[3].text.size() == kMaxLogLine);
  CHECK(logs[3].text.ends_with("[truncated]"));
}

TEST_CASE("log lines past the rate limit are dropped and reported in one later line") {
  LocalChannel channel;
  HostLimits limits;
  limits.log_lines_per_second = 0.001;  // no refill within the test
  limits.log_burst = 5;
  HostApi host(channel.worker(), limits);
  const sp_host_api* api = host.table();
  sp_call* call = host.begin_task(3);
  for (int i = 0; i < 12; ++i) log_text(api, call, 1, "line " + std::to_string(i));
  CHECK(host.dropped_log_lines() == 7);
  (void)host.end_task();
  auto logs = channel.drain_logs();
  REQUIRE(logs.size() == 6);
  CHECK(logs[4].text == "line 4");
  CHECK(logs[5].level == 2);
  CHECK(logs[5].text.find("dropped 7 line(s)") != std::string::npos);
  CHECK(host.dropped_log_lines() == 0);
}

TEST_CASE("the host API may be called from several plugin threads during one call") {
  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  const sp_host_api* api = host.table();
  sp_call* call = host.begin_task(1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([api, call] {
      for (int i = 0; i < 1000; ++i) {
        api->write_result(call, "ab", 2);
        api->heartbeat(call);
        api->set_error(call, "e", 1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  auto outcome = host.end_task();
  CHECK(outcome.result.size() == 4 * 1000 * 2);
  CHECK(outcome.result.find("aab") == std::string::npos);  // appends never interleave
}
