// poold as a process: --check, submit and lookup, batches, idempotency, kill_worker, the
// dead-letter operations, and frames a client should never send. Each test runs a real
// poold on a scratch config, state dir and socket, driven by the real sandpool::Client.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include "command_runner.hpp"
#include "host_probe.hpp"
#include "poold_process.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

using nlohmann::json;

TEST_CASE("poold --check: 0 on a good file, 1 naming line and column on a bad one") {
  TempDir dir;
  const auto good = dir.path / "good.yaml";
  write_file(good, service_yaml(dir.path) + "pools:\n" + pool_yaml("echo", "echo"));
  auto ok = run_command(poold_path(), {"--check", "--config", good.string()});
  CHECK(ok.exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(dir.path / "state"));  // --check starts nothing

  const auto bad = dir.path / "bad.yaml";
  write_file(bad, "service:\n  shutdown_timeout: 30\npools: []\n");
  auto refused = run_command(poold_path(), {"--config", bad.string(), "--check"});
  CHECK(refused.exit_code == 1);
  CHECK(refused.err.find(bad.string() + ":2:21: service.shutdown_timeout") != std::string::npos);
}

TEST_CASE("poold --check: 1 naming each user, group and plugin this host does not have") {
  TempDir dir;
  const auto missing = dir.path / "missing.yaml";
  write_file(missing,
             service_yaml(dir.path, "  allow: [{group: sp-no-such-group, rights: read}]\n") +
                 "pools:\n" +
                 "  - name: ghost\n    plugin: " + (dir.path / "no-such-plugin.so").string() +
                 "\n    workers: {min: 1, max: 1, initial: 1}\n" +
                 pool_yaml("echo", "echo", "    sandbox: {user: sp-no-such-user}\n"));
  auto r = run_command(poold_path(), {"--check", "--config", missing.string()});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("service.allow: no group named 'sp-no-such-group'") != std::string::npos);
  CHECK(r.err.find("pools[0] (ghost): plugin " + (dir.path / "no-such-plugin.so").string() +
                   ": No such file or directory") != std::string::npos);
  if (::geteuid() == 0) {  // the sandbox user is only looked up where poold would drop to it
    CHECK(r.err.find("pools[1] (echo): sandbox.user: no user named 'sp-no-such-user'") !=
          std::string::npos);
  }
  CHECK(r.out.find("ok") == std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path / "state"));  // --check starts nothing

  // A directory is not a plugin either.
  const auto dir_plugin = dir.path / "dir.yaml";
  write_file(dir_plugin, service_yaml(dir.path) +
                             "pools:\n  - name: d\n    plugin: " + dir.path.string() + "\n");
  auto d = run_command(poold_path(), {"--check", "--config", dir_plugin.string()});
  CHECK(d.exit_code == 1);
  CHECK(d.err.find("pools[0] (d): plugin " + dir.path.string() + ": not a regular file") !=
        std::string::npos);
}

TEST_CASE("poold: submit, wait, look the task up, a batch, an idempotent resubmit") {
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo") + pool_yaml("upper", "upper"));
  Client c = f.connect();
  CHECK(c.rights() == "admin");

  auto done = c.submit_wait(task("upper", "hello"));
  REQUIRE(done);
  CHECK(done->state == "completed");
  CHECK(done->result == "HELLO");
  auto looked = c.task(done->id);
  REQUIRE(looked);
  CHECK(looked->state == "completed");
  CHECK(looked->result == "HELLO");
  CHECK(account_json(*looked)["attempts"] == 1);
  CHECK(account_json(*looked)["history"][0]["outcome"] == "ok");

  auto batch = c.submit_batch({task("echo", "a"), task("upper", "b"), task("nope", "c")});
  REQUIRE(batch);
  REQUIRE(batch->size() == 3);
  CHECK((*batch)[0].status.is_ok());
  CHECK((*batch)[1].status.is_ok());
  CHECK((*batch)[2].status.code() == Code::kNotFound);  // no pool serves `nope`
  CHECK((*batch)[0].id != (*batch)[1].id);

  SubmitRequest keyed = task("upper", "once");
  keyed.options.idempotency_key = "k-1";
  auto first = c.submit_wait(keyed);
  REQUIRE(first);
  auto again = c.submit(keyed);
  REQUIRE(again);
  CHECK(again->existing);
  CHECK(again->id == first->id);
  auto again_waited = c.submit_wait(keyed);
  REQUIRE(again_waited);
  CHECK(again_waited->id == first->id);
  CHECK(again_waited->result == "ONCE");
  auto stats = as_json(c.stats("upper"));
  REQUIRE(stats);
  REQUIRE((*stats)["pools"].size() == 1);
  CHECK((*stats)["pools"][0]["name"] == "upper");
  CHECK((*stats)["pools"][0]["submitted"] == 3);  // hello, b and once: no rerun
}

