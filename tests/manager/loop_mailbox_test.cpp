// LoopMailbox between real threads, with a hand-run loop in the test and a PoolCore driven by
// a FakeWorkerControl: no process. These run under TSan too (label `threaded`).
#include <poll.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "core/loop_mailbox.hpp"
#include "pool_core_harness.hpp"

namespace sandpool::core {
namespace {

using testing::Harness;

// Returns true iff the mailbox's bell is rung (readable) within timeout_ms.
bool bell_rung(const LoopMailbox& m, int timeout_ms) {
  pollfd p{m.bell_fd(), POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

TaskPtr task(std::uint64_t id) { return TaskRecord::make(id, "echo", "p", SubmitOptions{}); }

}  // namespace

TEST_CASE("tasks and commands posted by many threads all reach the loop, each thread's in order") {
  LoopMailbox m;
  REQUIRE(m.open());
  Harness h;
  constexpr int kThreads = 4, kEach = 2000;
  std::vector<std::vector<int>> seen(kThreads);  // loop thread only
  std::atomic<int> refused{0};
  std::vector<std::thread> posters;
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&m, &seen, &refused, t] {
      for (int i = 0; i < kEach; ++i) {
        if (i % 2 == 0) {
          if (!m.post_task(task(static_cast<std::uint64_t>(t) * kEach + i + 1))) ++refused;
        } else {
          m.post([&seen, t, i](PoolCore&, std::int64_t) { seen[t].push_back(i); });
        }
      }
    });
  }
  std::vector<TaskPtr> tasks;
  std::vector<LoopCommand> cmds;
  std::size_t task_count = 0, cmd_count = 0;
  while (task_count + cmd_count < std::size_t{kThreads} * kEach) {
    if (!m.take(&tasks, &cmds)) {
      std::this_thread::yield();
      continue;
    }
    task_count += tasks.size();
    for (auto& c : cmds) c(*h.core, 0);
    cmd_count += cmds.size();
    m.commands_done(cmds.size());
    tasks.clear();
    cmds.clear();
  }
  for (auto& p : posters) p.join();
  CHECK(refused == 0);
  CHECK(task_count == std::size_t{kThreads} * kEach / 2);
  CHECK_FALSE(m.has_mail());
  for (const auto& s : seen) {
    REQUIRE(s.size() == kEach / 2);
    CHECK(std::is_sorted(s.begin(), s.end()));
  }
}

TEST_CASE("a poster rings the bell only when the loop announced a sleep, once per sleep") {
  LoopMailbox m;
  REQUIRE(m.open());
  m.post([](PoolCore&, std::int64_t) {});  // awake loop: no bell
  CHECK(m.bell_rings() == 0);
  CHECK_FALSE(m.announce_sleep());  // mail came: the loop must not sleep
  m.end_sleep();
  std::vector<TaskPtr> tasks;
  std::vector<LoopCommand> cmds;
  REQUIRE(m.take(&tasks, &cmds));
  REQUIRE(m.announce_sleep());
  std::thread a([&] { m.post([](PoolCore&, std::int64_t) {}); });
  std::thread b([&] { m.post([](PoolCore&, std::int64_t) {}); });
  a.join();
  b.join();
  CHECK(bell_rung(m, 10000));
  CHECK(m.bell_rings() == 1);  // the second poster found the loop awake
  m.drain_bell();
  m.end_sleep();
  CHECK_FALSE(bell_rung(m, 0));
}

TEST_CASE("a task posted after stop_accepting is refused and not queued") {
  LoopMailbox m;
  REQUIRE(m.open());
  REQUIRE(m.post_task(task(1)));
  m.stop_accepting();
  CHECK_FALSE(m.accepting());
  CHECK_FALSE(m.post_task(task(2)));
  std::vector<TaskPtr> tasks;
  std::vector<LoopCommand> cmds;
  REQUIRE(m.take(&tasks, &cmds));
  REQUIRE(tasks.size() == 1);
  CHECK(tasks[0]->id == 1);
}

TEST_CASE("a batch is posted in one hand-over: in order, one bell, refused whole once closing") {
  LoopMailbox m;
  REQUIRE(m.open());
  REQUIRE(m.post_task(task(1)));
  std::vector<TaskPtr> tasks;
  std::vector<LoopCommand> cmds;
  REQUIRE(m.take(&tasks, &cmds));
  tasks.clear();
  REQUIRE(m.announce_sleep());
  std::vector<TaskPtr> batch;
  for (std::uint64_t id = 2; id <= 1001; ++id) batch.push_back(task(id));
  REQUIRE(m.post_tasks(batch));
  CHECK(bell_rung(m, 10000));
  CHECK(m.bell_rings() == 1);  // one wake-up for the thousand
  m.drain_bell();
  m.end_sleep();
  REQUIRE(m.take(&tasks, &cmds));
  REQUIRE(tasks.size() == 1000);
  for (std::size_t i = 0; i < tasks.size(); ++i) CHECK(tasks[i]->id == i + 2);
  CHECK(batch[0].use_count() == 2);  // the mailbox handed over its own references
  tasks.clear();
  m.stop_accepting();
  CHECK_FALSE(m.post_tasks(batch));
  CHECK_FALSE(m.take(&tasks, &cmds));  // none of them queued
  CHECK(tasks.empty());
}

