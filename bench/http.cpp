// The http group (issue 32's targets): a real poold with a read token and its listener on
// 127.0.0.1, attacked and timed from this process over loopback:
// (a) rss_growth_mb: poold's peak RSS growth while an anonymous chunked body of 1 GB is sent
//     to /api/v1/shutdown (the sending stops when poold answers or closes; it also stops,
//     and the figure says so, if poold grows past 1 GiB, to spare the machine);
// (b) healthz_p99_ms: /healthz on a new connection each time, while 500 idle connections and
//     100 slow senders (a header byte a second) are held, from 127.0.0.2.. so that no address
//     passes max_connections_per_client (256);
// (c) api_p50_us beside socket_p50_us: GET /api/v1/stats over one keep-alive HTTP connection
//     with the read token, and the same stats call over the control socket, in one run.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include <sandpool/control/client.hpp>
#include <sandpool/ipc/wake.hpp>

#include "bench.hpp"
#include "poold_child.hpp"

namespace sandpool::bench {
namespace {

using ipc::monotonic_ns;

constexpr const char* kReadToken = "bench-read-token-0123456789abcdef";
constexpr std::uint64_t kAttackBytes = 1000ull * 1000 * 1000;  // 1 GB
constexpr long kGiveUpKib = 1024 * 1024;                       // poold grown by 1 GiB
constexpr int kIdleConnections = 500;
constexpr int kSlowSenders = 100;
constexpr int kPerAddress = 200;  // under the per-client cap of 256
constexpr int kHealthzSamples = 200;
constexpr int kCalls = 2000;

long status_kib(pid_t pid, const std::string& field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// A plain TCP connection from `source` to 127.0.0.1:port (-1 when it failed). The caller
// closes it.
int connect_from(const char* source, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Closes every descriptor it holds.
struct Connections {
  ~Connections() {
    for (int fd : fds) ::close(fd);
  }
  std::vector<int> fds;
};

// Milliseconds from connecting to the end of /healthz's response (its status line and a
// close), or a negative number when it did not come within 5 s.
double healthz_ms(int port) {
  const std::int64_t t0 = monotonic_ns();
  const int fd = connect_from("127.0.0.1", port);
  if (fd < 0) return -1;
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                          "\r\nConnection: close\r\n\r\n";
  double ms = -1;
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
    std::string got;
    char buf[4096];
    pollfd p{fd, POLLIN, 0};
    while (got.find(" 200 ") == std::string::npos && ::poll(&p, 1, 5000) == 1) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
    if (got.find(" 200 ") != std::string::npos) {
      ms = static_cast<double>(monotonic_ns() - t0) / 1e6;
    }
  }
  ::close(fd);
  return ms;
}

// (a) The 1 GB anonymous chunked body: poold's peak RSS growth in MB.
bool measure_rss_growth(pid_t pid, int port, Report& r) {
  const long hwm0 = status_kib(pid, "VmHWM");
  const int fd = connect_from("127.0.0.1", port);
  if (fd < 0) {
    std::cerr << "sandpool-bench: http: cannot connect to the listener\n";
    return false;
  }
  const std::string head =
      "POST /api/v1/shutdown HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
      "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::size_t piece = 1u << 20;
  char size_line[32];
  std::snprintf(size_line, sizeof size_line, "%zx\r\n", piece);
  const std::string chunk = size_line + std::string(piece, '\0') + "\r\n";
  std::uint64_t sent = 0;
  bool gave_up = false;
  bool ok = ::send(fd, head.data(), head.size(), MSG_NOSIGNAL) > 0;
  while (ok && sent < kAttackBytes) {
    pollfd p{fd, POLLIN | POLLOUT, 0};
    if (::poll(&p, 1, 10000) != 1 || (p.revents & (POLLIN | POLLERR | POLLHUP)) != 0) break;
    const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n != static_cast<ssize_t>(chunk.size())) break;  // closed, or a partial write: stop
    sent += piece;
    if (status_kib(pid, "VmRSS") - hwm0 > kGiveUpKib) {
      gave_up = true;
      break;
    }
  }
  if (sent >= kAttackBytes) (void)::send(fd, "0\r\n\r\n", 5, MSG_NOSIGNAL);
  // The answer (or the close), so poold has done all it does with the body.
  std::string answer;
  char buf[4096];
  pollfd p{fd, POLLIN, 0};
  while (answer.find("\r\n\r\n") == std::string::npos && ::poll(&p, 1, 60000) == 1) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  const long hwm1 = status_kib(pid, "VmHWM");
  r.add("http", "rss_growth_mb", static_cast<double>(hwm1 - hwm0) * 1024 / 1e6, "MB");
  r.add("http", "attack_sent_mb", static_cast<double>(sent) / 1e6, "MB");
  r.note("http: the 1 GB body was answered with \"" + answer.substr(0, answer.find('\r')) + "\"" +
         (gave_up ? " (sending stopped: poold had grown by 1 GiB)" : ""));
  return true;
}

// (b) /healthz while 500 idle connections and 100 slow senders are held.
bool measure_healthz_under_load(int port, Report& r) {
  Connections idle, slow;
  const char* sources[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"};
  for (int i = 0; i < kIdleConnections; ++i) {
    const int fd = connect_from(sources[i / kPerAddress], port);
    if (fd >= 0) idle.fds.push_back(fd);
  }
  for (int i = 0; i < kSlowSenders; ++i) {
    const int fd = connect_from("127.0.0.6", port);
    if (fd >= 0) slow.fds.push_back(fd);
  }
  if (idle.fds.size() != kIdleConnections || slow.fds.size() != kSlowSenders) {
    std::cerr << "sandpool-bench: http: opened " << idle.fds.size() << " idle and "
              << slow.fds.size() << " slow connections\n";
    return false;
  }
  // The slow senders' bytes, one a second on each, from a thread of their own.
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    const std::string head = "GET /api/v1/version HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (std::size_t at = 0; !stop && at < head.size(); ++at) {
      for (int fd : slow.fds) (void)::send(fd, head.data() + at, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      for (int tick = 0; tick < 20 && !stop; ++tick) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the attack's pace
      }
    }
  });
  std::vector<double> samples;
  int failed = 0;
  for (int i = 0; i < kHealthzSamples; ++i) {
    const double ms = healthz_ms(port);
    if (ms < 0) {
      ++failed;
    } else {
      samples.push_back(ms);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // pacing, ~4 s in all
  }
  // How many of the held connections poold still kept when the samples were taken.
  int held = 0;
  for (int fd : idle.fds) {
    pollfd p{fd, POLLIN, 0};
    held += ::poll(&p, 1, 0) == 0 ? 1 : 0;
  }
  stop = true;
  sender.join();
  const Summary s = summarize(samples);
  r.add("http", "healthz_p50_ms", s.p50, "ms");
  r.add("http", "healthz_p99_ms", s.p99, "ms");
  r.add("http", "healthz_max_ms", s.max, "ms");
  r.add("http", "healthz_failed", failed, "requests");
  r.add("http", "idle_still_held", held, "connections");
  return true;
}

// (c) GET /api/v1/stats over HTTP beside the stats call over the control socket.
bool measure_api_vs_socket(Poold& poold, int port, Report& r) {
  httplib::Client http("127.0.0.1", port);
  http.set_keep_alive(true);
  http.set_bearer_token_auth(kReadToken);
  std::vector<double> api_us, socket_us;
  for (int i = 0; i < kCalls + 100; ++i) {  // the first 100 warm up
    const std::int64_t t0 = monotonic_ns();
    auto res = http.Get("/api/v1/stats");
    const std::int64_t t1 = monotonic_ns();
    if (!res || res->status != 200) {
      std::cerr << "sandpool-bench: http: GET /api/v1/stats failed ("
                << (res ? std::to_string(res->status) : httplib::to_string(res.error())) << ")\n";
      return false;
    }
    if (i >= 100) api_us.push_back(static_cast<double>(t1 - t0) / 1e3);
  }
  for (int i = 0; i < kCalls + 100; ++i) {
    const std::int64_t t0 = monotonic_ns();
    auto s = poold.client().stats();
    const std::int64_t t1 = monotonic_ns();
    if (!s) {
      std::cerr << "sandpool-bench: http: stats over the socket failed\n";
      return false;
    }
    if (i >= 100) socket_us.push_back(static_cast<double>(t1 - t0) / 1e3);
  }
  const Summary api = summarize(api_us), socket = summarize(socket_us);
  r.add("http", "api_p50_us", api.p50, "us");
  r.add("http", "api_p99_us", api.p99, "us");
  r.add("http", "socket_p50_us", socket.p50, "us");
  r.add("http", "socket_p99_us", socket.p99, "us");
  return true;
}

}  // namespace

bool run_http(const BenchOptions& o, Report& r) {
  ScratchDir dir;
  if (dir.path().empty()) {
    std::cerr << "sandpool-bench: http: cannot create a scratch dir\n";
    return false;
  }
  const fs::path token = dir.path() / "read.token";
  std::ofstream(token) << kReadToken << "\n";
  ::chmod(token.c_str(), 0600);
  const fs::path config = dir.path() / "poold.yaml";
  std::ofstream(config) << bench_config(
      dir.path(), "", "echo", plugin_path(o, "echo"), 1, 8, "",
      "{listen: 127.0.0.1:0, read_token_file: " + token.string() + "}");
  Poold poold(dir.path(), config, "echo");
  if (!poold.ready(1)) return false;
  auto status = poold.client().status();
  if (!status || status->http.empty()) return poold.fail("no HTTP listener reported");
  const int port = std::stoi(status->http.substr(status->http.rfind(':') + 1));
  if (!measure_api_vs_socket(poold, port, r)) return false;
  if (!measure_healthz_under_load(port, r)) return false;
  return measure_rss_growth(poold.pid(), port, r);
}

}  // namespace sandpool::bench
