// poold moving a task between the journal, the dead letters and a pool (docs/journal.md,
// "Every path that moves a task"): whatever stops poold in between, the task is in exactly
// one place afterwards: open (run again), ended once, or one letter.
#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>

#include <sandpool/store/sqlite_db.hpp>
#include "command_runner.hpp"
#include "poold_process.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

// One `sleep` pool of one worker; a task lost with poold is retried.
std::string moves_pool() {
  return pool_yaml("sleep", "sleep",
                   "    concurrency: 1\n"
                   "    task_defaults: {timeout: 2m, retries: 3}\n");
}

std::string stop_yaml(const std::string& unfinished) {
  return "  shutdown_timeout: 0s\n  shutdown_unfinished: " + unfinished + "\n";
}

// The store's letters, every pool.
std::vector<ops::DeadLetterEntry> stored_letters(Client& c) {
  auto l = c.dlq_list();
  REQUIRE(l);
  return l->entries;
}

TEST_CASE(
    "poold: a replayed dead letter that a stop or a kill -9 interrupts runs at the next start") {
  const int sig = GENERATE(SIGTERM, SIGKILL);
  INFO((sig == SIGTERM ? "SIGTERM" : "SIGKILL"));
  // A running task, dead-lettered by a stop.
  PooldFixture f("pools:\n" + moves_pool(), stop_yaml("dead_letter"));
  Client c = f.connect();
  auto submitted = c.submit(task("sleep", "60000"));
  REQUIRE(submitted);
  const std::uint64_t id = submitted->id;
  REQUIRE(wait_task_state(c, id, "running"));
  f.poold->signal(SIGTERM);
  REQUIRE(f.poold->wait_exit() == 0);

  // Started again with the default `keep`; its letter is replayed and runs.
  write_file(f.config, service_yaml(f.dir.path, stop_yaml("keep")) + "pools:\n" + moves_pool());
  f.start();
  Client second = f.connect();
  const auto before = stored_letters(second);
  REQUIRE(before.size() == 1);
  REQUIRE(before[0].task.id == id);
  ops::DlqSelector one;
  one.id = before[0].letter_id;
  auto replayed = second.dlq_replay(one);
  REQUIRE(replayed);
  REQUIRE(replayed->ids == std::vector<std::uint64_t>{id});
  REQUIRE(wait_task_state(second, id, "running"));

  // Stopped while it runs: with `keep` (SIGTERM) or by a kill -9.
  f.poold->signal(sig);
  REQUIRE(f.poold->wait_exit() == (sig == SIGKILL ? 128 + SIGKILL : 0));
  f.start();
  Client third = f.connect();
  // Open again, in exactly one place: run by the pool, no letter left.
  CHECK(wait_task_state(third, id, "running"));
  CHECK(stored_letters(third).empty());
  auto t = third.task(id);
  REQUIRE(t);
  CHECK(t->state == "running");
}

TEST_CASE("poold: a dead letter replayed twice runs once and the second replay finds it gone") {
  PooldFixture f("pools:\n" + moves_pool(), stop_yaml("dead_letter"));
  Client c = f.connect();
  auto submitted = c.submit(task("sleep", "60000"));
  REQUIRE(submitted);
  REQUIRE(wait_task_state(c, submitted->id, "running"));
  f.poold->signal(SIGTERM);
  REQUIRE(f.poold->wait_exit() == 0);
  f.start();
  Client again = f.connect();
  const auto before = stored_letters(again);
  REQUIRE(before.size() == 1);
  ops::DlqSelector one;
  one.id = before[0].letter_id;
  REQUIRE(again.dlq_replay(one));
  auto twice = again.dlq_replay(one);
  REQUIRE_FALSE(twice);
  CHECK(twice.status().code() == Code::kNotFound);
  CHECK(stored_letters(again).empty());
}

TEST_CASE(
    "poold: a stop whose store cannot take writes reports nothing it did not write, and the "
    "next start runs those tasks once without a second letter") {
  // The store cannot commit while the test holds the database's write lock, as on a full
  // disk: letters wait for a retry, then go to a spill file at the stop; ends are answered
  // `closed`. (A full tmpfs does the same but cannot leave room for the spill file alone.)
  PooldFixture f("pools:\n" + pool_yaml("sleep", "sleep",
                                        "    concurrency: 1\n"
                                        "    task_defaults: {timeout: 2m, retries: 3}\n",
                                        "{min: 2, max: 2, initial: 2}"),
                 stop_yaml("dead_letter"));
  Client c = f.connect();
  auto stopped = c.submit(task("sleep", "60000"));  // dead-lettered by the stop
  REQUIRE(stopped);
  auto finishing = c.submit(task("sleep", "1500"));  // completes while the store is locked
  REQUIRE(finishing);
  REQUIRE(wait_task_state(c, stopped->id, "running"));
  REQUIRE(wait_task_state(c, finishing->id, "running"));
  const std::string db = (f.dir.path / "state" / "dead_letters.db").string();
  auto locker =
      sqlite::SqliteDb::open(db, static_cast<int>(std::chrono::milliseconds(kPatience).count()));
  REQUIRE(locker);
  REQUIRE(locker->exec("BEGIN IMMEDIATE", "test lock").is_ok());
  // The second task's end waits for the database: its attempt is over (one task in flight
  // left) and the journal's writes are failing. Both, not the second alone: a start record
  // written late (a loaded host) fails first, and a stop before the task's end would
  // dead-letter it too (seen once in a full run beside the sanitizer builds).
  REQUIRE(poll_until([&] {
    auto s = c.status();
    REQUIRE(s);
    REQUIRE(s->pools.size() == 1);
    return s->journal && s->journal->writes_failing && s->pools[0].in_flight == 1;
  }));
  CHECK(c.task(finishing->id)->state != "completed");  // not reported before it is written

  f.poold->signal(SIGTERM);
  REQUIRE(f.poold->wait_exit() == 0);
  const std::string out = f.poold->output();
  std::smatch m;
  REQUIRE(std::regex_search(
      out, m, std::regex(R"(written to spill file (\S+unwritten-dead-letters-\S+\.jsonl))")));
  const std::string file = m[1];
  CHECK(out.find("the end of task " + std::to_string(finishing->id) + " is not journaled") !=
        std::string::npos);
  REQUIRE(locker->exec("COMMIT", "test unlock").is_ok());
  *locker = sqlite::SqliteDb();

  // Neither end was written: both tasks are open in the journal and run again, once.
  f.start();
  Client again = f.connect();
  CHECK(stored_letters(again).empty());
  CHECK(wait_task_state(again, stopped->id, "running"));
  auto done = again.wait(finishing->id);
  REQUIRE(done);
  CHECK(done->state == "completed");
  // Its letter in the spill file is not a second copy of the task.
  auto imported = run_command(std::string(SANDPOOL_BIN_DIR) + "/poolctl",
                              {"--socket", f.socket, "--json", "dlq", "import", file}, "");
  INFO(imported.err);
  REQUIRE(imported.exit_code == 0);
  const auto reply = nlohmann::json::parse(imported.out);
  CHECK(reply["imported"] == 0);
  CHECK(reply["already_present"] == 1);
  CHECK(stored_letters(again).empty());
  CHECK(again.task(stopped->id)->state == "running");
}

}  // namespace
}  // namespace sandpool::testing
