// The worker-writable memory audit (docs/security.md, "Worker-writable memory audit"), one
// test case per row: each writes the worst value a lying worker could leave into a region
// (a real SharedRegion in this process, or the FakeWorkerControl's words) and checks what
// the manager makes of it. The rule they share: no worker-writable value alone ends a
// task's retries, and none can charge a task the worker had not started.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include <sandpool/ipc/channel.hpp>
#include <sandpool/ipc/region.hpp>
#include <sandpool/sandbox/worker_args.hpp>

#include "core/pool_core.hpp"
#include "pool_core_harness.hpp"
#include "supervision/exit_classifier.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::account;
using sandpool::testing::Harness;
using sandpool::testing::kMs;

namespace {

ipc::SharedRegion fake_region() {
  auto r = ipc::SharedRegion::create(ipc::RegionConfig{});
  REQUIRE(r);
  return std::move(r).value();
}

// One worker, one task in its ring, so each death is seen through that task.
struct OneTask {
  OneTask() : h(options()) {
    h.ready_all();
    task = h.submit();
    worker = h.holder(task->id);
    REQUIRE(worker != 0);
  }
  static PoolOptions options() {
    PoolOptions o = Harness::defaults();
    o.workers = 1;
    o.max_restarts = 1000;
    return o;
  }
  // The worker dies with `status`; the manager reads the rest from `region` as reap() does.
  void dies(const ExitStatus& status, const ipc::SharedRegion& region) {
    h.ctl.workers[worker].gone = true;
    h.core->on_exit(
        worker, supervision::read_exit_report(*region.header(), status, h.ctl.pid(worker)), h.now);
  }
  // True iff the task's last attempt ended and it waits for another (not dead-lettered).
  bool retried() const { return task->state.load() == TaskState::kRetryWait; }

  Harness h;
  core::TaskPtr task;
  core::WorkerId worker = 0;
};

const ExitStatus kStatuses[] = {
    {false, 0, SIGSEGV},
    {false, 0, SIGKILL},
    {false, 0, SIGABRT},
    {true, 0, 0},
    {true, 3, 0},
    {true, sandbox::kExitProtocol, 0},
    {true, sandbox::kExitRegionCorrupt, 0},
    {true, sandbox::kExitMemory, 0},
};

}  // namespace

TEST_CASE("audit: violation_syscall alone never dead-letters a task permanently") {
  const ExitStatus status = GENERATE(from_range(std::begin(kStatuses), std::end(kStatuses)));
  const std::uint32_t word = GENERATE(1u, 41u + 1, 4096u, 0xffffffffu);
  INFO(describe(status) << ", violation word " << word);
  ipc::SharedRegion region = fake_region();
  region.header()->violation_syscall.store(word);
  OneTask w;
  w.dies(status, region);
  const TaskResult a = account(w.task);
  REQUIRE(a.history.size() == 1);
  CHECK(a.history[0].outcome != Outcome::kSandboxViolation);
  CHECK(w.retried());
}

TEST_CASE("audit: violation_syscall only names the violation the exit status shows") {
  ipc::SharedRegion region = fake_region();
  region.header()->violation_syscall.store(0xffffffffu);
  OneTask w;
  w.dies(ExitStatus{true, sandbox::kExitViolation, 0}, region);
  const TaskResult a = account(w.task);
  REQUIRE(a.history.size() == 1);
  CHECK(a.history[0].outcome == Outcome::kSandboxViolation);  // the status's say-so
  CHECK(a.history[0].error.rfind("sandbox_violation: unknown", 0) == 0);
}

TEST_CASE("audit: fatal_report can at most turn a crash into a retried resource_limit") {
  const ExitStatus status = GENERATE(from_range(std::begin(kStatuses), std::end(kStatuses)));
  const std::uint32_t report = GENERATE(1u, 2u, 0xffffffffu);
  INFO(describe(status) << ", fatal report " << report);
  ipc::SharedRegion region = fake_region();
  region.header()->diagnostics.fatal_report.store(report);
  OneTask w;
  w.dies(status, region);
  const TaskResult a = account(w.task);
  REQUIRE(a.history.size() == 1);
  const Outcome o = a.history[0].outcome;
  CHECK((o == Outcome::kLost || o == Outcome::kResourceLimit || o == Outcome::kProtocolError));
  CHECK(w.retried());
}

TEST_CASE("audit: started_task never moves a death's charge off the front of the ring") {
  Harness h(OneTask::options());  // one worker: both tasks in its ring
  h.ready_all();
  auto a = h.submit();
  auto b = h.submit();
  const auto w = h.holder(a->id);
  REQUIRE(h.holder(b->id) == w);
  const std::uint64_t started =
      GENERATE_COPY(std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max(), b->id);
  INFO("started_task " << started);
  h.ctl.workers[w].started = started;
  h.exit(w, ExitStatus{true, sandbox::kExitRegionCorrupt, 0});
  CHECK(account(a).history.size() == 1);
  CHECK(account(a).history[0].outcome == Outcome::kProtocolError);
  CHECK(account(b).history.empty());  // requeued without an attempt
}

