// Watching a real poold: its own /metrics and /healthz over HTTP (port 0, the port read from
// its ready line), `events` filtered by pool, a subscriber that never reads (the service
// neither stalls nor buffers it without bound), and progress streamed to a waited submit.
#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <regex>

#include <sandpool/control/frame_codec.hpp>
#include "command_runner.hpp"
#include "event_watcher.hpp"
#include "poold_process.hpp"

namespace sandpool::testing {
namespace {

using nlohmann::json;

TEST_CASE("poold: /metrics has every per-pool series of the issue, /healthz says ok") {
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo") + pool_yaml("fail", "fail"));
  Client c = f.connect();
  auto ok = c.submit_wait(task("echo", "hi"));
  REQUIRE(ok);
  REQUIRE(ok->state == "completed");
  auto dead = c.submit_wait(task("fail", "no"));
  REQUIRE(dead);
  REQUIRE(dead->reason == "permanent");

  httplib::Client http("127.0.0.1", metrics_port(*f.poold));
  http.set_read_timeout(30, 0);
  auto health = http.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(health->body == "ok\n");

  auto scraped = http.Get("/metrics");
  REQUIRE(scraped);
  CHECK(scraped->status == 200);
  const std::string& text = scraped->body;
  const std::vector<std::string> expected = {
      "sandpool_queue_depth{pool=\"echo\"} 0",
      "sandpool_tasks_in_flight{pool=\"echo\"} 0",
      "sandpool_workers{pool=\"echo\",state=\"idle\"} 1",
      "sandpool_workers{pool=\"echo\",state=\"busy\"} 0",
      "sandpool_workers_target{pool=\"echo\"} 1",
      "sandpool_pool_crash_loop{pool=\"echo\"} 0",
      "sandpool_pool_failed{pool=\"echo\"} 0",
      "sandpool_tasks_completed_total{pool=\"echo\"} 1",
      "sandpool_tasks_dead_lettered_total{pool=\"fail\",reason=\"permanent\"} 1",
      "sandpool_tasks_dead_lettered_total{pool=\"echo\",reason=\"pool_removed\"} 0",
      "sandpool_retries_total{pool=\"echo\"} 0",
      "sandpool_attempts_total{pool=\"echo\",outcome=\"ok\"} 1",
      "sandpool_attempts_total{pool=\"fail\",outcome=\"failed\"} 1",
      "sandpool_attempts_total{pool=\"echo\",outcome=\"lost\"} 0",
      "sandpool_workers_restarted_total{pool=\"echo\"} 0",
      "sandpool_workers_lost_total{pool=\"echo\"} 0",
      "sandpool_queue_wait_seconds_count{pool=\"echo\"} 1",
      "sandpool_run_time_seconds_count{pool=\"echo\"} 1",
      "sandpool_end_to_end_seconds_count{pool=\"echo\"} 1",
      "sandpool_end_to_end_seconds_bucket{pool=\"echo\",le=\"+Inf\"} 1",
      "sandpool_dead_letter_writes_failing 0",
      "sandpool_dead_letters_spilled_total 0",
      "sandpool_dead_letters_lost_total 0",
  };
  for (const std::string& line : expected) {
    INFO(line);
    CHECK(text.find("\n" + line + "\n") != std::string::npos);
  }
  // Worker RSS is read from /proc at scrape time: some bytes, whatever the count.
  std::smatch rss;
  REQUIRE(std::regex_search(text, rss,
                            std::regex(R"(sandpool_workers_rss_bytes\{pool="echo"\} (\d+))")));
  CHECK(std::stoull(rss[1]) > 0);
}

TEST_CASE("poold: version answers the release /metrics names and the protocol of the hello") {
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo"));
  Client c = f.connect();
  auto v = c.call<ops::Version>();
  REQUIRE(v);
  CHECK(v->protocol == server_hello(c)["version"].get<std::uint32_t>());
  REQUIRE_FALSE(v->version.empty());
  httplib::Client http("127.0.0.1", metrics_port(*f.poold));
  http.set_read_timeout(30, 0);
  auto scraped = http.Get("/metrics");
  REQUIRE(scraped);
  CHECK(scraped->body.find("sandpool_info{version=\"" + v->version + "\"} 1") != std::string::npos);

  auto printed =
      run_command(std::string(SANDPOOL_BIN_DIR) + "/poolctl", {"--socket", f.socket, "version"});
  CHECK(printed.exit_code == 0);
  CHECK(printed.out == "poold " + v->version + " (protocol " + std::to_string(v->protocol) + ")\n");
}

TEST_CASE("poold: events of one pool only, for a follower and for the recent backlog") {
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo") + pool_yaml("upper", "upper"));
  EventWatcher echo_events(f.socket, "echo");
  Client c = f.connect();
  auto a = c.submit_wait(task("upper", "x"));
  auto b = c.submit_wait(task("echo", "y"));
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(echo_events.wait([&](const std::vector<json>& es) {
    for (const auto& e : named(es, "task_ended")) {
      if (e["task_id"] == b->id) return true;
    }
    return false;
  }));
  for (const auto& e : echo_events.events()) CHECK(e["pool"] == "echo");

  // Without follow: the recent events of that pool, then the end.
  std::vector<json> recent;
  Status s = c.events(false, "upper", [&](const ops::PoolEventRecord& record) {
    const json e = ops::encode(record);
    recent.push_back(e);
    return true;
  });
  REQUIRE(s.is_ok());
  bool saw_a = false;
  for (const auto& e : recent) {
    CHECK(e["pool"] == "upper");
    saw_a = saw_a || (e["event"] == "task_ended" && e["task_id"] == a->id);
  }
  CHECK(saw_a);
}

// A raw connection: hello, an `events` follow request, one event read to prove the stream is
// open, and then it reads nothing more.
class SilentSubscriber {
 public:
  explicit SilentSubscriber(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    send({control::FrameKind::kHello, 1, "", R"({"version":1,"client":"silent"})", ""});
    REQUIRE(next().kind == control::FrameKind::kOk);
    send({control::FrameKind::kRequest, 2, "events", R"({"follow":true})", ""});
    REQUIRE(next().kind == control::FrameKind::kEvent);
  }
  ~SilentSubscriber() { ::close(fd_); }

