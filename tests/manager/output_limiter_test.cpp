// The manager's bound on one worker's log lines (supervision/output_limiter.hpp), with
// explicit times: no clock, no process.
#include <catch2/catch.hpp>

#include <string>

#include "supervision/output_limiter.hpp"

using sandpool::supervision::capped_log_line;
using sandpool::supervision::kMaxWorkerLogLine;
using sandpool::supervision::OutputLimiter;

namespace {
constexpr std::int64_t kSecond = 1000000000;
}

TEST_CASE("a worker's lines pass up to the burst, then at the rate, and the rest are counted") {
  OutputLimiter limit(10, 20);  // 10 lines/s, bursts of 20
  const std::int64_t t0 = 5 * kSecond;
  int admitted = 0;
  for (int i = 0; i < 100; ++i) admitted += limit.admit(t0) ? 1 : 0;
  CHECK(admitted == 20);
  CHECK(limit.dropped_total() == 80);
  // One second later, ten more.
  admitted = 0;
  for (int i = 0; i < 100; ++i) admitted += limit.admit(t0 + kSecond) ? 1 : 0;
  CHECK(admitted == 10);
  CHECK(limit.dropped_total() == 170);
}

TEST_CASE("dropped lines are reported once, then the count starts again") {
  OutputLimiter limit(1, 1);
  CHECK(limit.admit(kSecond));
  CHECK_FALSE(limit.admit(kSecond));
  CHECK_FALSE(limit.admit(kSecond));
  const std::uint64_t dropped = limit.take_unreported();
  CHECK(dropped == 2);
  CHECK(limit.report_text(dropped) == "2 output line(s) dropped over the limit of 1 lines/s");
  CHECK(limit.take_unreported() == 0);
  CHECK(limit.dropped_total() == 2);  // the total keeps counting for the metric
}

TEST_CASE("a long quiet period refills the bucket only up to the burst") {
  OutputLimiter limit(100, 5);
  for (int i = 0; i < 5; ++i) REQUIRE(limit.admit(kSecond));
  int admitted = 0;
  for (int i = 0; i < 50; ++i) admitted += limit.admit(1000 * kSecond) ? 1 : 0;
  CHECK(admitted == 5);
}

TEST_CASE("a worker's log line is cut at the limit and marked") {
  CHECK(capped_log_line("short") == "short");
  const std::string exact(kMaxWorkerLogLine, 'x');
  CHECK(capped_log_line(exact) == exact);
  const std::string cut = capped_log_line(std::string(10 * kMaxWorkerLogLine, 'y'));
  CHECK(cut.size() == kMaxWorkerLogLine);
  CHECK(cut.rfind(" [truncated]") == kMaxWorkerLogLine - 12);
}
