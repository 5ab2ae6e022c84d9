// poold with its task journal (docs/journal.md, "In poold"): a kill -9 loses no acknowledged
// task, a waited submit survives the restart, SIGTERM keeps what is left for the next start,
// a removed pool's tasks are dead-lettered, and finished tasks are found after a restart.
#include <signal.h>

#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "poold_process.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

// One `sleep` pool of two workers, one task each at a time.
std::string sleep_pool(const std::string& name = "sleep") {
  return pool_yaml(name, "sleep",
                   "    concurrency: 1\n"
                   "    task_defaults: {timeout: 1m}\n",
                   "{min: 1, max: 4, initial: 2}");
}

// How many of the task's attempts ended ok.
int ok_attempts(const TaskReply& t) {
  int n = 0;
  for (const auto& a : t.account.history) n += a.outcome == "ok" ? 1 : 0;
  return n;
}

// Stops poold with `sig` (SIGTERM: a clean exit, or SIGKILL) and starts it again on the same
// config and state dir.
void restart_after(PooldFixture& f, int sig) {
  f.poold->signal(sig);
  REQUIRE(f.poold->wait_exit() == (sig == SIGKILL ? 128 + SIGKILL : 0));
  f.start();
}

// A task that sleeps a minute, once it runs.
std::uint64_t running_task(Client& c) {
  auto id = c.submit(task("sleep", "60000"));
  REQUIRE(id);
  REQUIRE(wait_task_state(c, id->id, "running"));
  return id->id;
}

// `n` sleep tasks of `ms` submitted as one batch: their ids, every one accepted.
std::vector<std::uint64_t> sleep_batch(Client& c, int n, const std::string& ms) {
  auto ids = c.submit_batch(std::vector<SubmitRequest>(n, task("sleep", ms)));
  REQUIRE(ids);
  std::vector<std::uint64_t> out;
  for (const Submitted& s : *ids) {
    REQUIRE(s.status.is_ok());
    out.push_back(s.id);
  }
  return out;
}

std::uint64_t completed_count(Client& c, const std::string& pool) {
  auto s = c.stats(pool);
  REQUIRE(s);
  REQUIRE(s->pools.size() == 1);
  return s->pools[0].completed;
}

TEST_CASE("poold: a kill -9 during a batch and a waited submit loses no acknowledged task") {
  PooldFixture f("pools:\n" + sleep_pool(), "  journal: {enabled: true, sync: normal}\n");
  Client c = f.connect();
  // Twenty short tasks, then two that hold both workers until the test cancels them, then
  // the rest: the kill finds exactly twenty done and the rest unfinished, however slowly
  // the machine runs (a batch of short tasks alone could all end before the kill).
  std::vector<SubmitRequest> batch(300, task("sleep", "5"));
  batch[20] = batch[21] = task("sleep", "60000");
  auto submitted = c.submit_batch(batch);
  REQUIRE(submitted);
  std::vector<std::uint64_t> ids;
  for (const Submitted& s : *submitted) {
    REQUIRE(s.status.is_ok());
    ids.push_back(s.id);
  }
  const std::uint64_t holders[] = {ids[20], ids[21]};

  // A waited submit on a connection of its own, which poold's death cuts.
  auto waited = std::async(std::launch::async, [&f] {
    Client w = f.connect();
    Client::WaitPolicy policy;
    policy.wait_timeout = std::chrono::minutes(5);
    return w.submit_wait(task("sleep", "300"), {}, policy);
  });
  // Twenty done, the two holders running, the waited task accepted: then SIGKILL.
  for (const std::uint64_t id : holders) REQUIRE(wait_task_state(c, id, "running"));
  REQUIRE(poll_until([&] {
    auto s = c.status();
    REQUIRE(s);
    REQUIRE(s->journal);
    return s->journal->tasks_accepted >= 301;
  }));
  REQUIRE(poll_until([&] { return completed_count(c, "sleep") >= 20; }));
  REQUIRE(completed_count(c, "sleep") == 20);
  f.poold->signal(SIGKILL);
  REQUIRE(f.poold->wait_exit() == 128 + SIGKILL);

  f.start();
  CHECK(f.poold->wait_for_output("recovered "));
  Client again = f.connect();
  // The holders are recovered too and would hold the workers a minute: let the rest run.
  for (const std::uint64_t id : holders) {
    REQUIRE(again.cancel(id));
    auto t = again.wait(id);
    REQUIRE(t);
    CHECK(t->state == "cancelled");
  }
  auto result = waited.get();
  REQUIRE(result);
  CHECK(result->state == "completed");
  CHECK(result->result == "slept 300 ms");

  // status shows the round log the restart replayed.
  auto status = again.status();
  REQUIRE(status);
  REQUIRE(status->journal);
  CHECK(status->journal->log_rounds >= 1);
  CHECK(status->journal->log_live_bytes > 0);
  CHECK(status->journal->log_bytes >= status->journal->log_live_bytes);
  for (const std::uint64_t id : ids) {
    if (id == holders[0] || id == holders[1]) continue;
    auto t = again.wait(id);
    REQUIRE(t);
    INFO("task " << id);
    CHECK(t->state == "completed");
    CHECK(ok_attempts(*t) == 1);  // completed exactly once in its record
  }
}

