// AckGate: a submit's reply goes out once the handler released it and every new task's
// journal answer is in, whichever comes last, once; a waited task's end waits for it.
#include <sandpool/service/ack_gate.hpp>

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

namespace sandpool::poold {
namespace {

TEST_CASE("a gated reply goes out once it is released and every task answered, in any order") {
  auto gate = std::make_shared<AckGate>();
  auto first = AckGate::on_accepted(gate, 0);
  auto second = AckGate::on_accepted(gate, 1);
  int replies = 0;
  AckGate::Refusals seen;
  first(7, Status::ok());  // one answer before the release
  gate->release(2, [&](const AckGate::Refusals& r) {
    ++replies;
    seen = r;
  });
  CHECK(replies == 0);  // task 1 has not answered
  second(8, Status::error(Code::kSystem, "storage: disk full"));
  CHECK(replies == 1);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].first == 1);
  CHECK(gate->refused(1));
  CHECK_FALSE(gate->refused(0));
}

TEST_CASE("a release with every answer in, or none to wait for, replies at once") {
  auto gate = std::make_shared<AckGate>();
  int replies = 0;
  gate->release(0, [&](const AckGate::Refusals&) { ++replies; });
  CHECK(replies == 1);
  auto answered = std::make_shared<AckGate>();
  AckGate::on_accepted(answered, 0)(1, Status::ok());
  answered->release(1, [&](const AckGate::Refusals& r) { replies += r.empty() ? 1 : 100; });
  CHECK(replies == 2);
}

TEST_CASE("a waited task's end waits for the reply, and is dropped when its task was refused") {
  auto gate = std::make_shared<AckGate>();
  auto accepted = AckGate::on_accepted(gate, 0);
  auto refused = AckGate::on_accepted(gate, 1);
  std::vector<std::string> order;
  gate->after_reply(0, [&] { order.push_back("end 0"); });  // ended before its commit
  gate->after_reply(1, [&] { order.push_back("end 1"); });
  gate->release(2, [&](const AckGate::Refusals&) { order.push_back("reply"); });
  accepted(1, Status::ok());
  refused(2, Status::error(Code::kSystem, "storage: disk full"));
  CHECK(order == std::vector<std::string>{"reply", "end 0"});
  gate->after_reply(0, [&] { order.push_back("late end 0"); });  // after the reply: at once
  gate->after_reply(1, [&] { order.push_back("late end 1"); });
  CHECK(order == std::vector<std::string>{"reply", "end 0", "late end 0"});
}

TEST_CASE("answers from other threads send the reply exactly once") {
  for (int round = 0; round < 50; ++round) {
    auto gate = std::make_shared<AckGate>();
    std::atomic<int> replies{0};
    std::vector<std::thread> writers;
    for (std::size_t i = 0; i < 8; ++i) {
      writers.emplace_back(
          [acked = AckGate::on_accepted(gate, i), i] { acked(i + 1, Status::ok()); });
    }
    gate->release(8, [&](const AckGate::Refusals& r) {
      CHECK(r.empty());
      replies.fetch_add(1);
    });
    for (auto& t : writers) t.join();
    CHECK(replies.load() == 1);
  }
}

}  // namespace
}  // namespace sandpool::poold
