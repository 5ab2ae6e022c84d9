// One request's stream as a client would read it, without a socket: a Responder over a
// connection's Outbox, and the frames a server thread would have written, decoded. For the
// poold units that write to Responders (the events hub, the progress coalescer).
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/outbox.hpp"

namespace sandpool::testing {

// The Responder the unit writes to, and the frames taken from its Outbox as a server thread
// that writes everything at once would take them (a paused one takes nothing: its bytes stay
// queued, as behind a client that does not read). The Waker's eventfd says frames arrived.
class Stream {
 public:
  static constexpr auto kPatience = std::chrono::seconds(60);

  explicit Stream(std::size_t max_output = 1u << 30) : waker_(std::make_shared<control::Waker>()) {
    waker_->eventfd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    REQUIRE(waker_->eventfd);
    outbox_ = std::make_shared<control::Outbox>(1, max_output, waker_);
    state_ = std::make_shared<Responder::State>(outbox_, 7);
  }
  Responder responder() const { return Responder(state_); }
  Responder::State& state() { return *state_; }
  void pause() { paused_ = true; }
  void resume() { paused_ = false; }
  // Bytes queued and not taken (what Responder::queued_output() reports).
  std::size_t queued() const {
    MutexLock lock(outbox_->mu);
    return outbox_->bytes.size();
  }

  // Waits (kPatience at most) until `n` frames in all have arrived; returns them all.
  const std::vector<control::Frame>& wait_frames(std::size_t n) {
    const auto until = std::chrono::steady_clock::now() + kPatience;
    while (take(), frames_.size() < n && std::chrono::steady_clock::now() < until) {
      pollfd p{waker_->eventfd.get(), POLLIN, 0};
      ::poll(&p, 1, 1000);
      std::uint64_t count = 0;
      [[maybe_unused]] ssize_t r = ::read(waker_->eventfd.get(), &count, sizeof count);
    }
    return frames_;
  }
  const std::vector<control::Frame>& frames() {
    take();
    return frames_;
  }
  // The JSON bodies of the event frames so far.
  std::vector<nlohmann::json> events() const {
    std::vector<nlohmann::json> out;
    for (const control::Frame& f : frames_) {
      if (f.kind == control::FrameKind::kEvent) out.push_back(nlohmann::json::parse(f.json));
    }
    return out;
  }

 private:
  void take() {
    if (paused_) return;
    std::string bytes;
    {
      MutexLock lock(outbox_->mu);
      bytes.swap(outbox_->bytes);
      outbox_->flush_requested = false;  // as the server thread does when it takes them
    }
    decoder_.feed(bytes);
    control::Frame f;
    control::FrameDecoder::Error err;
    while (decoder_.next(&f, &err) == control::FrameDecoder::Status::kFrame) {
      frames_.push_back(std::move(f));
    }
  }

  std::shared_ptr<control::Waker> waker_;
  std::shared_ptr<control::Outbox> outbox_;
  std::shared_ptr<Responder::State> state_;
  control::FrameDecoder decoder_{1u << 30};
  std::vector<control::Frame> frames_;
  bool paused_ = false;
};

}  // namespace sandpool::testing