TEST_CASE("poold: a pool with sandbox.cgroup names the cgroup in its workers' isolation") {
  // auto: on a host that can give workers cgroups (by a probe of the test's own), the worker
  // is in poold's and its isolation names it. Elsewhere the case skips.
  require_worker_cgroups();
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo", "    sandbox: {cgroup: auto}\n"));
  Client c = f.connect();
  auto w = as_json(c.workers("echo"));
  REQUIRE(w);
  REQUIRE((*w)["workers"].size() == 1);
  const std::string isolation = (*w)["workers"][0]["isolation"];
  const int pid = (*w)["workers"][0]["pid"];
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  const std::string cgroups((std::istreambuf_iterator<char>(in)), {});
  INFO(isolation << "\n" << cgroups);
  CHECK(isolation.find("seccomp:strict") != std::string::npos);
  CHECK(isolation.find("+cgroup:v") != std::string::npos);
  REQUIRE(cgroups.find("/sandpool-") != std::string::npos);
  // Its parents, as mounted on v1 (/sys/fs/cgroup/<controller>) and v2 (/sys/fs/cgroup) hosts.
  std::vector<std::filesystem::path> parents;
  std::istringstream lines(cgroups);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t at = line.find("/sandpool-");
    if (at == std::string::npos) continue;
    const std::size_t c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string first = controllers.substr(0, controllers.find(','));
    const std::string rel = line.substr(c2 + 1, line.find('/', at + 1) - c2 - 1);
    parents.push_back(std::filesystem::path("/sys/fs/cgroup") / first / rel.substr(1));
  }
  REQUIRE_FALSE(parents.empty());
  for (const auto& p : parents) CHECK(std::filesystem::exists(p));
  // A graceful stop leaves no cgroup behind (a SIGKILLed poold's are removed by the next).
  f.poold->signal(SIGTERM);
  CHECK(f.poold->wait_exit() == 0);
  for (const auto& p : parents) CHECK_FALSE(std::filesystem::exists(p));
}

TEST_CASE("poold: a shared-options batch is refused from its first queue_full to its end") {
  // One worker busy for a minute with one task in its ring, a queue of 3: a batch of 10
  // gets a prefix in, and every task after the first refusal is refused queue_full too.
  PooldFixture f("pools:\n" + pool_yaml("sleep", "sleep",
                                        "    concurrency: 1\n    queue: {capacity: 3}\n"
                                        "    task_defaults: {timeout: 120s}\n"));
  Client c = f.connect();
  std::vector<SubmitRequest> tasks(10, task("sleep", "60000"));
  auto batch = c.submit_batch(tasks);
  REQUIRE(batch);
  REQUIRE(batch->size() == 10);
  std::size_t accepted = 0;
  while (accepted < batch->size() && (*batch)[accepted].status.is_ok()) ++accepted;
  CHECK(accepted >= 3);
  CHECK(accepted <= 5);  // the queue's 3, the ring's 1, the task the worker runs
  for (std::size_t i = accepted; i < batch->size(); ++i) {
    CHECK((*batch)[i].status.code() == Code::kQueueFull);
    CHECK((*batch)[i].id == 0);
  }

  // Shared options that route nowhere: every task refused, each with the reason.
  auto nowhere = c.submit_batch(std::vector<SubmitRequest>(3, task("nope", "x")));
  REQUIRE(nowhere);
  for (const Submitted& s : *nowhere) CHECK(s.status.code() == Code::kNotFound);
}

