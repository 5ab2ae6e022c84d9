#include <catch2/catch.hpp>

#include "control/connection_budget.hpp"

using sandpool::control::BudgetLimits;
using sandpool::control::ConnectionBudget;
using sandpool::control::StreamSlot;

namespace {
std::shared_ptr<ConnectionBudget> budget(BudgetLimits l) {
  return std::make_shared<ConnectionBudget>(l);
}
}  // namespace

TEST_CASE("admins may take the reserved connections, the others share the rest per uid") {
  auto b = budget({6, 2, 3, 4, 16});
  for (int i = 0; i < 3; ++i) CHECK_FALSE(b->admit(100, false));
  const auto per_uid = b->admit(100, false);
  REQUIRE(per_uid);
  CHECK(*per_uid == "uid 100 holds too many connections (limit 3 per uid)");
  CHECK_FALSE(b->admit(101, false));
  const auto shared = b->admit(102, false);
  REQUIRE(shared);
  CHECK(*shared ==
        "too many connections without admin rights (limit 4: 2 of 6 are kept for admins)");
  CHECK_FALSE(b->admit(0, true));
  CHECK_FALSE(b->admit(0, true));
  const auto total = b->admit(0, true);
  REQUIRE(total);
  CHECK(*total == "too many connections (limit 6)");
  CHECK(b->connections() == 6);
  b->leave(100, false);
  CHECK_FALSE(b->admit(102, false));  // the freed slot, for any uid under its share
  b->leave(0, true);
  CHECK_FALSE(b->admit(0, true));
}

TEST_CASE("a stream slot counts per connection and per uid until released, once") {
  auto b = budget({64, 8, 16, 2, 3});
  StreamSlot s1, s2, s3, s4;
  CHECK_FALSE(b->open_stream(100, 1, &s1));
  CHECK_FALSE(b->open_stream(100, 1, &s2));
  auto on_connection = b->open_stream(100, 1, &s3);
  REQUIRE(on_connection);
  CHECK(on_connection->find("limit 2 per connection") != std::string::npos);
  CHECK_FALSE(b->open_stream(100, 2, &s3));
  auto of_uid = b->open_stream(100, 2, &s4);
  REQUIRE(of_uid);
  CHECK(of_uid->find("limit 3 per uid") != std::string::npos);
  CHECK_FALSE(b->open_stream(200, 2, &s4));  // another uid, its own count
  s1.release();
  s1.release();  // once only
  StreamSlot moved = std::move(s2);
  StreamSlot s5, s6;
  CHECK_FALSE(b->open_stream(100, 1, &s5));
  auto still_full = b->open_stream(100, 3, &s6);
  REQUIRE(still_full);  // s2 lives on in `moved`: 3 for uid 100 again
  { StreamSlot gone = std::move(moved); }
  CHECK_FALSE(b->open_stream(100, 3, &s6));
}
