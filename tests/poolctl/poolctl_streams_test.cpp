// poolctl's commands that stream or run for a while: submit (with --wait), batch, events
// (with --follow) and top, against a scripted service.
#include <catch2/catch.hpp>

#include <boost/process/pipe.hpp>
#include <fstream>
#include <sstream>

#include "poolctl_runner.hpp"
#include "scripted_service.hpp"

using namespace sandpool::testing;
using nlohmann::json;

namespace {

bool text_contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("submit prints the task id and sends the options and the payload raw") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(),
                   {"submit", "echo", "hello", "--pool", "default", "--priority", "5", "--timeout",
                    "1.5s", "--retries", "2", "--key", "user-1", "--idempotency-key", "k-1"});
  REQUIRE(r.exit_code == 0);
  CHECK(std::stoull(r.out) > 100);
  const auto sent = service.requests("submit").back();
  CHECK(sent.blob == "hello");
  CHECK(sent.args["pool"] == "default");
  CHECK(sent.args["priority"] == 5);
  CHECK(sent.args["timeout_ms"] == 1500);
  CHECK(sent.args["retries"] == 2);
  CHECK(sent.args["key"] == "user-1");
  CHECK(sent.args["idempotency_key"] == "k-1");
  CHECK_FALSE(sent.args.contains("wait"));

  const std::string binary("a\0b\xff", 4);
  REQUIRE(poolctl(service.socket(), {"submit", "echo", "-"}, binary).exit_code == 0);
  CHECK(service.requests("submit").back().blob == binary);
  std::ofstream(dir.path() + "/payload.bin", std::ios::binary) << "from a file";
  REQUIRE(poolctl(service.socket(), {"submit", "echo", "--file", dir.path() + "/payload.bin"})
              .exit_code == 0);
  CHECK(service.requests("submit").back().blob == "from a file");
}

TEST_CASE("submit --wait prints progress lines, then the result") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"submit", "echo", "abc", "--wait"});
  REQUIRE(r.exit_code == 0);
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 3);
  CHECK(text_contains(lines[0], "50%"));
  CHECK(text_contains(lines[1], "100%"));
  CHECK(lines[2] == "ABC");

  auto j = poolctl(service.socket(), {"--json", "submit", "echo", "abc", "--wait"});
  REQUIRE(j.exit_code == 0);
  const auto objects = lines_of(j.out);
  REQUIRE(objects.size() == 3);
  CHECK(json::parse(objects[0])["event"] == "progress");
  CHECK(json::parse(objects[2])["state"] == "completed");
  CHECK(json::parse(objects[2])["result"] == "ABC");
}

TEST_CASE("submit --wait exits 1 when the task does not complete") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"submit", "fail", "x", "--wait"});
  CHECK(r.exit_code == 1);
  CHECK(text_contains(r.out, "dead_lettered (retries_exhausted): boom"));
}

TEST_CASE("batch submits N tasks in pipelined batches and prints throughput and latencies") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"batch", "noop", "10000", "--payload-size", "16"});
  REQUIRE(r.exit_code == 0);
  CHECK(service.batch_tasks() == 10000);
  CHECK(text_contains(r.out, "10000 of 10000 tasks accepted"));
  CHECK(text_contains(r.out, "tasks/s"));
  CHECK(text_contains(r.out, "p99"));
  CHECK_FALSE(text_contains(r.out, "\r"));  // no progress bar when stdout is not a terminal

  auto j = poolctl(service.socket(), {"--json", "batch", "noop", "2500", "--batch", "1000"});
  REQUIRE(j.exit_code == 0);
  const json summary = json::parse(j.out);
  CHECK(summary["accepted"] == 2500);
  CHECK(summary["requests"] == 3);
  CHECK(summary["latency_ms"]["max"].get<double>() >= summary["latency_ms"]["p50"].get<double>());
}

TEST_CASE("batch sends the tasks refused with queue_full again until all are in") {
  // "full": each refused task listed in `errors`; "tail": the refused tail as one
  // `refused_from`, as poold replies. Either way half of each request gets in.
  const std::string type = GENERATE("full", "tail");
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"--json", "batch", type, "1000", "--batch", "100"});
  REQUIRE(r.exit_code == 0);
  const json summary = json::parse(r.out);
  CHECK(summary["accepted"] == 1000);
  CHECK(summary["refused"] == 0);
  // 500 refused on the first round, 250 on the next...
  CHECK(summary["resubmitted"].get<std::uint64_t>() >= 500);
  CHECK(service.batch_tasks() == 1000 + summary["resubmitted"].get<std::uint64_t>());
}