TEST_CASE("poold: a kill -9 charges `lost` only to the task its worker started, not to its ring") {
  // One worker holding four tasks in its ring: one running a minute, three queued behind it.
  PooldFixture f("pools:\n" + pool_yaml("sleep", "sleep",
                                        "    concurrency: 4\n"
                                        "    task_defaults: {timeout: 1m}\n",
                                        "{min: 1, max: 1, initial: 1}"));
  Client c = f.connect();
  auto no_retry = [](const std::string& ms) {
    SubmitRequest r = task("sleep", ms);
    r.options.retries = 0;  // a lost attempt dead-letters it
    return r;
  };
  auto held = c.submit(no_retry("60000"));
  REQUIRE(held);
  std::vector<std::uint64_t> queued;
  for (int i = 0; i < 3; ++i) {
    auto s = c.submit(no_retry("10"));
    REQUIRE(s);
    queued.push_back(s->id);
  }
  REQUIRE(wait_task_state(c, held->id, "running"));
  for (const std::uint64_t id : queued) {
    auto t = c.task(id);
    REQUIRE(t);
    CHECK(t->state == "dispatched");  // in the worker's ring, not started
  }
  // Acknowledged after its commit, which follows the running task's start record.
  auto last = c.submit(no_retry("10"));
  REQUIRE(last);
  queued.push_back(last->id);
  f.poold->signal(SIGKILL);
  REQUIRE(f.poold->wait_exit() == 128 + SIGKILL);

  f.start();
  CHECK(f.poold->wait_for_output("recovered 5 unfinished tasks from the journal (1 were running"));
  Client again = f.connect();
  for (const std::uint64_t id : queued) {
    auto t = again.wait(id);
    REQUIRE(t);
    INFO("task " << id);
    CHECK(t->state == "completed");
    REQUIRE(t->account.history.size() == 1);  // no `lost` attempt for a task that never ran
    CHECK(t->account.history[0].outcome == "ok");
  }
  auto t = again.wait(held->id);
  REQUIRE(t);
  CHECK(t->state == "dead_lettered");
  CHECK(t->reason == "retries_exhausted");
  REQUIRE(t->account.history.size() == 1);
  CHECK(t->account.history[0].outcome == "lost");
  CHECK(t->account.history[0].error == "poold restarted");
}

TEST_CASE("poold: a waited submit's wait_timeout ends the wait, not the task") {
  PooldFixture f("pools:\n" + sleep_pool());
  Client c = f.connect();
  Client::WaitPolicy policy;
  policy.wait_timeout = std::chrono::milliseconds(300);
  auto t = c.submit_wait(task("sleep", "60000"), {}, policy);
  REQUIRE(t);
  CHECK_FALSE(t->state == "completed");  // the account as it was when the wait ended
  auto now = c.task(t->id);
  REQUIRE(now);
  CHECK((now->state == "running" || now->state == "queued"));
}

