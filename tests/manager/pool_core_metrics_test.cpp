// PoolCore's metrics, driven by hand like pool_core_test.cpp: the tests play the workers
// through a FakeWorkerControl and move the clock, then read PoolCore::metrics().
#include <catch2/catch.hpp>

#include <csignal>
#include <memory>

#include <sandpool/pool/pool_metrics.hpp>

#include "core/pool_core.hpp"
#include "pool_core_harness.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::core::PoolCore;
using sandpool::core::TaskPtr;
using sandpool::core::TaskRecord;
using sandpool::testing::FakeWorkerControl;

namespace {

using sandpool::testing::kMs;

// Index of the bucket whose upper bound is `ns` (which must be one of the bounds).
std::size_t bucket_of_bound(std::int64_t ns) {
  for (std::size_t i = 0; i < Histogram::kBoundsNs.size(); ++i) {
    if (Histogram::kBoundsNs[i] == ns) return i;
  }
  FAIL("not a bucket bound: " << ns);
  return 0;
}

// The shared harness, with a pool name and a result() that requires acceptance.
struct MetricsHarness : sandpool::testing::Harness {
  explicit MetricsHarness(PoolOptions o = defaults()) : sandpool::testing::Harness(std::move(o)) {}
  static PoolOptions defaults() {
    PoolOptions o = sandpool::testing::Harness::defaults();
    o.name = "images";
    return o;
  }
  void result(std::uint64_t id, ipc::TaskStatus st) {
    REQUIRE(sandpool::testing::Harness::result(holder(id), id, st));
  }
};

std::uint64_t attempts(const PoolMetrics& m, Outcome o) {
  return m.attempts[static_cast<std::size_t>(o)];
}
std::uint64_t dead(const PoolMetrics& m, DeadReason r) {
  return m.dead_lettered[static_cast<std::size_t>(r)];
}

}  // namespace

