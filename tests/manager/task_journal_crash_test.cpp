// What the journal promises when things go wrong (docs/journal.md, "What survives what"): a
// writer process SIGKILLed at a random point loses nothing it had a callback for, and a full
// disk refuses new batches with a storage error while everything committed stays.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <sandpool/store/task_journal.hpp>

#include "private_tmpfs.hpp"
#include "task_journal_support.hpp"

using namespace sandpool;
using namespace sandpool::testing;

namespace {

// Tells the parent, one line per commit callback, what was committed: "A first count" for an
// accepted batch, "F id" for a finished task. Lines are written with one write(2) each, under
// PIPE_BUF, so they arrive whole or not at all.
void report(int fd, const std::string& line) {
  const ssize_t n = ::write(fd, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) std::_Exit(3);
}

// The child: two threads accept batches of 1..20 tasks (ids from `first_id` up, thread t
// taking every other block), each finished task is a completed task with a result, until
// the parent kills it.
[[noreturn]] void run_writer_child(const std::string& state_dir, int fd, std::uint64_t first_id) {
  auto o = journal_options_in(state_dir);
  o.sync = StoreSync::kNormal;  // the weaker level: it must still survive a process crash
  auto store = DeadLetterStore::open(o);
  if (!store) std::_Exit(2);
  TaskJournal* j = (*store)->journal();
  std::atomic<int> in_flight[2] = {0, 0};
  auto writer = [&](std::uint64_t t) {
    std::mt19937_64 rng(first_id + t);
    for (std::uint64_t block = t;; block += 2) {
      // At most 8 batches of a thread wait, so the queue stays small until the kill.
      while (in_flight[t].load() >= 8) std::this_thread::sleep_for(std::chrono::microseconds(50));
      ++in_flight[t];
      const std::uint64_t first = first_id + block * 20;
      const std::uint64_t count = 1 + rng() % 20;
      j->accept(tasks(first, count), [=, &in_flight](const Status& s) {
        if (!s) std::_Exit(4);
        --in_flight[t];
        report(fd, "A " + std::to_string(first) + " " + std::to_string(count) + "\n");
        TaskResult r = account(first, TaskState::kCompleted);
        r.result = "done " + std::to_string(first);
        j->finish(r, [=](const Status& f) {
          if (!f) std::_Exit(5);
          report(fd, "F " + std::to_string(first) + "\n");
        });
      });
    }
  };
  std::thread a(writer, 0), b(writer, 1);
  a.join();  // never returns: the parent kills the process
  std::_Exit(6);
}

struct Told {
  std::map<std::uint64_t, std::uint64_t> batches;  // first id -> count
  std::set<std::uint64_t> finished;
};

Told parse_lines(const std::string& text) {
  Told told;
  std::istringstream in(text);
  std::string kind;
  while (in >> kind) {
    std::uint64_t first = 0, count = 0;
    if (kind == "A") {
      in >> first >> count;
      told.batches[first] = count;
    } else {
      in >> first;
      told.finished.insert(first);
    }
  }
  return told;
}

// Forks the writer, lets it report `callbacks` commits, SIGKILLs it, and returns everything
// it reported before it died (the pipe is read to its end).
Told kill_writer_after(const std::string& state_dir, std::uint64_t first_id,
                       std::size_t callbacks) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    run_writer_child(state_dir, fds[1], first_id);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  std::size_t lines = 0;
  bool killed = false;
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    for (ssize_t i = 0; i < n; ++i) lines += buf[i] == '\n';
    if (!killed && lines >= callbacks) {
      REQUIRE(::kill(pid, SIGKILL) == 0);
      killed = true;
    }
  }
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO("the child must die of the SIGKILL, not exit on its own: status " << status);
  REQUIRE(killed);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  return parse_lines(text);
}

}  // namespace

TEST_CASE("a journal writer SIGKILLed at a random point loses nothing it reported committed",
          "[journal][crash]") {
  TempDir dir;
  const auto seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  std::uint64_t first_id = 1;
  for (int round = 0; round < 3; ++round) {
    const std::size_t callbacks = 20 + rng() % 3000;
    INFO("round " << round << ", killed after " << callbacks << " callbacks");
    const Told told = kill_writer_after(dir.state_dir(), first_id, callbacks);
    CHECK(told.batches.size() + told.finished.size() >= callbacks);

    auto store = open_store(journal_options_in(dir.state_dir()));
    TaskJournal& j = journal_of(*store);
    for (const auto& [first, count] : told.batches) {
      for (std::uint64_t id = first; id < first + count; ++id) {
        auto got = j.find(id);
        INFO("task " << id << " was reported accepted");
        REQUIRE(got.is_ok());
        if (is_terminal(got->task.state)) continue;  // finished: its payload is gone
        CHECK(got->payload == task(id).payload);
        CHECK(got->options.idempotency_key == task(id).options.idempotency_key);
      }
    }
    for (const std::uint64_t id : told.finished) {
      auto got = j.find(id);
      INFO("task " << id << " was reported finished");
      REQUIRE(got.is_ok());
      CHECK(got->task.state == TaskState::kCompleted);
      CHECK(got->task.result == "done " + std::to_string(id));
    }
    // The next writer starts above every id this one may have committed.
    auto highest = j.highest_task_id();
    REQUIRE(highest.is_ok());
    first_id = *highest + 1;
  }
}

TEST_CASE(
    "on a full disk a batch is refused with a storage error, a finish waits, and nothing "
    "committed is lost",
    "[journal][disk]") {
  PrivateTmpfs disk(16 << 20);
  const std::string state_dir = disk.path() + "/state";
  const std::string big_result(200 * 1024, 'r');
  {
    auto store = open_store(journal_options_in(state_dir));
    TaskJournal& j = journal_of(*store);
    accept_all(j, tasks(1, 10));
    REQUIRE(disk.fill() > 0);

    TaskResult one = account(1, TaskState::kCompleted);
    one.result = big_result;
    Commits finished;
    j.finish(one, finished.callback());
    std::vector<JournalTask> big = tasks(100, 20);
    for (auto& t : big) t.payload = std::string(200 * 1024, static_cast<char>(t.task.id));
    Commits refused;
    j.accept(big, refused.callback());
    REQUIRE(eventually([&] { return refused.size() == 1 && j.stats().writes_failing; }));
    const Status s = refused.all().front();
    CHECK(s.code() == Code::kSystem);
    CHECK_THAT(s.message(), Catch::StartsWith("storage: ") && Catch::Contains("full"));
    const auto st = j.stats();
    CHECK(st.batches_refused == 1);
    CHECK_THAT(st.last_error, Catch::Contains("full"));
    CHECK(st.pending == 1);  // the finish waits in memory
    CHECK(finished.size() == 0);
    CHECK(j.unfinished()->size() == 10);

    disk.free_filler();
    REQUIRE(j.flush(60s).is_ok());
    REQUIRE(finished.size() == 1);
    CHECK(finished.all().front().is_ok());
    CHECK_FALSE(j.stats().writes_failing);
    accept_all(j, big);  // the same batch, once there is room
    REQUIRE(store->close().is_ok());
  }
  auto store = open_store(journal_options_in(state_dir));
  TaskJournal& j = journal_of(*store);
  auto open = j.unfinished();
  REQUIRE(open.is_ok());
  REQUIRE(open->size() == 29);
  CHECK(open->front().payload == task(2).payload);
  CHECK(open->back().payload == std::string(200 * 1024, static_cast<char>(119)));
  CHECK(j.find(1)->task.result == big_result);
}
