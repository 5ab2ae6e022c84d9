// accept() of a batch of views (JournalAcceptViews: a pool's records' type and payload where
// the records keep them): committed as the same tasks an accept() of JournalTasks commits, and
// what the views point at is not held once the batch is answered (committed, refused, or
// closed). That the writer lets it go earlier, when it makes the batch's JournalTasks, is not
// observable here (the round's writes are gone before its callbacks run): the memory bench
// shows it (docs/performance.md, "Memory with the journal on: the transient peaks").
#include <catch2/catch.hpp>
#include <memory>

#include <sandpool/store/task_journal.hpp>

#include "task_journal_support.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using namespace std::chrono_literals;

namespace {

// Views of `owned` (kept alive by the batch), their options shared where consecutive tasks
// have equal ones, as the pool builds them.
JournalAcceptViews views_of(std::shared_ptr<const std::vector<JournalTask>> owned) {
  JournalAcceptViews v;
  v.pool = owned->front().pool;
  for (const JournalTask& t : *owned) {
    if (v.options.empty() || !(t.options == v.options.back())) v.options.push_back(t.options);
    v.tasks.push_back(
        {t.task.id, t.task.type, t.payload, static_cast<std::uint32_t>(v.options.size() - 1)});
  }
  v.keep = owned;
  return v;
}

}  // namespace

TEST_CASE("a batch of views is journaled as its tasks, every option, type and payload",
          "[journal]") {
  TempDir dir;
  std::vector<JournalTask> want = tasks(1, 4);
  want.push_back(task(5));
  want.back().options = want[3].options;  // two tasks in a row share their options
  {
    auto store = open_store(journal_options_in(dir.state_dir()));
    TaskJournal& j = journal_of(*store);
    Commits commits;
    j.accept(views_of(std::make_shared<const std::vector<JournalTask>>(want)), commits.callback());
    REQUIRE(j.flush(60s).is_ok());
    REQUIRE(commits.size() == 1);
    REQUIRE(commits.all().front().is_ok());
    REQUIRE(store->close().is_ok());
  }
  auto store = open_store(journal_options_in(dir.state_dir()));
  auto open = journal_of(*store).unfinished();
  REQUIRE(open.is_ok());
  REQUIRE(open->size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK((*open)[i].submitted_ms > 0);  // submitted now, as an accept() with no time
    want[i].submitted_ms = (*open)[i].submitted_ms;
    check_same_task((*open)[i], want[i]);
  }
}

TEST_CASE("the journal holds no batch's views once it answered it: committed, refused or closed",
          "[journal]") {
  TempDir dir;
  auto store = open_store(journal_options_in(dir.state_dir()));
  TaskJournal& j = journal_of(*store);
  auto owned = std::make_shared<const std::vector<JournalTask>>(tasks(1, 3));
  std::weak_ptr<const std::vector<JournalTask>> watch = owned;
  std::atomic<int> held_in_callback{-1};
  j.accept(views_of(std::move(owned)),
           [&](const Status& s) { held_in_callback = s.is_ok() && !watch.expired() ? 1 : 0; });
  REQUIRE(j.flush(60s).is_ok());
  CHECK(held_in_callback == 0);
  CHECK(watch.expired());

  // A duplicate id refuses the batch: its views go with it.
  auto again = std::make_shared<const std::vector<JournalTask>>(tasks(3, 2));
  watch = again;
  Commits refused;
  j.accept(views_of(std::move(again)), refused.callback());
  REQUIRE(j.flush(60s).is_ok());
  REQUIRE(refused.size() == 1);
  CHECK_FALSE(refused.all().front().is_ok());
  CHECK(watch.expired());

  // After the store closed: answered at once, kClosed, and let go.
  REQUIRE(store->close().is_ok());
  auto late = std::make_shared<const std::vector<JournalTask>>(tasks(10, 1));
  watch = late;
  Commits closed;
  j.accept(views_of(std::move(late)), closed.callback());
  REQUIRE(closed.size() == 1);
  CHECK(closed.all().front().code() == Code::kClosed);
  CHECK(watch.expired());
}