TEST_CASE("poold: kill_worker, and its replacement shows in workers and events") {
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo"));
  Client c = f.connect();
  auto w = as_json(c.workers("echo"));
  REQUIRE(w);
  REQUIRE((*w)["workers"].size() == 1);
  const auto& worker = (*w)["workers"][0];
  const int pid = worker["pid"];
  // As the worker reported it once ready, inside what the manager set up: the namespaces
  // the YAML default asks for (all of them for root on a stock kernel) before, the cgroup
  // after; while it starts, the configured layers.
  const std::string isolation = worker["isolation"];
  CHECK(std::regex_search(isolation, std::regex("^(ns:[a-z,]+\\+)?rlimits\\+")));
  CHECK(isolation.find("seccomp:strict") != std::string::npos);
  if (::geteuid() == 0) CHECK(isolation.starts_with("ns:user,pid,net,ipc,uts,mnt+rlimits+"));
  if (worker["state"] != "starting") CHECK(isolation.find("+caps:none+") != std::string::npos);
  CHECK(worker["rss_bytes"].get<std::uint64_t>() > 0);

  Client watcher = f.connect();
  std::mutex mu;
  std::condition_variable cv;
  int new_pid = 0;
  std::thread events([&] {
    Status s = watcher.events(true, "echo", [&](const ops::PoolEventRecord& record) {
      const json e = ops::encode(record);
      if (e["event"] != "worker_ready" || e["pid"] == pid) return true;
      std::lock_guard<std::mutex> lock(mu);
      new_pid = e["pid"];
      cv.notify_all();
      return false;
    });
    CHECK(s.is_ok());
  });
  // The stream is open once it delivers the backlog; kill only then would race, but the
  // backlog holds the old worker_ready, and the new one can only follow the kill.
  REQUIRE(as_json(c.kill_worker("echo", pid, SIGKILL)));
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, kPatience, [&] { return new_pid != 0; }));
  }
  events.join();
  auto after = as_json(c.workers("echo"));
  REQUIRE(after);
  bool seen = false;
  for (const auto& x : (*after)["workers"]) seen = seen || x["pid"] == new_pid;
  CHECK(seen);
  auto missing = as_json(c.kill_worker("echo", 1, SIGKILL));
  CHECK(error_code_of(missing.status()) == "not_found");
}

TEST_CASE("poold: dead letters listed, shown, replayed and purged through the service") {
  PooldFixture f("pools:\n" + pool_yaml("fail", "fail"));
  Client c = f.connect();
  auto dead = c.submit_wait(task("fail", "nope"));
  REQUIRE(dead);
  CHECK(dead->state == "dead_lettered");
  CHECK(dead->reason == "permanent");
  auto dead2 = c.submit_wait(task("fail", "again"));
  REQUIRE(dead2);

  auto list = raw_body(c, "dlq_list", {{"pool", "fail"}});
  REQUIRE(list);
  REQUIRE((*list)["entries"].size() == 2);
  const std::uint64_t letter = (*list)["entries"][0]["letter_id"];
  CHECK((*list)["entries"][0]["task_id"] == dead->id);
  CHECK((*list)["entries"][0]["reason"] == "permanent");

  auto shown = raw_call(c, "dlq_show", {{"id", letter}});
  REQUIRE(shown);
  CHECK(shown->blob == "nope");

  auto replayed = raw_body(c, "dlq_replay", {{"id", letter}});
  REQUIRE(replayed);
  CHECK((*replayed)["replayed"] == 1);
  CHECK((*replayed)["ids"][0] == dead->id);
  // The replayed letter leaves the store at once; the task fails again and comes back as a
  // new letter, with a new letter id.
  CHECK(error_code_of(raw_call(c, "dlq_show", {{"id", letter}}).status()) == "not_found");
  auto again = c.submit_wait(task("fail", "third"));  // ordering: one worker, FIFO
  REQUIRE(again);
  // dead2, the replay's and third's letters (each written once its task is dead-lettered).
  std::vector<std::uint64_t> letters, tasks;
  REQUIRE(poll_until([&] {
    auto after_replay = raw_body(c, "dlq_list", {{"pool", "fail"}});
    REQUIRE(after_replay);
    letters.clear();
    tasks.clear();
    for (const auto& e : (*after_replay)["entries"]) {
      letters.push_back(e["letter_id"].get<std::uint64_t>());
      tasks.push_back(e["task_id"].get<std::uint64_t>());
    }
    return letters.size() >= 3;
  }));
  CHECK(letters.size() == 3);
  CHECK(std::count(letters.begin(), letters.end(), letter) == 0);
  CHECK(std::count(tasks.begin(), tasks.end(), dead->id) == 1);  // dead again, once
  // A filter member of the wrong type is refused naming it, never ignored: a purge by
  // `"task_id": "7"` must not become a purge of every letter.
  auto mistyped = raw_body(c, "dlq_purge", {{"filter", {{"task_id", "7"}}}});
  CHECK(error_code_of(mistyped.status()) == "bad_request");
  CHECK_THAT(mistyped.status().message(), Catch::Contains("\"task_id\""));
  auto mistyped_list = raw_body(c, "dlq_list", {{"pool", 7}});
  CHECK(error_code_of(mistyped_list.status()) == "bad_request");
  auto purged = raw_body(c, "dlq_purge", {{"filter", {{"pool", "fail"}}}});
  REQUIRE(purged);
  CHECK((*purged)["purged"] == 3);
  auto empty = raw_body(c, "dlq_list", nlohmann::json::object());
  REQUIRE(empty);
  CHECK((*empty)["entries"].empty());
  auto gone = raw_call(c, "dlq_show", {{"id", letter}});
  CHECK(error_code_of(gone.status()) == "not_found");
}