TEST_CASE("poold: SIGTERM keeps what is left in the journal and the next start runs it") {
  PooldFixture f("pools:\n" + sleep_pool(), "  shutdown_timeout: 0s\n");
  Client c = f.connect();
  const std::vector<std::uint64_t> ids = sleep_batch(c, 20, "200");
  REQUIRE(wait_task_state(c, ids[0], "running"));
  f.poold->signal(SIGTERM);
  REQUIRE(f.poold->wait_exit() == 0);
  CHECK(f.poold->output().find("kept_unfinished=") != std::string::npos);
  f.start();
  Client again = f.connect();
  for (const std::uint64_t id : ids) {
    auto t = again.wait(id);
    REQUIRE(t);
    INFO("task " << id);
    CHECK(t->state == "completed");
    // Stopped by the shutdown, not lost: the interrupted run uses up no attempt.
    for (const auto& a : t->account.history) CHECK(a.outcome != "lost");
  }
  auto letters = again.dlq_list();
  REQUIRE(letters);
  CHECK(letters->entries.empty());
}

TEST_CASE("poold: with shutdown_unfinished dead_letter, SIGTERM dead-letters what is left") {
  PooldFixture f("pools:\n" + sleep_pool(),
                 "  shutdown_timeout: 0s\n  shutdown_unfinished: dead_letter\n");
  Client c = f.connect();
  const std::uint64_t id = running_task(c);
  restart_after(f, SIGTERM);
  Client again = f.connect();
  auto t = again.task(id);
  REQUIRE(t);
  CHECK(t->state == "dead_lettered");
  CHECK(t->reason == "shutdown");
}

TEST_CASE("poold: the tasks of a pool removed from the config are dead-lettered pool_removed") {
  PooldFixture f("pools:\n" + sleep_pool("doomed"), "  shutdown_timeout: 0s\n");
  Client c = f.connect();
  const std::uint64_t id = running_task(c);
  f.poold->signal(SIGKILL);
  REQUIRE(f.poold->wait_exit() == 128 + SIGKILL);

  write_file(f.config, service_yaml(f.dir.path) + "pools:\n" + pool_yaml("echo", "echo"));
  f.start();
  CHECK(f.poold->wait_for_output("pool doomed, which is not in the config any more"));
  Client again = f.connect();
  ops::DlqListArgs all;
  REQUIRE(poll_until([&] {
    auto letters = again.dlq_list(all);
    REQUIRE(letters);
    return letters->entries.size() == 1;
  }));
  auto letters = again.dlq_list(all);
  REQUIRE(letters);
  CHECK(letters->entries[0].task.id == id);
  CHECK(letters->entries[0].task.reason == "pool_removed");
}

TEST_CASE("poold: a task finished before a restart is found by id, by wait and by its key") {
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo"));
  Client c = f.connect();
  SubmitRequest keyed = task("echo", "kept");
  keyed.options.idempotency_key = "order-17";
  auto done = c.submit_wait(keyed);
  REQUIRE(done);
  REQUIRE(done->state == "completed");
  restart_after(f, SIGTERM);
  Client again = f.connect();
  auto t = again.task(done->id);
  REQUIRE(t);
  CHECK(t->state == "completed");
  CHECK(t->result == "kept");
  auto w = again.wait(done->id);
  REQUIRE(w);
  CHECK(w->result == "kept");
  // The key outlives the restart: a resubmit gets the task that ran, not a second one.
  auto resubmitted = again.submit_wait(keyed);
  REQUIRE(resubmitted);
  CHECK(resubmitted->id == done->id);
  CHECK(resubmitted->result == "kept");
  CHECK(completed_count(again, "echo") == 0);
}

}  // namespace
}  // namespace sandpool::testing