TEST_CASE("a query is answered on the loop thread, and inline once the loop has ended") {
  LoopMailbox m;
  REQUIRE(m.open());
  Harness h;
  std::atomic<bool> stop{false};
  std::thread::id loop_id;
  std::thread loop([&] {
    loop_id = std::this_thread::get_id();
    std::vector<TaskPtr> tasks;
    std::vector<LoopCommand> cmds;
    while (!stop.load()) {
      if (!m.take(&tasks, &cmds)) {
        std::this_thread::yield();
        continue;
      }
      for (auto& c : cmds) c(*h.core, 0);
      cmds.clear();
    }
    m.end(*h.core);
  });
  const auto answered_on = m.query<std::thread::id>(
      [](PoolCore&, std::int64_t) { return std::this_thread::get_id(); }, *h.core);
  CHECK(answered_on != std::this_thread::get_id());
  stop = true;
  loop.join();
  CHECK(answered_on == loop_id);
  CHECK(m.ended());
  CHECK(m.query<std::thread::id>([](PoolCore&, std::int64_t) { return std::this_thread::get_id(); },
                                 *h.core) == std::this_thread::get_id());
}

TEST_CASE("queries racing the loop's end are all answered, none stranded") {
  LoopMailbox m;
  REQUIRE(m.open());
  Harness h;
  std::atomic<int> answered{0};
  std::atomic<bool> stop{false};
  std::thread loop([&] {
    std::vector<TaskPtr> tasks;
    std::vector<LoopCommand> cmds;
    while (!stop.load()) {
      if (m.take(&tasks, &cmds)) {
        for (auto& c : cmds) c(*h.core, 0);
        cmds.clear();
      }
    }
    m.end(*h.core);  // runs what is still posted
  });
  std::vector<std::thread> askers;
  for (int t = 0; t < 4; ++t) {
    askers.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (m.query<bool>([](PoolCore&, std::int64_t) { return true; }, *h.core)) ++answered;
      }
    });
  }
  stop = true;  // ends while the askers ask
  loop.join();
  for (auto& a : askers) a.join();
  CHECK(answered == 800);
}

TEST_CASE("published stats are current only once every posted command has run") {
  LoopMailbox m;
  REQUIRE(m.open());
  PoolStats stats;
  stats.workers = 3;
  m.publish(0, true, [&] { return stats; });
  REQUIRE(m.published_stats());
  CHECK(m.published_stats()->workers == 3);
  m.post([](PoolCore&, std::int64_t) {});  // a scale, say: not yet applied
  CHECK_FALSE(m.published_stats());
  std::vector<TaskPtr> tasks;
  std::vector<LoopCommand> cmds;
  REQUIRE(m.take(&tasks, &cmds));
  m.commands_done(cmds.size());
  stats.workers = 5;
  m.publish(100, false, [&] { return stats; });  // within 1 ms and not forced: kept
  CHECK_FALSE(m.published_stats());
  m.publish(100, true, [&] { return stats; });
  REQUIRE(m.published_stats());
  CHECK(m.published_stats()->workers == 5);
  stats.workers = 6;
  m.publish(100 + kStatsPublishNs, false, [&] { return stats; });  // 1 ms later: taken
  CHECK(m.published_stats()->workers == 6);
}

TEST_CASE("an idle waiter is released when the loop says idle, and times out otherwise") {
  LoopMailbox m;
  REQUIRE(m.open());
  CHECK_FALSE(m.idle_wanted());
  CHECK_FALSE(m.wait_idle_for(10));  // nobody says idle
  std::vector<TaskPtr> tasks;
  std::vector<LoopCommand> cmds;
  REQUIRE(m.take(&tasks, &cmds));  // what that wait posted
  cmds.clear();
  std::atomic<bool> released{false};
  std::thread waiter([&] { released = m.wait_idle_for(-1); });
  // The waiter posts a command so that the loop looks at idleness at once: the loop answers
  // after taking it.
  while (!m.take(&tasks, &cmds)) std::this_thread::yield();
  CHECK(m.idle_wanted());
  m.set_idle(true);
  waiter.join();
  CHECK(released);
}

TEST_CASE("the start is reported once: the first report wins, end() reports a closed start") {
  SECTION("reported by the loop") {
    LoopMailbox m;
    CHECK(m.report_start(Status::ok()));
    CHECK_FALSE(m.report_start(Status::error(Code::kPlugin, "late")));
    CHECK(m.wait_started());
  }
  SECTION("never reported before the end") {
    LoopMailbox m;
    Harness h;
    std::thread loop([&] { m.end(*h.core); });
    const Status s = m.wait_started();
    loop.join();
    CHECK(s.code() == Code::kClosed);
    CHECK(m.wait_idle_for(0));  // the end releases idle waiters for good
  }
}

}  // namespace sandpool::core