TEST_CASE("batch exits 1 when the service refuses tasks for good, and says how many got in") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"batch", "closed", "100"});
  CHECK(r.exit_code == 1);
  CHECK(text_contains(r.out, "50 of 100 tasks accepted"));
  CHECK(text_contains(r.err, "closed: pool is closed"));
  CHECK(service.batch_tasks() == 100);  // not sent again
}

TEST_CASE("batch gives up when the queue stays full with nothing accepted for --retry-for") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"batch", "stuck", "100", "--retry-for", "200ms"});
  CHECK(r.exit_code == 1);
  CHECK(text_contains(r.out, "0 of 100 tasks accepted"));
  CHECK(text_contains(r.err, "queue_full: queue is full"));
  CHECK(text_contains(r.err, "gave up"));
  CHECK(service.batch_tasks() > 100);  // it did try again before giving up
}

TEST_CASE("events prints the recent events, one line or one JSON object each") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"events", "--pool", "default"});
  REQUIRE(r.exit_code == 0);
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 2);
  CHECK(text_contains(lines[0], "default worker_started pid=4101"));
  CHECK(text_contains(lines[1], "task_ended"));
  CHECK(service.requests("events").back().args["pool"] == "default");
  auto j = poolctl(service.socket(), {"events", "--json"});
  REQUIRE(lines_of(j.out).size() == 2);
  CHECK(json::parse(lines_of(j.out)[1])["task_id"] == 7);
}

TEST_CASE("events --follow streams each event as it happens until the service ends the stream") {
  namespace bp = boost::process;
  TempDir dir;
  ScriptedService service(dir.path());
  bp::ipstream out;
  bp::child child(kPoolctl,
                  bp::args({"--socket", service.socket(), "events", "--follow", "--json"}),
                  poolctl_environment({}), bp::std_out > out, bp::std_err > bp::null);
  REQUIRE(service.wait_for_follower());
  CHECK(service.requests("events").back().args["follow"] == true);
  for (int i = 1; i <= 3; ++i) {
    service.publish({{"event", "worker_ready"}, {"pool", "default"}, {"pid", 4100 + i}});
    std::string line;
    REQUIRE(std::getline(out, line));  // printed before the next event exists
    CHECK(json::parse(line)["pid"] == 4100 + i);
  }
  service.end_follow_streams();
  std::string rest;
  CHECK_FALSE(std::getline(out, rest));
  child.wait();
  CHECK(child.exit_code() == 0);
}

TEST_CASE("events --follow exits 3 when the service goes away") {
  namespace bp = boost::process;
  TempDir dir;
  ScriptedService service(dir.path());
  bp::child child(kPoolctl, bp::args({"--socket", service.socket(), "events", "-f"}),
                  poolctl_environment({}), bp::std_out > bp::null, bp::std_err > bp::null);
  REQUIRE(service.wait_for_follower());
  service.stop();
  child.wait();
  CHECK(child.exit_code() == 3);
}

TEST_CASE("top prints plain snapshots with per-pool rates when stdout is not a terminal") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto j = poolctl(service.socket(), {"--json", "top", "--iterations", "2", "--interval", "20ms"});
  REQUIRE(j.exit_code == 0);
  const auto snapshots = lines_of(j.out);
  REQUIRE(snapshots.size() == 2);
  const json first = json::parse(snapshots[0]), second = json::parse(snapshots[1]);
  CHECK(first["pools"][0]["completed_per_s"].is_null());  // no rate before a second look
  CHECK(second["pools"][0]["completed_per_s"].get<double>() > 0);
  CHECK(second["pools"][0]["p99_ms"] == 12);
  CHECK(second["workers"].size() == 2);

  auto r = poolctl(service.socket(), {"top", "-n", "2", "-d", "10ms"});
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(text_contains(r.out, "\x1b["));  // no ANSI redraw off a terminal
  std::size_t headers = 0;
  for (const auto& line : lines_of(r.out)) headers += line.rfind("POOL  ", 0) == 0;
  CHECK(headers == 4);  // a pool table and a worker table per snapshot
  CHECK(text_contains(r.out, "COMPLETED PER S"));
  auto once = poolctl(service.socket(), {"top"});
  CHECK(once.exit_code == 0);
  CHECK(text_contains(once.out, "poolctl top"));
}

// Not run by default: `build/bin/poolctl_tests "[perf]" -s` prints what batch reaches
// through the socket against a service that only acknowledges (docs/poolctl.md).
TEST_CASE("batch throughput against an acknowledging service", "[.][perf]") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = poolctl(service.socket(), {"batch", "noop", "2000000"});
  REQUIRE(r.exit_code == 0);
  WARN(r.out);
}
