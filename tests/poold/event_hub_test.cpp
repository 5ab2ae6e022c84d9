// EventHub with real Responders over a connection's Outbox (what the control server's
// thread would write to the socket is decoded here instead): the pool filter, the recent
// backlog, a follow stream cancelled, a subscriber that cannot keep up (its events are
// dropped and counted, publish never waits, the log stays bounded), and publish's cost,
// which must not grow with the number of subscribers.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <sandpool/service/event_hub.hpp>
#include "allocation_counter.hpp"
#include "outbox_stream.hpp"

namespace sandpool::testing {
namespace {

using control::Frame;
using control::FrameKind;
using nlohmann::json;
using poold::EventHub;

PoolEvent task_ended(std::uint64_t id) {
  PoolEvent e;
  e.kind = PoolEvent::Kind::kTaskEnded;
  e.task_id = id;
  e.state = TaskState::kCompleted;
  return e;
}

TEST_CASE("events without follow: the recent events of the pool asked for, then ok") {
  EventHub hub;
  hub.publish("a", task_ended(1));
  hub.publish("b", task_ended(2));
  hub.publish("a", task_ended(3));
  Stream s;
  hub.subscribe("a", false, s.responder());
  const auto& frames = s.wait_frames(3);
  REQUIRE(frames.size() == 3);
  CHECK(frames[2].kind == FrameKind::kOk);
  const auto events = s.events();
  REQUIRE(events.size() == 2);
  CHECK(events[0]["task_id"] == 1);
  CHECK(events[1]["task_id"] == 3);
  for (const auto& e : events) CHECK(e["pool"] == "a");
}

TEST_CASE("a follow stream gets new events of its pool until it is cancelled, then leaves") {
  EventHub hub;
  Stream s;
  hub.subscribe("", true, s.responder());
  CHECK(hub.subscribers() == 1);
  hub.publish("a", task_ended(1));
  hub.publish("b", task_ended(2));
  REQUIRE(s.wait_frames(2).size() == 2);
  CHECK(s.events()[1]["pool"] == "b");

  s.state().cancel(false);  // the client cancelled (or its connection closed)
  CHECK(hub.subscribers() == 0);
  hub.publish("a", task_ended(3));
  CHECK(hub.dropped() == 0);  // a stream that left is not counted as slow
}

TEST_CASE(
    "a follower the hub cannot keep up with loses events, counted, and never holds publish up") {
  // The delivery thread stops in the hook with its first chunk, as on a stuck connection.
  // What the hook uses outlives the hub (declared first), whose thread runs it to the end.
  std::promise<void> taken_promise, release_promise;
  std::future<void> taken = taken_promise.get_future();
  std::shared_future<void> release = release_promise.get_future().share();
  std::uint64_t first_from = 1, first_n = 0;  // written by the hook before `taken`
  bool first = true;                          // the delivery thread's
  EventHub hub;
  hub.set_delivery_hook([&](std::uint64_t from, std::size_t n) {
    if (!std::exchange(first, false)) return;
    first_from = from;
    first_n = n;
    taken_promise.set_value();
    release.wait();
  });
  // Released however the test ends, before ~EventHub joins the thread.
  struct Release {
    std::promise<void>& p;
    bool done = false;
    void operator()() {
      if (!std::exchange(done, true)) p.set_value();
    }
    ~Release() { (*this)(); }
  } release_delivery{release_promise};

  Stream slow;
  hub.subscribe("a", true, slow.responder());
  hub.publish("a", task_ended(1));  // log position 0: the only event the thread can take
  REQUIRE(taken.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  CHECK(first_from == 0);
  CHECK(first_n == 1);
  // Publish goes on regardless; once the log wraps past what the hub took (position 0), each
  // publish drops (overwrites) the oldest event the follower was due.
  const std::uint64_t published = 1 + EventHub::kCapacity + 5000;
  for (std::uint64_t id = 2; id <= published; ++id) hub.publish("a", task_ended(id));
  CHECK(hub.dropped() == 5000);  // the log is bounded: one event taken plus a full log kept
  release_delivery();

  // Once it moves again it gets what was kept, in order; the first event after the gap says
  // how many it missed: kept + dropped = published.
  const std::size_t kept = 1 + EventHub::kCapacity;
  REQUIRE(slow.wait_frames(kept).size() == kept);
  const auto events = slow.events();
  REQUIRE(events.size() == kept);
  CHECK(events[0]["task_id"] == 1);
  CHECK(events[0].value("dropped", std::uint64_t{0}) == 0);
  CHECK(events[1]["task_id"] == 5002);
  CHECK(events[1].value("dropped", std::uint64_t{0}) == 5000);
  std::uint64_t reported = 0;
  std::uint64_t last_id = 0;
  for (const auto& e : events) {
    const auto id = e["task_id"].get<std::uint64_t>();
    const auto missed = e.value("dropped", std::uint64_t{0});
    CHECK(id == last_id + 1 + missed);
    reported += missed;
    last_id = id;
  }
  CHECK(reported == 5000);
  CHECK(last_id == published);  // the newest events are the ones kept
  CHECK(hub.dropped() == 5000);
}

TEST_CASE("publishing costs a pool's loop the same whatever the number of followers") {
  EventHub hub;
  // Strings past the small-string buffer, so a copy per subscriber would show as allocations.
  const std::string pool(40, 'p');
  PoolEvent e;
  e.kind = PoolEvent::Kind::kAttemptEnded;
  e.task_id = 1;
  e.outcome = Outcome::kError;
  const std::string detail(100, 'd');
  e.detail = detail;
  auto allocations_per_100 = [&] {
    const std::uint64_t before = allocations_on_this_thread();
    for (int i = 0; i < 100; ++i) hub.publish(pool, e);
    return allocations_on_this_thread() - before;
  };
  std::vector<std::unique_ptr<Stream>> followers;
  auto follow = [&](int n) {
    for (int i = 0; i < n; ++i) {
      followers.push_back(std::make_unique<Stream>());
      hub.subscribe("", true, followers.back()->responder());
    }
  };
  follow(1);
  const std::uint64_t one = allocations_per_100();
  follow(199);
  const std::uint64_t many = allocations_per_100();
  CHECK(hub.subscribers() == 200);
  CHECK(one <= 2 * 100);  // the event's own two strings
  CHECK(many == one);
  // And every follower still gets every event: the last one, the 100 published before it
  // came (from the recent backlog) and the 100 after.
  REQUIRE(followers.back()->wait_frames(200).size() == 200);
  REQUIRE(followers.front()->wait_frames(200).size() == 200);
}

}  // namespace
}  // namespace sandpool::testing
