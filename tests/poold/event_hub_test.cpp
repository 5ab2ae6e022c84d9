// EventHub with real Responders over a connection's Outbox (what the control server's
// thread would write to the socket is decoded here instead): the pool filter, the recent
// backlog, a follow stream cancelled, and a subscriber that cannot keep up (its events are
// dropped and counted, publish never waits, its queue stays bounded).
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "control/outbox.hpp"
#include "poold/event_hub.hpp"

namespace sandpool::testing {
namespace {

using control::Frame;
using control::FrameKind;
using nlohmann::json;
using poold::EventHub;

constexpr auto kPatience = std::chrono::seconds(60);

// One request's stream as a client would read it: the Responder the hub writes to, and the
// frames taken from its Outbox. The Waker's eventfd tells the test that frames arrived.
class Stream {
 public:
  Stream() : waker_(std::make_shared<control::Waker>()) {
    waker_->eventfd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    REQUIRE(waker_->eventfd);
    outbox_ = std::make_shared<control::Outbox>(1, 1u << 30, waker_);
    state_ = std::make_shared<Responder::State>(outbox_, 7);
  }
  Responder responder() const { return Responder(state_); }
  Responder::State& state() { return *state_; }

  // Waits (kPatience at most) until `n` frames in all have arrived; returns them all.
  const std::vector<Frame>& wait_frames(std::size_t n) {
    const auto until = std::chrono::steady_clock::now() + kPatience;
    while (take(), frames_.size() < n && std::chrono::steady_clock::now() < until) {
      pollfd p{waker_->eventfd.get(), POLLIN, 0};
      ::poll(&p, 1, 1000);
      std::uint64_t count = 0;
      [[maybe_unused]] ssize_t r = ::read(waker_->eventfd.get(), &count, sizeof count);
    }
    return frames_;
  }
  // The JSON bodies of the event frames so far.
  std::vector<json> events() const {
    std::vector<json> out;
    for (const Frame& f : frames_) {
      if (f.kind == FrameKind::kEvent) out.push_back(json::parse(f.json));
    }
    return out;
  }

 private:
  void take() {
    std::string bytes;
    {
      std::lock_guard<std::mutex> lock(outbox_->mu);
      bytes.swap(outbox_->bytes);
      outbox_->flush_requested = false;  // as the server thread does when it takes them
    }
    decoder_.feed(bytes);
    Frame f;
    control::FrameDecoder::Error err;
    while (decoder_.next(&f, &err) == control::FrameDecoder::Status::kFrame) {
      frames_.push_back(std::move(f));
    }
  }

  std::shared_ptr<control::Waker> waker_;
  std::shared_ptr<control::Outbox> outbox_;
  std::shared_ptr<Responder::State> state_;
  control::FrameDecoder decoder_{1u << 30};
  std::vector<Frame> frames_;
};

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

TEST_CASE("a subscriber that cannot keep up loses events, counted, and never holds publish up") {
  EventHub hub;
  Stream slow;
  hub.subscribe("a", true, slow.responder());
  std::uint64_t published = 0;
  {
    // Holding the stream's lock stalls the hub's delivery to it (the first event the hub
    // tries to send waits on it), as a responder stuck behind a slow connection would.
    std::lock_guard<std::mutex> stalled(slow.state().mu);
    // Publish goes on regardless, and past the queue's capacity events are dropped.
    while (hub.dropped() == 0) {
      hub.publish("a", task_ended(++published));
      REQUIRE(published < 100000);
    }
    // The queue is bounded: at most one batch in the hub's hands plus a full queue.
    for (int i = 0; i < 5000; ++i) hub.publish("a", task_ended(++published));
    CHECK(hub.dropped() >= 5000 - EventHub::kQueueCapacity);
  }
  // Once it moves again it gets what was kept, in order; the first event after a gap says
  // how many it missed (a full queue drops the newcomers): kept + dropped = published.
  const std::uint64_t dropped = hub.dropped();
  const std::size_t kept = published - dropped;
  CHECK(kept <= 2 * EventHub::kQueueCapacity);
  REQUIRE(slow.wait_frames(kept).size() == kept);
  std::uint64_t reported = 0;
  std::uint64_t last_id = 0;
  for (const auto& e : slow.events()) {
    const auto id = e["task_id"].get<std::uint64_t>();
    const auto missed = e.value("dropped", std::uint64_t{0});
    CHECK(id == last_id + 1 + missed);
    reported += missed;
    last_id = id;
  }
  CHECK(reported + (published - last_id) == dropped);  // the tail dropped is not reported yet
}

}  // namespace
}  // namespace sandpool::testing