  // Reads whatever is buffered until the server closes the socket; returns the bytes read,
  // or -1 when the socket stayed open for kPatience.
  long long drain_until_closed() {
    long long total = 0;
    char buf[65536];
    const auto until = std::chrono::steady_clock::now() + kPatience;
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 1000) <= 0) continue;
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) return total;
      total += n;
    }
    return -1;
  }

 private:
  void send(const control::Frame& f) {
    std::string bytes;
    control::encode_frame(f, &bytes);
    REQUIRE(::write(fd_, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  }
  control::Frame next() {
    control::Frame f;
    control::FrameDecoder::Error err;
    while (decoder_.next(&f, &err) != control::FrameDecoder::Status::kFrame) {
      char c;  // one byte at a time: nothing past this frame is taken off the socket
      REQUIRE(::read(fd_, &c, 1) == 1);
      decoder_.feed(std::string_view(&c, 1));
    }
    return f;
  }
  int fd_ = -1;
  control::FrameDecoder decoder_{1 << 20};
};

TEST_CASE("poold: a subscriber that never reads is cut off while the service goes on") {
  // A small buffer for a slow reader, so the events of a few thousand tasks overflow it
  // (while a client that reads, like `c`, never comes near it).
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo"), "  connections: {max_buffered: 256KiB}\n");
  SilentSubscriber silent(f.socket);
  Client c = f.connect();
  constexpr int kBatches = 10, kPerBatch = 2000;
  std::vector<SubmitRequest> batch(kPerBatch, task("echo", "x"));
  for (int i = 0; i < kBatches; ++i) {
    auto r = c.submit_batch(batch);
    REQUIRE(r);
    CHECK(std::count_if(r->begin(), r->end(),
                        [](const Submitted& s) { return !s.status.is_ok(); }) == 0);
    CHECK(as_json(c.status()));  // the service answers while the silent one's output piles up
  }
  // One worker serves in order: once this one is done, the whole batch is.
  auto last = c.submit_wait(task("echo", "last"));
  REQUIRE(last);
  CHECK(last->result == "last");
  auto stats = as_json(c.stats("echo"));
  REQUIRE(stats);
  CHECK((*stats)["pools"][0]["completed"] == kBatches * kPerBatch + 1);

  // The silent one was disconnected once its unread output passed max_buffered: what it
  // can still read is bounded by that and the socket's own buffers.
  const long long leftover = silent.drain_until_closed();
  CHECK(leftover >= 0);
  CHECK(leftover < 4ll << 20);
  CHECK(f.poold->wait_for_output("a slow reader: unread output went over max_output_bytes"));
  // The events hub still serves: the recent events end with our last task.
  std::vector<json> recent;
  REQUIRE(c.events(false, "echo", [&](const ops::PoolEventRecord& record) {
             const json e = ops::encode(record);
             recent.push_back(e);
             return true;
           }).is_ok());
  REQUIRE_FALSE(recent.empty());
  CHECK(recent.back()["task_id"] == last->id);
}

TEST_CASE("poold: a waited submit streams the plugin's progress, in order, then the result") {
  PooldFixture f("pools:\n" + pool_yaml("progress", "progress"));
  Client c = f.connect();
  std::vector<std::pair<std::uint64_t, std::string>> steps;
  auto done = c.submit_wait(task("progress", "5"), [&](std::uint64_t id, const std::string& p) {
    steps.emplace_back(id, p);
  });
  REQUIRE(done);
  CHECK(done->state == "completed");
  CHECK(done->result == "done");
  REQUIRE_FALSE(steps.empty());  // updates may be coalesced, never all lost
  int last = 0;
  for (const auto& [id, p] : steps) {
    CHECK(id == done->id);
    std::smatch m;
    REQUIRE(std::regex_match(p, m, std::regex(R"((\d)/5)")));
    const int step = std::stoi(m[1]);
    CHECK(step > last);  // latest wins: never an older step after a newer one
    last = step;
  }
}

}  // namespace
}  // namespace sandpool::testing
