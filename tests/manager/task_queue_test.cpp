#include <catch2/catch.hpp>

#include "core/task_queue.hpp"

using sandpool::SubmitOptions;
using sandpool::core::TaskPtr;
using sandpool::core::TaskQueue;
using sandpool::core::TaskRecord;

namespace {
TaskPtr task(std::uint64_t id, std::int32_t priority) {
  SubmitOptions o;
  o.priority = priority;
  return std::make_shared<TaskRecord>(id, "t", "", o);
}
}  // namespace

TEST_CASE("higher priorities leave the queue first, FIFO within a level") {
  TaskQueue q;
  q.push(task(1, 0));
  q.push(task(2, 5));
  q.push(task(3, 0));
  q.push(task(4, 5));
  q.push(task(5, -1));
  std::vector<std::uint64_t> order;
  while (auto t = q.pop()) order.push_back(t->id);
  CHECK(order == std::vector<std::uint64_t>{2, 4, 1, 3, 5});
  CHECK(q.empty());
}

TEST_CASE("a task put back goes to the front of its own level only") {
  TaskQueue q;
  q.push(task(1, 0));
  q.push(task(2, 9));
  q.push_front(task(3, 0));
  std::vector<std::uint64_t> order;
  while (auto t = q.pop()) order.push_back(t->id);
  CHECK(order == std::vector<std::uint64_t>{2, 3, 1});
}

TEST_CASE("a task can be removed from the middle of the queue") {
  TaskQueue q;
  for (std::uint64_t i = 1; i <= 5; ++i) q.push(task(i, static_cast<std::int32_t>(i % 2)));
  REQUIRE(q.remove(3) != nullptr);
  CHECK(q.remove(3) == nullptr);
  CHECK(q.size() == 4);
  std::vector<std::uint64_t> order;
  while (auto t = q.pop()) order.push_back(t->id);
  CHECK(order == std::vector<std::uint64_t>{1, 5, 2, 4});
}
