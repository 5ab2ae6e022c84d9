// Blocking send/receive over MessageSender/MessageReceiver with the rings' futex doorbells,
// the way a worker drives its channel: spin briefly, announce the sleep, re-check, block.
// Used by the threaded and cross-process tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <sandpool/ipc/channel.hpp>
#include <sandpool/ipc/wake.hpp>

namespace sandpool::ipc::testing {

// A wait longer than this means a wake was lost: the tests count these and expect none.
inline constexpr std::int64_t kLostWakeNs = 10'000'000'000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

struct WaitStats {
  std::uint64_t sleeps = 0;
  std::uint64_t timeouts = 0;  // waits that ran into kLostWakeNs
};

// How a side rings the other's doorbell: futex_wake on the peer's word by default, or an
// eventfd when the peer is a manager polling one.
using Doorbell = std::function<void()>;

class BlockingSender {
 public:
  BlockingSender(MessageSender tx, Doorbell wake_consumer)
      : tx_(std::move(tx)), wake_consumer_(std::move(wake_consumer)) {}

  // Sends one message; publishes every `batch` messages. Returns false on kCorrupt.
  bool send(std::uint16_t kind, std::string_view bytes, unsigned batch = 1) {
    if (tx_.send(kind, bytes) != RingStatus::kOk) return false;
    if (tx_.has_queued()) return flush();
    if (++unpublished_ >= batch) publish();
    return true;
  }

  // Publishes everything and blocks until nothing is queued. Returns false on kCorrupt.
  bool flush() {
    for (;;) {
      const RingStatus s = tx_.pump();
      publish();
      if (s == RingStatus::kOk) return true;
      if (s == RingStatus::kCorrupt) return false;
      wait_for_space();
    }
  }

  MessageSender& sender() { return tx_; }
  const WaitStats& stats() const { return stats_; }

 private:
  void publish() {
    unpublished_ = 0;
    if (tx_.publish()) wake_consumer_();
  }
  void wait_for_space() {
    RingProducer& ring = tx_.ring();
    std::atomic<std::uint32_t>* seq = &ring.control()->space_seq;
    // A full fragment fits once the consumer has drained enough; asking for that much
    // (rather than the exact next fragment) can only make this wake later, never hang.
    const std::uint64_t want = ring.max_record_payload();
    for (int spin = 0; spin < 200; ++spin) {
      if (ring.fits(want)) return;
      cpu_relax();
    }
    const std::uint32_t seen = seq->load(std::memory_order_acquire);
    if (!ring.prepare_wait(want)) return;
    ++stats_.sleeps;
    if (!futex_wait(seq, seen, kLostWakeNs)) ++stats_.timeouts;
    ring.cancel_wait();
  }

  MessageSender tx_;
  Doorbell wake_consumer_;
  unsigned unpublished_ = 0;
  WaitStats stats_;
};

class BlockingReceiver {
 public:
  BlockingReceiver(MessageReceiver rx, Doorbell wake_producer, unsigned release_every = 16)
      : rx_(std::move(rx)),
        wake_producer_(std::move(wake_producer)),
        release_every_(release_every) {}

  // Returns kOk with the next message, or kCorrupt; blocks while nothing whole is there.
  // `deadline_ns` (monotonic) bounds the whole call: kEmpty when it passes.
  RingStatus receive(std::uint16_t* kind, std::string* msg, std::int64_t deadline_ns) {
    for (;;) {
      const RingStatus s = rx_.next(kind, msg);
      if (s == RingStatus::kOk) {
        if (++unreleased_ >= release_every_) release();
        return s;
      }
      if (s == RingStatus::kCorrupt) return s;
      // Space goes back before sleeping: the producer may be waiting for it to finish the
      // very message we wait for.
      release();
      if (monotonic_ns() > deadline_ns) return RingStatus::kEmpty;
      wait_for_data();
    }
  }

  MessageReceiver& receiver() { return rx_; }
  const WaitStats& stats() const { return stats_; }

 private:
  void release() {
    unreleased_ = 0;
    if (rx_.release()) wake_producer_();
  }
  void wait_for_data() {
    RingConsumer& ring = rx_.ring();
    std::atomic<std::uint32_t>* seq = &ring.control()->data_seq;
    for (int spin = 0; spin < 200; ++spin) {
      if (ring.has_data()) return;
      cpu_relax();
    }
    const std::uint32_t seen = seq->load(std::memory_order_acquire);
    if (!ring.prepare_sleep()) return;
    ++stats_.sleeps;
    if (!futex_wait(seq, seen, kLostWakeNs)) ++stats_.timeouts;
    ring.cancel_sleep();
  }

  MessageReceiver rx_;
  Doorbell wake_producer_;
  unsigned release_every_;
  unsigned unreleased_ = 0;
  WaitStats stats_;
};

}  // namespace sandpool::ipc::testing