TEST_CASE("audit: a started_task that hides a silent worker still meets the task's timeout") {
  OneTask w;
  w.h.ctl.workers[w.worker].started = std::numeric_limits<std::uint64_t>::max();
  w.h.ctl.workers[w.worker].silent = true;  // beats no more: only the timeout can end it
  w.h.run_for(w.h.opts.timeout + 100ms);
  REQUIRE(w.h.ctl.workers[w.worker].killed);
  w.h.exit(w.worker, ExitStatus{false, 0, SIGKILL});
  const TaskResult a = account(w.task);
  REQUIRE(a.history.size() == 1);
  CHECK(a.history[0].outcome == Outcome::kTimedOut);
  CHECK(w.retried());
}

TEST_CASE("audit: heartbeat_ms from the future keeps no task past its timeout") {
  OneTask w;
  auto& fw = w.h.ctl.workers[w.worker];
  fw.silent = true;
  fw.heartbeat_ms = std::numeric_limits<std::int64_t>::max();
  w.h.run_for(w.h.opts.timeout + 100ms);
  REQUIRE(fw.killed);
  w.h.exit(w.worker, ExitStatus{false, 0, SIGKILL});
  CHECK(account(w.task).history.at(0).outcome == Outcome::kTimedOut);
  CHECK(w.retried());
}

TEST_CASE("audit: heartbeat_ms of zero gets an idle worker replaced, charging no task") {
  Harness h;
  h.ready_all();
  const auto w = h.ctl.spawned.front();
  h.ctl.workers[w].silent = true;
  h.ctl.workers[w].heartbeat_ms = 0;
  h.advance(h.opts.heartbeat_interval);
  REQUIRE(h.ctl.workers[w].killed);
  h.exit(w, ExitStatus{false, 0, SIGKILL});
  CHECK(h.core->dead_letters().empty());
}

TEST_CASE("audit: the result ring's head and record headers can only break their own ring") {
  ipc::SharedRegion region = fake_region();
  ipc::RingProducer worker = region.result_producer();
  REQUIRE(worker.try_push(1, 0, "hello") == ipc::RingStatus::kOk);
  worker.publish();
  ipc::RingControl& ctl = region.header()->result_ring;
  const std::uint64_t cap = region.result_ring_bytes();
  struct Worst {
    const char* what;
    std::uint64_t head;
    std::uint32_t record_length;
  };
  const Worst worst = GENERATE_COPY(values<Worst>({
      {"a head past the ring", cap + 64, 5},
      {"the largest head", std::numeric_limits<std::uint64_t>::max() & ~7ull, 5},
      {"an unaligned head", 12, 5},
      {"a record longer than what was published", 16, 0xffffffffu},
  }));
  INFO(worst.what);
  ctl.head.store(worst.head);
  auto* data = reinterpret_cast<std::byte*>(region.header()) + region.header()->result_ring_offset;
  std::memcpy(data, &worst.record_length, sizeof worst.record_length);
  ipc::MessageReceiver manager(region.result_consumer(), region.max_message());
  std::uint16_t kind = 0;
  std::string msg;
  CHECK(manager.next(&kind, &msg) == ipc::RingStatus::kCorrupt);
  CHECK(msg.size() < 64);  // nothing allocated from the claim
}

TEST_CASE("audit: the task ring's tail can only make the manager call it a protocol error") {
  ipc::SharedRegion region = fake_region();
  ipc::RingProducer manager = region.task_producer();
  const std::string frame(region.task_ring_bytes() / 8, 'x');
  // Fill the ring so the next push must look at the worker's tail.
  while (manager.try_push(1, 0, frame) == ipc::RingStatus::kOk) {
  }
  manager.publish();
  const std::uint64_t tail =
      GENERATE(std::uint64_t{4}, std::numeric_limits<std::uint64_t>::max(), std::uint64_t{1} << 40);
  INFO("tail " << tail);
  region.header()->task_ring.tail.store(tail);
  CHECK(manager.try_push(1, 0, frame) == ipc::RingStatus::kCorrupt);
}

TEST_CASE("audit: a result or progress report for a task not in the worker's ring is refused") {
  Harness h;
  h.ready_all();
  auto a = h.submit();
  auto elsewhere = h.submit();  // in the other worker's ring
  const auto w = h.holder(a->id);
  REQUIRE(h.holder(elsewhere->id) != w);
  const std::uint64_t id = GENERATE_COPY(std::uint64_t{0}, std::uint64_t{999}, elsewhere->id);
  INFO("result for task " << id);
  CHECK_FALSE(h.result(w, id, ipc::TaskStatus::kFail));
  CHECK_FALSE(h.core->on_progress(w, ipc::ProgressMsg{id, "half"}));
  CHECK(account(elsewhere).history.empty());
  // A cancellation nobody asked for is refused too.
  CHECK_FALSE(h.result(w, a->id, ipc::TaskStatus::kCancelled));
  CHECK(account(a).history.empty());
}