// Raw frames on a socket: poold must survive a malformed and an oversized one, answer each
// as docs/protocol.md says, and answer a good request afterwards.
int raw_connect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// One frame as the server sent it (docs/protocol.md, "Frames").
struct RawFrame {
  unsigned kind = 0;
  std::uint64_t id = 0;
  std::string name;
  std::string json;
};

std::uint64_t little_endian(const std::string& b, std::size_t at, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i)
    v |= std::uint64_t{static_cast<unsigned char>(b[at + i])} << (8 * i);
  return v;
}

// Reads one whole frame from `fd` (kPatience at most); nullopt at EOF or on a short frame.
std::optional<RawFrame> read_frame(int fd) {
  std::string bytes;
  auto fill = [&](std::size_t want) {
    while (bytes.size() < want) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kPatience).count())) != 1) {
        return false;
      }
      char buf[4096];
      const ssize_t n = ::read(fd, buf, std::min(sizeof buf, want - bytes.size()));
      if (n <= 0) return false;
      bytes.append(buf, static_cast<std::size_t>(n));
    }
    return true;
  };
  if (!fill(4)) return std::nullopt;
  const std::size_t body = little_endian(bytes, 0, 4);
  if (body < 16 || !fill(4 + body)) return std::nullopt;
  RawFrame f;
  f.kind = static_cast<unsigned char>(bytes[4]);
  const std::size_t name_len = little_endian(bytes, 6, 2);
  f.id = little_endian(bytes, 8, 8);
  const std::size_t json_len = little_endian(bytes, 16, 4);
  f.name = bytes.substr(20, name_len);
  f.json = bytes.substr(20 + name_len, json_len);
  return f;
}

// True iff the peer has closed `fd` (read returns 0 within kPatience).
bool closed_by_peer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kPatience).count())) != 1) {
    return false;
  }
  char b;
  return ::read(fd, &b, 1) == 0;
}

TEST_CASE("poold: malformed and oversized frames, then a good request is answered") {
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo"));
  {
    // A body length under 16: the stream cannot be framed any more. A connection-level
    // bad_request (id 0), then the close.
    int fd = raw_connect(f.socket);
    const char garbage[] = "\x05\x00\x00\x00{{{{{ not json at all";
    REQUIRE(::write(fd, garbage, sizeof garbage - 1) == sizeof garbage - 1);
    auto reply = read_frame(fd);
    REQUIRE(reply);
    CHECK(reply->kind == 17);  // error
    CHECK(reply->id == 0);
    CHECK(reply->name == "bad_request");
    CHECK(closed_by_peer(fd));
    ::close(fd);
  }
  {
    int fd = raw_connect(f.socket);
    // A whole header announcing a 2 GiB request: answered too_large, its body skipped.
    const unsigned char huge[20] = {0xff, 0xff, 0xff, 0x7f, 2, 0, 0, 0, 1};
    REQUIRE(::write(fd, huge, sizeof huge) == sizeof huge);
    auto reply = read_frame(fd);
    REQUIRE(reply);
    CHECK(reply->kind == 17);
    CHECK(reply->id == 1);
    CHECK(reply->name == "too_large");
    ::close(fd);
  }
  Client c = f.connect();
  auto done = c.submit_wait(task("echo", "still here"));
  REQUIRE(done);
  CHECK(done->result == "still here");
}

TEST_CASE("poold: a second poold on the same state dir is refused, naming the first's pid") {
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo"));
  auto second = run_command(poold_path(), {"--config", f.config.string()});
  CHECK(second.exit_code != 0);
  CHECK(second.err.find("pid " + std::to_string(f.poold->pid())) != std::string::npos);
  Client c = f.connect();  // the first is unharmed
  CHECK(as_json(c.status()));
}

}  // namespace
}  // namespace sandpool::testing