TEST_CASE("a histogram counts a value at a bound in that bound's bucket, above all in the last") {
  Histogram h;
  h.record(0);
  h.record(10'000);          // exactly the first bound: le is inclusive
  h.record(10'001);          // just above it
  h.record(-5);              // a clock step back counts as 0
  h.record(61'000'000'000);  // above 60 s
  CHECK(h.count() == 5);
  CHECK(h.sum_ns() == 0 + 10'000 + 10'001 + 0 + 61'000'000'000);
  CHECK(h.bucket(0) == 3);
  CHECK(h.bucket(1) == 1);
  CHECK(h.bucket(Histogram::kBuckets - 1) == 1);
  CHECK(h.cumulative(0) == 3);
  CHECK(h.cumulative(Histogram::kBoundsNs.size() - 1) == 4);
  CHECK(h.cumulative(Histogram::kBuckets - 1) == 5);
}

TEST_CASE("a completed task records one ok attempt, its queue wait, run time and end-to-end") {
  MetricsHarness h;
  auto t = h.submit();  // no worker ready yet: it waits
  h.advance(5ms);
  h.ready_all();
  REQUIRE(t->state == TaskState::kDispatched);
  h.advance(25ms);
  h.result(t->id, ipc::TaskStatus::kOk);

  const PoolMetrics m = h.core->metrics();
  CHECK(m.pool == "images");
  CHECK(m.stats.completed == 1);
  CHECK(attempts(m, Outcome::kOk) == 1);
  CHECK(m.queue_wait.count() == 1);
  CHECK(m.queue_wait.sum_ns() == 5 * kMs);
  CHECK(m.queue_wait.bucket(bucket_of_bound(5 * kMs)) == 1);
  CHECK(m.run_time.count() == 1);
  CHECK(m.run_time.bucket(bucket_of_bound(25 * kMs)) == 1);
  CHECK(m.end_to_end.count() == 1);
  CHECK(m.end_to_end.sum_ns() == 30 * kMs);
  CHECK(m.end_to_end.bucket(bucket_of_bound(50 * kMs)) == 1);  // 30 ms: above 25, up to 50
}

TEST_CASE("a retried task records every attempt by outcome but its queue wait once") {
  MetricsHarness h;
  h.ready_all();
  auto t = h.submit();
  h.advance(10ms);
  h.result(t->id, ipc::TaskStatus::kRetry);
  h.advance(0ms);  // the retry is due at once: dispatched again
  REQUIRE(t->state == TaskState::kDispatched);
  h.advance(100ms);
  h.result(t->id, ipc::TaskStatus::kOk);

  const PoolMetrics m = h.core->metrics();
  CHECK(m.stats.retried == 1);
  CHECK(attempts(m, Outcome::kError) == 1);
  CHECK(attempts(m, Outcome::kOk) == 1);
  CHECK(m.queue_wait.count() == 1);
  CHECK(m.queue_wait.bucket(0) == 1);  // dispatched the moment it was submitted
  CHECK(m.run_time.count() == 2);
  CHECK(m.run_time.bucket(bucket_of_bound(10 * kMs)) == 1);
  CHECK(m.run_time.bucket(bucket_of_bound(100 * kMs)) == 1);
  CHECK(m.run_time.sum_ns() == 110 * kMs);
  CHECK(m.end_to_end.count() == 1);
  CHECK(m.end_to_end.sum_ns() == 110 * kMs);
}

TEST_CASE("dead-lettered tasks are counted by reason, crashes as lost attempts") {
  MetricsHarness h;
  h.ready_all();
  auto permanent = h.submit();
  h.result(permanent->id, ipc::TaskStatus::kFail);

  SubmitOptions once;
  once.retries = 0;
  auto exhausted = h.submit(once);
  const auto w = h.holder(exhausted->id);
  h.ctl.workers[w].started = exhausted->id;
  h.ctl.workers[w].gone = true;
  h.core->on_exit(w, {ExitStatus{false, 0, SIGSEGV}, 0, h.ctl.pid(w)}, h.now);
  REQUIRE(exhausted->state == TaskState::kDeadLettered);

  const PoolMetrics m = h.core->metrics();
  CHECK(m.stats.dead_lettered == 2);
  CHECK(dead(m, DeadReason::kPermanent) == 1);
  CHECK(dead(m, DeadReason::kRetriesExhausted) == 1);
  CHECK(dead(m, DeadReason::kNone) == 0);
  CHECK(attempts(m, Outcome::kFailed) == 1);
  CHECK(attempts(m, Outcome::kLost) == 1);
  CHECK(m.stats.restarts == 1);
  CHECK(m.end_to_end.count() == 2);
}

TEST_CASE("a task that expires in the queue ends without an attempt or a queue wait") {
  PoolOptions o = MetricsHarness::defaults();
  o.queue_ttl = 500ms;
  MetricsHarness h(o);  // no worker ready: it waits until it expires
  auto t = h.submit();
  for (int i = 0; i < 60; ++i) h.advance(10ms);
  REQUIRE(t->state == TaskState::kDeadLettered);

  const PoolMetrics m = h.core->metrics();
  CHECK(dead(m, DeadReason::kExpired) == 1);
  CHECK(m.run_time.count() == 0);
  CHECK(m.queue_wait.count() == 0);
  CHECK(m.end_to_end.count() == 1);
  CHECK(m.end_to_end.sum_ns() >= 500 * kMs);
}

TEST_CASE("workers are counted by state and their RSS summed") {
  PoolOptions o = MetricsHarness::defaults();
  o.concurrency = 1;
  MetricsHarness h(o);
  CHECK(h.core->metrics().workers.starting == 2);
  h.ready_all();
  h.ctl.workers[1].rss = 30 << 20;
  h.ctl.workers[2].rss = 12 << 20;
  h.submit();

  PoolMetrics m = h.core->metrics();
  CHECK(m.workers.starting == 0);
  CHECK(m.workers.busy == 1);
  CHECK(m.workers.idle == 1);
  CHECK(m.worker_rss_bytes == (42u << 20));
  CHECK_FALSE(m.failed);

  h.core->scale(1, h.now);  // the idle one drains and is told to stop
  m = h.core->metrics();
  CHECK(m.workers.busy == 1);
  CHECK(m.workers.stopping == 1);
}

TEST_CASE("a pool whose plugin cannot init reports failed") {
  PoolOptions o = MetricsHarness::defaults();
  o.workers = 1;
  o.max_init_failures = 2;
  MetricsHarness h(o);
  for (int i = 0; i < 2; ++i) {
    const auto w = h.ctl.spawned.back();
    h.ctl.workers[w].gone = true;
    h.core->on_exit(w, {ExitStatus{true, 67, 0}, 0, h.ctl.pid(w)}, h.now);
    h.advance(6000ms);  // past the respawn backoff
  }
  const PoolMetrics m = h.core->metrics();
  CHECK(m.failed);
  CHECK(m.stats.state == "failed");
}

TEST_CASE("a task cancelled while queued records its end-to-end time but no attempt") {
  MetricsHarness h;  // no worker ready: it waits
  auto t = h.submit();
  h.advance(100ms);
  REQUIRE(h.core->cancel(t, h.now));

  const PoolMetrics m = h.core->metrics();
  CHECK(m.stats.cancelled == 1);
  for (std::size_t o = 0; o < kOutcomeCount; ++o) CHECK(m.attempts[o] == 0);
  CHECK(m.queue_wait.count() == 0);
  CHECK(m.end_to_end.count() == 1);
  CHECK(m.end_to_end.sum_ns() == 100 * kMs);
}
