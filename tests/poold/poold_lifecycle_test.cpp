// poold's life: SIGTERM with a task in flight (dead-lettered `shutdown`, replayed after a
// restart on the same state dir), SIGHUP reloads (valid: applied without losing queued
// tasks; invalid: refused, the old config stays), and the allow-list's rights (as root:
// skipped through ctest's SKIP_RETURN_CODE otherwise).
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <future>

#include "host_probe.hpp"
#include "poold_process.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

using nlohmann::json;

TEST_CASE("poold: SIGTERM dead-letters a long task as shutdown, which replays after a restart") {
  // Without the journal (with it, shutdown_unfinished: dead_letter does the same:
  // poold_journal_test.cpp).
  PooldFixture f("pools:\n" + pool_yaml("sleep", "sleep", "    task_defaults: {timeout: 10m}\n"),
                 "  shutdown_timeout: 200ms\n  journal: off\n");
  Client c = f.connect();
  auto long_task = c.submit(task("sleep", "600000"));
  REQUIRE(long_task);
  // Queued or running when SIGTERM comes, it cannot finish in 200 ms either way.
  const std::uint64_t id = long_task->id;

  f.poold->signal(SIGTERM);
  auto code = f.poold->wait_exit();
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK(f.poold->wait_for_output("poold stopped"));  // the reader may still be behind the exit

  // Same state dir: the letter is there, replayable.
  write_file(f.config, service_yaml(f.dir.path, "  shutdown_timeout: 200ms\n  journal: off\n") +
                           "pools:\n" + pool_yaml("sleep", "sleep"));
  f.start();
  Client c2 = f.connect();
  auto list = raw_body(c2, "dlq_list", {{"reason", "shutdown"}});
  REQUIRE(list);
  REQUIRE((*list)["entries"].size() == 1);
  const auto& letter = (*list)["entries"][0];
  CHECK(letter["task_id"] == id);
  CHECK(letter["pool"] == "sleep");
  CHECK(letter["payload_bytes"] == 6);
  auto replayed = raw_body(c2, "dlq_replay", {{"filter", {{"reason", "shutdown"}}}});
  REQUIRE(replayed);
  CHECK((*replayed)["replayed"] == 1);
  CHECK((*replayed)["ids"][0] == id);
  auto t = c2.task(id);
  REQUIRE(t);
  CHECK(t->state != "dead_lettered");
  // Task ids of the new run do not repeat the old ones.
  auto fresh = c2.submit(task("sleep", "0"));
  REQUIRE(fresh);
  CHECK(fresh->id > id);
  auto cancelled = as_json(c2.cancel(id));
  REQUIRE(cancelled);
}

TEST_CASE("poold: SIGHUP adds a pool and keeps queued tasks, an invalid reload is refused") {
  const std::string sleep_pool =
      pool_yaml("sleep", "sleep", "    concurrency: 1\n", "{min: 1, max: 1, initial: 1}");
  PooldFixture f("pools:\n" + sleep_pool);
  Client c = f.connect();
  // The only worker holds a task until the test cancels it, so four more wait in the queue
  // (or one of them in the worker's ring) through the reload.
  auto holder = c.submit(task("sleep", "600000"));
  REQUIRE(holder);
  REQUIRE(wait_task_state(c, holder->id, "running"));
  std::vector<std::future<Result<TaskReply>>> waits;
  for (int i = 0; i < 4; ++i) {
    auto p = std::make_shared<std::promise<Result<TaskReply>>>();
    waits.push_back(p->get_future());
    REQUIRE(c.submit_async(task("sleep", "1"), [p](Result<TaskReply> r) {
               p->set_value(std::move(r));
             }).is_ok());
  }
  REQUIRE(poll_until([&] { return status_of(c, "sleep")["queued"].get<int>() >= 3; }));
  auto before = as_json(c.stats("sleep"));
  REQUIRE(before);
  CHECK((*before)["pools"][0]["submitted"] == 5);

  // Valid: a second pool appears; the queued tasks are still queued, then all complete.
  write_file(f.config,
             service_yaml(f.dir.path) + "pools:\n" + sleep_pool + pool_yaml("echo", "echo"));
  f.poold->signal(SIGHUP);
  REQUIRE(f.poold->wait_for_output("reload applied"));
  auto echoed = c.submit_wait(task("echo", "new pool"));
  REQUIRE(echoed);
  CHECK(echoed->result == "new pool");
  CHECK(status_of(c, "sleep")["queued"].get<int>() >= 3);
  for (auto& w : waits) CHECK(w.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);
  REQUIRE(as_json(c.cancel(holder->id)));
  for (auto& w : waits) {
    REQUIRE(w.wait_for(kPatience) == std::future_status::ready);
    auto r = w.get();
    REQUIRE(r);
    CHECK(r->state == "completed");
  }
  REQUIRE(wait_task_state(c, holder->id, "cancelled"));

  // Invalid: refused with the error, over the socket and on SIGHUP; the pools stay.
  write_file(f.config, service_yaml(f.dir.path) + "pools:\n  - name: BAD NAME\n");
  auto refused = as_json(c.reload());
  REQUIRE_FALSE(refused);
  CHECK(refused.status().message().find("poold.yaml:") != std::string::npos);
  f.poold->signal(SIGHUP);
  REQUIRE(f.poold->wait_for_output("reload refused"));
  auto still = c.submit_wait(task("echo", "kept"));
  REQUIRE(still);
  CHECK(still->result == "kept");
  auto status = as_json(c.status());
  REQUIRE(status);
  CHECK((*status)["pools"].size() == 2);
}

