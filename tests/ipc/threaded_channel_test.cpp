// A producer thread and a consumer thread over one small ring, both sleeping on futexes.
#include <cstdint>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "blocking_channel.hpp"
#include "local_ring.hpp"
#include "numbered_messages.hpp"

namespace sandpool::ipc {
namespace {

using testing::BlockingReceiver;
using testing::BlockingSender;
using testing::LocalRing;
using testing::NumberedMessages;

constexpr std::uint64_t kRingBytes = 4096;  // one record: at most 1016 bytes

TEST_CASE("a million messages of varying size cross a small ring between two sleeping threads",
          "[threaded]") {
  constexpr std::uint64_t kMessages = 1'000'000;
  const NumberedMessages stream(3 * kRingBytes + 100);
  LocalRing ring(kRingBytes);
  RingControl* ctl = &ring.control();
  BlockingSender tx(MessageSender(ring.producer()), [ctl] { futex_wake(&ctl->data_seq); });
  BlockingReceiver rx(MessageReceiver(ring.consumer(), 1 << 20),
                      [ctl] { futex_wake(&ctl->space_seq); });

  const std::int64_t start = monotonic_ns();
  std::uint64_t sent = 0;
  bool sender_ok = true;
  std::thread producer([&] {
    std::string m;
    for (; sent < kMessages && sender_ok; ++sent) {
      stream.build(sent, &m);
      sender_ok = tx.send(stream.kind_of(sent), m, /*batch=*/8);
    }
    sender_ok = sender_ok && tx.flush();
  });

  // Counted here and checked after the join: Catch's assertions are not thread-safe.
  std::uint64_t received = 0, wrong = 0;
  RingStatus last = RingStatus::kOk;
  const std::int64_t deadline = start + 240'000'000'000;
  std::uint16_t kind = 0;
  std::string m;
  while (received < kMessages) {
    last = rx.receive(&kind, &m, deadline);
    if (last != RingStatus::kOk) break;
    if (!stream.is_message(received, kind, m)) ++wrong;
    ++received;
  }
  producer.join();
  const double seconds = static_cast<double>(monotonic_ns() - start) / 1e9;

  CHECK(sender_ok);
  CHECK(sent == kMessages);
  CHECK(last == RingStatus::kOk);
  CHECK(received == kMessages);
  CHECK(wrong == 0);
  // Nothing left behind: one more message would have been a duplicate.
  CHECK(rx.receiver().next(&kind, &m) == RingStatus::kEmpty);
  // A wait that ran into its 10 s bound means a wake-up was lost.
  CHECK(tx.stats().timeouts == 0);
  CHECK(rx.stats().timeouts == 0);
  WARN("1M messages in " << seconds << " s: " << static_cast<std::uint64_t>(kMessages / seconds)
                         << " messages/s; producer slept " << tx.stats().sleeps
                         << " times, consumer " << rx.stats().sleeps);
}

}  // namespace
}  // namespace sandpool::ipc
