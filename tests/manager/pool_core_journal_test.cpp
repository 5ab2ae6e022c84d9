// The journal records PoolCore hands out (TaskJournalHooks, docs/journal.md): a task's start
// is journaled only once its worker's started word names it at the front of the worker's
// ring, so a task only queued in a ring never reads back `running` after a crash of poold,
// and has no start to undo when it goes back to the queue.
#include <signal.h>

#include <catch2/catch.hpp>
#include <limits>
#include <vector>

#include "pool_core_harness.hpp"

namespace sandpool::testing {
namespace {

// One worker holding up to four tasks in its ring, with the journal's records kept.
struct JournaledRing {
  JournaledRing() : h(options()) {
    core::TaskJournalHooks hooks;
    hooks.started = [this](const core::TaskRecord& t, const Attempt& a) {
      starts.push_back(t.id);
      start_numbers.push_back(a.number);
    };
    hooks.requeued = [this](const core::TaskRecord& t) { requeues.push_back(t.id); };
    h.core->set_journal(std::move(hooks));
    h.ready_all();
    for (int i = 0; i < 4; ++i) tasks.push_back(h.submit());
    worker = h.holder(tasks[0]->id);
    for (const auto& t : tasks) REQUIRE(h.holder(t->id) == worker);
  }
  static PoolOptions options() {
    PoolOptions o = Harness::defaults();
    o.workers = 1;
    o.concurrency = 4;
    return o;
  }
  // The worker's header says it started `id`; the loop looks (as every iteration does).
  void worker_says(std::uint64_t id) {
    h.ctl.workers[worker].started = id;
    h.core->observe_running();
  }
  Harness h;
  std::vector<core::TaskPtr> tasks;
  core::WorkerId worker = 0;
  std::vector<std::uint64_t> starts;
  std::vector<std::uint32_t> start_numbers;
  std::vector<std::uint64_t> requeues;
};

TEST_CASE("a task put into a worker's ring gets no journaled start until its worker starts it") {
  JournaledRing r;
  r.h.core->observe_running();
  CHECK(r.starts.empty());  // four tasks in the ring, none started
  r.worker_says(r.tasks[0]->id);
  REQUIRE(r.starts == std::vector<std::uint64_t>{r.tasks[0]->id});
  CHECK(r.start_numbers == std::vector<std::uint32_t>{1});
  r.h.core->observe_running();
  CHECK(r.starts.size() == 1);  // once per attempt
  // The front answers; the next one becomes the front and is journaled when it starts.
  REQUIRE(r.h.result(r.worker, r.tasks[0]->id, ipc::TaskStatus::kOk));
  r.h.core->observe_running();  // the word still names the ended task
  CHECK(r.starts.size() == 1);
  r.worker_says(r.tasks[1]->id);
  CHECK(r.starts == std::vector<std::uint64_t>{r.tasks[0]->id, r.tasks[1]->id});
}

TEST_CASE("a started word that names no front task journals no start") {
  JournaledRing r;
  const std::uint64_t word = GENERATE_COPY(std::uint64_t{0}, std::uint64_t{999},
                                           std::numeric_limits<std::uint64_t>::max());
  INFO("started_task " << word);
  r.worker_says(word);  // not a task of its ring
  CHECK(r.starts.empty());
  r.worker_says(r.tasks[2]->id);  // a task behind the front: the worker runs its ring in order
  CHECK(r.starts.empty());
}

TEST_CASE("a worker killed with tasks queued in its ring undoes no start of a task it never ran") {
  JournaledRing r;
  r.worker_says(r.tasks[0]->id);
  r.h.exit(r.worker, ExitStatus{false, 0, SIGKILL});
  const TaskResult front = account(r.tasks[0]);
  REQUIRE(front.history.size() == 1);
  CHECK(front.history[0].outcome == Outcome::kLost);  // it ran: charged
  for (std::size_t i = 1; i < r.tasks.size(); ++i) {
    INFO("task " << i);
    CHECK(account(r.tasks[i]).history.empty());  // only queued: back to the queue uncharged
  }
  CHECK(r.requeues.empty());  // none of them had a journaled start to undo
}

TEST_CASE("a worker killed before it started its front leaves nothing journaled running") {
  JournaledRing r;
  r.h.exit(r.worker, ExitStatus{false, 0, SIGKILL});
  CHECK(r.starts.empty());
  CHECK(r.requeues.empty());
}

TEST_CASE("a stop that keeps the ring's tasks undoes only the start its worker reported") {
  JournaledRing r;
  r.worker_says(r.tasks[0]->id);
  CHECK(r.h.core->release_all("shutdown: still open", r.h.now) == r.tasks.size());
  CHECK(r.requeues == std::vector<std::uint64_t>{r.tasks[0]->id});
}

}  // namespace
}  // namespace sandpool::testing