// A child forked while this process has no thread yet (so it may allocate and start the
// client's thread), that becomes uid/gid 65534 (nobody) and runs `fn` when told to.
class NobodyChild {
 public:
  template <typename Fn>
  explicit NobodyChild(Fn fn) {
    REQUIRE(::pipe(go_) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(go_[1]);
      char b = 0;
      if (::read(go_[0], &b, 1) != 1) ::_exit(91);
      if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
        ::_exit(90);
      }
      ::_exit(fn());
    }
    ::close(go_[0]);
  }
  // Lets the child run; returns its exit code.
  int run() {
    (void)!::write(go_[1], "g", 1);
    ::close(go_[1]);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
  }

 private:
  int go_[2] = {-1, -1};
  pid_t pid_ = -1;
};

TEST_CASE("poold: a read-only uid sees a task's account, and only an admin its result bytes") {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "skipped: needs root (to connect as uid 65534 from a child)\n");
    std::exit(77);
  }
  TempDir dir;
  ::chmod(dir.path.c_str(), 0755);
  const auto config = dir.path / "poold.yaml";
  const std::string socket = (dir.path / "poold.sock").string();
  int id_pipe[2];
  REQUIRE(::pipe(id_pipe) == 0);
  NobodyChild read_only([&] {
    std::uint64_t id = 0;
    if (::read(id_pipe[0], &id, sizeof id) != sizeof id) return 10;
    auto c = Client::connect(socket);
    if (!c || c->rights() != "read") return 11;
    auto t = c->task(id);
    if (!t) return 12;
    if (t->state != "completed" || account_json(*t)["attempts"] != 1)
      return 13;                        // the account: yes
    if (!t->result.empty()) return 14;  // its bytes: no
    if (account_json(*t).value("result_withheld", false) != true) return 15;
    return 0;
  });
  ::close(id_pipe[0]);

  write_file(config, service_yaml(dir.path, "  allow:\n    - {user: 65534, rights: read}\n") +
                         "pools:\n" + pool_yaml("echo", "echo"));
  PooldProcess poold(config);
  REQUIRE(poold.wait_ready());
  auto admin = Client::connect(socket);
  REQUIRE(admin);
  auto done = admin->submit_wait(task("echo", "the secret result"));
  REQUIRE(done);
  REQUIRE(done->state == "completed");
  auto seen = admin->task(done->id);
  REQUIRE(seen);
  CHECK(seen->result == "the secret result");
  CHECK_FALSE(account_json(*seen).contains("result_withheld"));
  const std::uint64_t id = done->id;
  REQUIRE(::write(id_pipe[1], &id, sizeof id) == sizeof id);
  ::close(id_pipe[1]);
  CHECK(read_only.run() == 0);
}

TEST_CASE("poold: a read-only uid is refused an admin op, an unlisted uid is refused") {
  require_root("connecting as uid 65534 from a child");
  TempDir dir;
  ::chmod(dir.path.c_str(), 0755);
  const auto config = dir.path / "poold.yaml";
  const std::string socket = (dir.path / "poold.sock").string();
  NobodyChild read_only([&] {
    auto c = Client::connect(socket);
    if (!c) return 10;
    if (c->rights() != "read") return 11;
    if (!as_json(c->status())) return 12;
    auto s = c->submit(task("echo", "x"));
    return !s && error_code_of(s.status()) == "forbidden" ? 0 : 13;
  });
  // Refused at accept with a connection-level `forbidden`, not merely unable to connect.
  NobodyChild unlisted([&] {
    auto c = Client::connect(socket);
    if (c) return as_json(c->status()) ? 20 : 21;  // let in: wrong
    if (error_code_of(c.status()) != "forbidden") {
      std::fprintf(stderr, "unlisted peer: %s\n", c.status().to_string().c_str());
      return 22;
    }
    return 0;
  });

  write_file(config, service_yaml(dir.path, "  allow:\n    - {user: 65534, rights: read}\n") +
                         "pools:\n" + pool_yaml("echo", "echo"));
  {
    PooldProcess poold(config);
    REQUIRE(poold.wait_ready());
    CHECK(read_only.run() == 0);
    poold.signal(SIGTERM);
    REQUIRE(poold.wait_exit() == 0);
  }
  write_file(config, service_yaml(dir.path) + "pools:\n" + pool_yaml("echo", "echo"));
  PooldProcess poold(config);
  REQUIRE(poold.wait_ready());
  CHECK(unlisted.run() == 0);
}

}  // namespace
}  // namespace sandpool::testing
