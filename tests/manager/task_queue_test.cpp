#include <catch2/catch.hpp>

#include <algorithm>
#include <climits>
#include <string>

#include "core/task_queue.hpp"

using sandpool::SubmitOptions;
using sandpool::core::TaskPtr;
using sandpool::core::TaskQueue;
using sandpool::core::TaskRecord;

namespace {
TaskPtr task(std::uint64_t id, std::int32_t priority) {
  SubmitOptions o;
  o.priority = priority;
  return TaskRecord::make(id, "t", "", o);
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

namespace {
TaskPtr tenant_task(std::uint64_t id, std::string tenant, std::int32_t priority = 0) {
  SubmitOptions o;
  o.priority = priority;
  o.tenant = std::move(tenant);
  return TaskRecord::make(id, "t", "", o);
}

// Pops `n` tasks (or all there are); returns their tenants in order.
std::string served_tenants(TaskQueue& q, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    const TaskPtr t = q.pop();
    if (!t) break;
    out += t->opts.tenant().empty() ? "-" : t->opts.tenant();
  }
  return out;
}
}  // namespace

TEST_CASE("a tenant's flood does not starve another tenant's trickle in the same level") {
  TaskQueue q;
  std::uint64_t id = 1;
  for (int i = 0; i < 1000; ++i) q.push(tenant_task(id++, "a"));
  q.push(tenant_task(id++, "b"));
  q.push(tenant_task(id++, "b"));
  // b joined late, with a's 1000 ahead of it: it is served within the first few dispatches.
  const std::string first = served_tenants(q, 4);
  CHECK(first == "abab");
  // b arrives again later, one task at a time: each is served after at most one of a's.
  for (int round = 0; round < 10; ++round) {
    q.push(tenant_task(id++, "b"));
    const std::string next = served_tenants(q, 2);
    CHECK(next.find('b') != std::string::npos);
  }
  CHECK(q.size() == 1000 - 2 - 10);
}

TEST_CASE("tenants share a level in proportion to their weights") {
  TaskQueue q;
  sandpool::TenantPolicy p;
  p.weights = {{"H", 3}};
  q.set_tenants(p);
  std::uint64_t id = 1;
  for (int i = 0; i < 400; ++i) {
    q.push(tenant_task(id++, "H"));
    q.push(tenant_task(id++, "L"));
  }
  const std::string served = served_tenants(q, 400);
  const auto heavy = std::count(served.begin(), served.end(), 'H');
  const auto light = std::count(served.begin(), served.end(), 'L');
  CHECK(heavy + light == 400);
  CHECK(heavy >= 298);  // 3:1, give or take the stride's rounding
  CHECK(heavy <= 302);
}

TEST_CASE("the default tenant is one lane among the named ones, FIFO within each") {
  TaskQueue q;
  q.push(tenant_task(1, ""));
  q.push(tenant_task(2, ""));
  q.push(tenant_task(3, "x"));
  q.push(tenant_task(4, "x"));
  std::vector<std::uint64_t> order;
  while (auto t = q.pop()) order.push_back(t->id);
  CHECK(order == std::vector<std::uint64_t>{1, 3, 2, 4});
}

TEST_CASE("priority still comes before fairness: tenants share only within a level") {
  TaskQueue q;
  for (std::uint64_t i = 1; i <= 3; ++i) q.push(tenant_task(i, "a", 0));
  q.push(tenant_task(10, "b", 5));
  q.push(tenant_task(11, "a", 5));
  std::vector<std::uint64_t> order;
  while (auto t = q.pop()) order.push_back(t->id);
  CHECK(order == std::vector<std::uint64_t>{10, 11, 1, 2, 3});
}

TEST_CASE("removing a tenant's last task leaves the other lanes in order") {
  TaskQueue q;
  q.push(tenant_task(1, "a"));
  q.push(tenant_task(2, "b"));
  q.push(tenant_task(3, "a"));
  REQUIRE(q.remove(2) != nullptr);
  CHECK(q.find(2) == nullptr);
  CHECK(q.find(3) != nullptr);
  REQUIRE(q.peek() != nullptr);
  CHECK((*q.peek())->id == 1);
  std::vector<std::uint64_t> order;
  while (auto t = q.pop()) order.push_back(t->id);
  CHECK(order == std::vector<std::uint64_t>{1, 3});
  auto gone = q.remove_if([](const TaskRecord&) { return true; });
  CHECK(gone.empty());
}

TEST_CASE("peek names the task pop returns, across tenants and levels") {
  TaskQueue q;
  std::uint64_t id = 1;
  for (int i = 0; i < 50; ++i) {
    q.push(tenant_task(id++, std::string(1, static_cast<char>('a' + i % 3)), i % 2));
  }
  while (!q.empty()) {
    const std::uint64_t peeked = (*q.peek())->id;
    CHECK(q.pop()->id == peeked);
  }
}

TEST_CASE("a waiting task rises one level per aging interval, up to the top level") {
  constexpr std::int64_t kInterval = 1000;
  TaskQueue q;
  TaskPtr low = tenant_task(1, "", 0);
  low->level_since_ns = 0;
  TaskPtr top = tenant_task(2, "", 3);
  top->level_since_ns = 0;
  q.push(low);
  q.push(top);
  CHECK(q.age(999, kInterval) == 1000);  // not yet: due at one interval
  CHECK(low->level == 0);
  q.age(2500, kInterval);  // two intervals waited: two levels up, the half kept
  CHECK(low->level == 2);
  CHECK(low->level_since_ns == 2000);
  CHECK(top->level == 3);  // the top level does not age
  q.age(10000, kInterval);
  CHECK(low->level == 3);  // never above the highest level holding a task
  // Within the top level it queues behind the task that was there first.
  std::vector<std::uint64_t> order;
  while (auto t = q.pop()) order.push_back(t->id);
  CHECK(order == std::vector<std::uint64_t>{2, 1});
}

TEST_CASE("without aging a low priority waits behind every higher one") {
  TaskQueue q;
  TaskPtr low = tenant_task(1, "", 0);
  q.push(low);
  q.push(tenant_task(2, "", 1));
  CHECK(q.age(1000000, 0) == INT64_MAX);
  CHECK(low->level == 0);
  CHECK(q.pop()->id == 2);
}
