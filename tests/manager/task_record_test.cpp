// TaskRecord (pool/src/core/task_record.hpp): one allocation with its type and payload, and
// the handles (TaskPtr) that count references in it.
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "core/task_record.hpp"

using sandpool::SubmitOptions;
using sandpool::TaskResult;
using sandpool::core::TaskPtr;
using sandpool::core::TaskRecord;

TEST_CASE("a record keeps its type and payload whole, inline or apart, at every size") {
  const std::size_t inline_max = TaskRecord::kInlinePayloadMax;
  const std::size_t size =
      GENERATE_COPY(std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{64}, inline_max - 1,
                    inline_max, inline_max + 1, std::size_t{1} << 20);
  const std::string type = GENERATE(std::string(), std::string("echo"), std::string(300, 't'));
  std::string payload(size, '\0');
  for (std::size_t i = 0; i < size; ++i) payload[i] = static_cast<char>(i * 131 + 7);
  const TaskPtr rec = TaskRecord::make(42, type, payload, SubmitOptions{});
  CHECK(rec->id == 42);
  CHECK(rec->type() == type);
  CHECK(rec->payload() == payload);
  // A payload past the inline bound keeps its own buffer, moved in rather than copied.
  std::string moved = payload;
  const char* buffer = moved.data();
  const TaskPtr again = TaskRecord::make(43, type, std::move(moved), SubmitOptions{});
  CHECK(again->payload() == payload);
  CHECK((again->payload().data() == buffer) == (size > inline_max && size > 15));
}

TEST_CASE("a record lives while a handle on it does, and goes with the last") {
  auto alive = std::make_shared<int>(0);
  std::weak_ptr<int> watch = alive;
  SubmitOptions so;
  // The options die with the record: their callback's capture shows when.
  so.on_done = [held = std::move(alive)](const TaskResult&) { (void)held; };
  TaskPtr first = TaskRecord::make(1, "echo", std::string(64, 'p'), std::move(so));
  CHECK(first.use_count() == 1);
  TaskPtr copy = first;
  CHECK(first.use_count() == 2);
  CHECK(copy == first);
  TaskPtr moved = std::move(copy);
  CHECK(copy == nullptr);  // NOLINT(bugprone-use-after-move): a moved-from handle is empty
  CHECK(first.use_count() == 2);
  first.reset();
  CHECK_FALSE(first);
  CHECK_FALSE(watch.expired());
  CHECK(moved.use_count() == 1);
  moved = TaskPtr();
  CHECK(watch.expired());
}

TEST_CASE("a handle assigned to itself or swapped keeps its record") {
  TaskPtr a = TaskRecord::make(1, "a", "x", SubmitOptions{});
  TaskPtr b = TaskRecord::make(2, "b", "y", SubmitOptions{});
  const TaskPtr& self = a;
  a = self;
  CHECK(a.use_count() == 1);
  CHECK(a->id == 1);
  a.swap(b);
  CHECK(a->id == 2);
  CHECK(b->id == 1);
  a = b;
  CHECK(a->id == 1);
  CHECK(b.use_count() == 2);
}

TEST_CASE("the tasks of a batch share its callbacks, and a task's own replace them") {
  int shared_calls = 0, own_calls = 0;
  const sandpool::core::PackedOptions::Callbacks shared(
      nullptr, [&shared_calls](const TaskResult&) { ++shared_calls; });
  const TaskPtr a = TaskRecord::make(1, "echo", "x", SubmitOptions{}, shared);
  const TaskPtr b = TaskRecord::make(2, "echo", "y", SubmitOptions{}, shared);
  SubmitOptions own;
  own.on_done = [&own_calls](const TaskResult&) { ++own_calls; };
  const TaskPtr c = TaskRecord::make(3, "echo", "z", std::move(own), shared);
  REQUIRE(a->opts.on_done() != nullptr);
  CHECK(a->opts.on_done() == b->opts.on_done());  // one block
  CHECK(a->opts.on_progress() == nullptr);
  CHECK(c->opts.on_done() != a->opts.on_done());
  for (const TaskPtr& t : {a, b, c}) (*t->opts.on_done())(TaskResult{});
  CHECK(shared_calls == 2);
  CHECK(own_calls == 1);
  // A Ticket's copy of the options carries them too.
  CHECK(static_cast<bool>(b->opts.unpack().on_done));
  // Without shared callbacks, a task that sets none has none.
  CHECK(TaskRecord::make(4, "echo", "", SubmitOptions{})->opts.on_done() == nullptr);
}
