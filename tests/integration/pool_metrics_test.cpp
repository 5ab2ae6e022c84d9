// Metrics from real pools, scraped over HTTP as Prometheus would: Pool::metrics() through the
// loop thread, render_prometheus, MetricsServer and httplib's client.
#include <catch2/catch.hpp>

#include <httplib.h>
#include <sandpool/metrics/metrics.hpp>

#include "test_support.hpp"

using namespace sandpool;
using sandpool::testing::kPatience;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;

TEST_CASE("real pools' counters and histograms reach a Prometheus scrape") {
  auto echo = make_pool(pool_options("echo"));
  auto fail = make_pool(pool_options("fail", 1));
  constexpr int kTasks = 50;
  for (int i = 0; i < kTasks; ++i) {
    REQUIRE(run(*echo, "echo", "x").state == TaskState::kCompleted);
  }
  REQUIRE(run(*fail, "fail", "").state == TaskState::kDeadLettered);

  const PoolMetrics m = echo->metrics();
  CHECK(m.pool == "test-echo");
  CHECK(m.stats.completed == kTasks);
  CHECK(m.attempts[static_cast<std::size_t>(Outcome::kOk)] == kTasks);
  CHECK(m.queue_wait.count() == kTasks);
  CHECK(m.run_time.count() == kTasks);
  CHECK(m.end_to_end.count() == kTasks);
  CHECK(m.end_to_end.sum_ns() >= m.run_time.sum_ns());
  CHECK(m.workers.idle == 2);
  CHECK(m.worker_rss_bytes > 0);  // read from /proc for live workers
  const PoolMetrics f = fail->metrics();
  CHECK(f.dead_lettered[static_cast<std::size_t>(DeadReason::kPermanent)] == 1);
  CHECK(f.attempts[static_cast<std::size_t>(Outcome::kFailed)] == 1);

  auto server = MetricsServer::start(
      "127.0.0.1:0",
      [&] {
        return render_prometheus({echo->metrics(), fail->metrics()}, {"test", 0});
      },
      [] { return std::optional<std::string>(); });
  REQUIRE(server.is_ok());
  httplib::Client client("127.0.0.1", (*server)->port());
  client.set_read_timeout(kPatience.count());
  auto res = client.Get("/metrics");
  REQUIRE(res);
  CHECK(res->status == 200);
  const std::string& text = res->body;
  CHECK(text.find("sandpool_tasks_completed_total{pool=\"test-echo\"} 50\n") != std::string::npos);
  CHECK(text.find("sandpool_end_to_end_seconds_count{pool=\"test-echo\"} 50\n") !=
        std::string::npos);
  CHECK(text.find(
            "sandpool_tasks_dead_lettered_total{pool=\"test-fail\",reason=\"permanent\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("sandpool_workers{pool=\"test-fail\",state=\"idle\"} 1\n") != std::string::npos);
}
