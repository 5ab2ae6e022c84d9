// FinishedTasks: ended tasks stay findable by id under count, age and byte bounds.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "core/finished_tasks.hpp"

using sandpool::SubmitOptions;
using sandpool::core::FinishedTaskBounds;
using sandpool::core::FinishedTasks;
using sandpool::core::TaskPtr;
using sandpool::core::TaskRecord;

namespace {

constexpr std::int64_t kSec = 1000000000;

TaskPtr ended(std::uint64_t id, std::size_t payload_bytes = 1, std::size_t result_bytes = 0) {
  auto t = TaskRecord::make(id, "echo", std::string(payload_bytes, 'p'), SubmitOptions{});
  t->account().result.assign(result_bytes, 'r');
  return t;
}

}  // namespace

TEST_CASE("an ended task is found by id until the count bound pushes it out") {
  FinishedTasks kept(FinishedTaskBounds{3, 0, 0});
  for (std::uint64_t id = 1; id <= 3; ++id) kept.add(ended(id), id * kSec);
  CHECK(kept.find(1) != nullptr);
  kept.add(ended(4), 4 * kSec);
  CHECK(kept.size() == 3);
  CHECK(kept.find(1) == nullptr);  // the oldest went first
  CHECK(kept.find(2)->id == 2);
  CHECK(kept.find(4)->id == 4);
  CHECK(kept.find(99) == nullptr);
}

TEST_CASE("ended tasks older than the age bound are evicted") {
  FinishedTasks kept(FinishedTaskBounds{100, 10 * kSec, 0});
  kept.add(ended(1), 0);
  kept.add(ended(2), 5 * kSec);
  kept.expire(10 * kSec);
  CHECK(kept.size() == 2);  // exactly at the bound: kept
  kept.expire(11 * kSec);
  CHECK(kept.find(1) == nullptr);
  CHECK(kept.find(2) != nullptr);
  kept.expire(16 * kSec);
  CHECK(kept.size() == 0);
}

TEST_CASE("the byte bound counts payloads and results and evicts the oldest") {
  FinishedTasks kept(FinishedTaskBounds{100, 0, 1000});
  kept.add(ended(1, 300, 100), 0);
  kept.add(ended(2, 300, 100), 0);
  CHECK(kept.bytes() == 800);
  kept.add(ended(3, 100, 200), 0);  // 1100 > 1000: task 1 goes
  CHECK(kept.bytes() == 700);
  CHECK(kept.find(1) == nullptr);
  CHECK(kept.find(3) != nullptr);
  kept.add(ended(4, 5000), 0);  // larger than the whole bound: kept by nobody
  CHECK(kept.size() == 0);
  CHECK(kept.bytes() == 0);
}

TEST_CASE("a count bound of zero keeps nothing") {
  FinishedTasks kept(FinishedTaskBounds{0, 0, 0});
  kept.add(ended(1), 0);
  CHECK(kept.size() == 0);
  CHECK(kept.find(1) == nullptr);
}

TEST_CASE("memory stays flat under an endless stream of tasks") {
  FinishedTasks kept(FinishedTaskBounds{1000, 60 * kSec, 1 << 20});
  for (std::uint64_t id = 1; id <= 200000; ++id) kept.add(ended(id, 64, 64), id * 1000000);
  CHECK(kept.size() == 1000);
  CHECK(kept.bytes() == 1000 * 128);
  CHECK(kept.find(200000) != nullptr);
  CHECK(kept.find(199000) == nullptr);
}
