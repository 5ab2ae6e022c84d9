// poold's task journal on a full disk (issue 14): the state dir is a 4 MiB tmpfs in a mount
// namespace private to this test process (CI may have no loop devices), so the test fills it
// with the payloads of tasks that cannot run yet. Then submits are refused `storage: ...`,
// poold stays up, serves reads and reports it in status, /metrics and /healthz; once the
// tmpfs grows, submits are taken again and every acknowledged task completes.
#include <httplib.h>
#include <sched.h>
#include <sys/mount.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "host_probe.hpp"
#include "poold_process.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

// This process's mount namespace, private from here on, with a tmpfs of `size` at `dir`.
void mount_small_tmpfs(const std::filesystem::path& dir, const std::string& size) {
  require_root("a tmpfs in a private mount namespace");
  // The calling thread (which forks poold) gets a mount namespace of its own.
  if (::unshare(CLONE_NEWNS) != 0)
    skip_test(std::string("unshare(CLONE_NEWNS): ") + strerror(errno));
  REQUIRE(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0);
  std::filesystem::create_directories(dir);
  const std::string opts = "size=" + size + ",mode=0700";
  REQUIRE(::mount("sandpool-test", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) == 0);
}

TEST_CASE("poold: a full disk refuses submits with storage errors and loses nothing acknowledged") {
  TempDir dir;
  const std::filesystem::path state = dir.path / "state";
  mount_small_tmpfs(state, "4m");
  const std::filesystem::path config = dir.path / "poold.yaml";
  // One worker, one task at a time: a long first task keeps the others queued (their
  // payloads in the journal) until the test lets them run.
  write_file(config, service_yaml(dir.path, "  journal: {sync: normal}\n") + "pools:\n" +
                         pool_yaml("sleep", "sleep",
                                   "    concurrency: 1\n"
                                   "    task_defaults: {timeout: 10m}\n",
                                   "{min: 1, max: 1, initial: 1}"));
  PooldProcess poold(config);
  REQUIRE(poold.wait_ready());
  auto connected = Client::connect((dir.path / "poold.sock").string());
  REQUIRE(connected);
  Client c = std::move(connected).value();

  auto blocker = c.submit(task("sleep", "600000"));
  REQUIRE(blocker);
  REQUIRE(wait_task_state(c, blocker->id, "running"));
  // 256 KiB payloads that sleep 1 ms once run (leading zeros): the tmpfs fills in ~16.
  const std::string payload = std::string(256 * 1024, '0') + "1";
  std::vector<std::uint64_t> accepted;
  Status refused;
  for (int i = 0; i < 200 && refused.is_ok(); ++i) {
    auto s = c.submit(task("sleep", payload));
    if (s) {
      accepted.push_back(s->id);
    } else {
      refused = s.status();
    }
  }
  REQUIRE_FALSE(refused.is_ok());
  INFO(refused.to_string());
  CHECK(refused.message().find("storage: ") != std::string::npos);
  CHECK(error_code_of(refused) == "system");
  CHECK(accepted.size() >= 2);

  // Up, answering reads, and saying why submits fail.
  auto status = c.status();
  REQUIRE(status);
  REQUIRE(status->journal);
  CHECK(status->journal->storage_error.find("storage: ") != std::string::npos);
  CHECK(status->journal->batches_refused >= 1);
  auto t = c.task(accepted.front());
  REQUIRE(t);
  CHECK(t->state == "queued");
  httplib::Client http("127.0.0.1", metrics_port(poold));
  http.set_read_timeout(30, 0);
  auto health = http.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 503);
  CHECK(health->body.find("submits refused: storage: ") != std::string::npos);
  auto metrics = http.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("sandpool_journal_batches_refused_total 0") == std::string::npos);
  CHECK(metrics->body.find("sandpool_journal_batches_refused_total ") != std::string::npos);

  // Room again: the next submit is taken, poold is healthy, and every acknowledged task runs.
  REQUIRE(::mount(nullptr, state.c_str(), nullptr, MS_REMOUNT | MS_NOSUID | MS_NODEV,
                  "size=256m,mode=0700") == 0);
  auto after = c.submit(task("sleep", "1"));
  REQUIRE(after);
  accepted.push_back(after->id);
  health = http.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  auto cancelled = c.cancel(blocker->id);
  REQUIRE(cancelled);
  for (const std::uint64_t id : accepted) {
    auto done = c.wait(id);
    REQUIRE(done);
    INFO("task " << id);
    CHECK(done->state == "completed");
  }
}

}  // namespace
}  // namespace sandpool::testing
