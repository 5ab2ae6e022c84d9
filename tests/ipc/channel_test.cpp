// MessageSender / MessageReceiver on a local ring, driven from one thread: fragmentation,
// reassembly, ordering, and the fragment rules whose breach is kCorrupt.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <sandpool/ipc/channel.hpp>

#include "local_ring.hpp"

namespace sandpool::ipc {
namespace {

using testing::LocalRing;

constexpr std::uint64_t kRing = 4096;  // one record carries at most kFragment bytes
constexpr std::uint64_t kFragment = 1016;

std::string pattern(std::size_t n, std::size_t seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 17) >> 3);
  return s;
}

struct Msg {
  std::uint16_t kind;
  std::string bytes;
  bool operator==(const Msg&) const = default;
};

// Moves everything the sender holds into the receiver, releasing space as it goes, and
// returns the whole messages received. Fails the test if no progress is made.
std::vector<Msg> drain(MessageSender& tx, MessageReceiver& rx) {
  std::vector<Msg> got;
  for (int rounds = 0;; ++rounds) {
    REQUIRE(rounds < 100000);
    const RingStatus pumped = tx.pump();
    REQUIRE(pumped != RingStatus::kCorrupt);
    tx.publish();
    Msg m{};
    RingStatus s;
    while ((s = rx.next(&m.kind, &m.bytes)) == RingStatus::kOk) got.push_back(m);
    REQUIRE(s == RingStatus::kEmpty);
    rx.release();
    if (pumped == RingStatus::kOk) {
      tx.publish();
      while ((s = rx.next(&m.kind, &m.bytes)) == RingStatus::kOk) got.push_back(m);
      REQUIRE(s == RingStatus::kEmpty);
      rx.release();
      return got;
    }
  }
}

TEST_CASE("messages from 0 bytes to several ring sizes arrive whole and in order") {
  const std::vector<std::size_t> sizes = {
      0,     1,         1015,          1016, 1017,      2032, 2033,        kRing - 8,
      kRing, kRing + 1, 3 * kRing + 5, 7,    5 * kRing, 0,    2 * 1016 - 1};
  // Small messages in between, so queued big ones and fast-path small ones interleave.
  const std::size_t small = GENERATE(std::size_t{0}, std::size_t{3}, std::size_t{100});
  LocalRing ring(kRing);
  MessageSender tx(ring.producer());
  MessageReceiver rx(ring.consumer(), 1 << 20);
  std::vector<Msg> sent;
  for (unsigned i = 0; i < sizes.size(); ++i) {
    for (Msg m : {Msg{static_cast<std::uint16_t>(i + 1), pattern(sizes[i], i)},
                  Msg{99, pattern(small, i + 1000)}}) {
      REQUIRE(tx.send(m.kind, m.bytes) == RingStatus::kOk);
      sent.push_back(std::move(m));
    }
  }
  CHECK(tx.has_queued());
  const std::vector<Msg> got = drain(tx, rx);
  CHECK_FALSE(tx.has_queued());
  CHECK(tx.queued_bytes() == 0);
  REQUIRE(got.size() == sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) {
    INFO("message " << i << " of " << sent[i].bytes.size() << " bytes");
    CHECK(got[i] == sent[i]);
  }
}

TEST_CASE("a small message with nothing queued goes straight into the ring") {
  LocalRing ring(kRing);
  MessageSender tx(ring.producer());
  REQUIRE(tx.send(5, pattern(1016, 1)) == RingStatus::kOk);
  CHECK_FALSE(tx.has_queued());
  CHECK(tx.ring().position() == record_span(1016));
}

TEST_CASE("a message sent behind queued ones waits its turn even when it would fit") {
  LocalRing ring(kRing);
  MessageSender tx(ring.producer());
  MessageReceiver rx(ring.consumer(), 1 << 20);
  REQUIRE(tx.send(1, pattern(3 * kRing, 1)) == RingStatus::kOk);  // fills the ring, rest queued
  REQUIRE(tx.has_queued());
  const std::uint64_t queued = tx.queued_bytes();
  CHECK(queued == 3 * kRing - 4 * kFragment);
  REQUIRE(tx.send(2, "small") == RingStatus::kOk);
  CHECK(tx.queued_bytes() == queued + 5);
  const std::vector<Msg> got = drain(tx, rx);
  REQUIRE(got.size() == 2);
  CHECK(got[0] == Msg{1, pattern(3 * kRing, 1)});
  CHECK(got[1] == Msg{2, "small"});
}

TEST_CASE("a fragmented message is not handed out before its last fragment") {
  LocalRing ring(kRing);
  RingProducer p = ring.producer();
  MessageReceiver rx(ring.consumer(), 1 << 20);
  REQUIRE(p.try_push(4, kRecordMore, "abc") == RingStatus::kOk);
  REQUIRE(p.try_push(4, kRecordMore, "def") == RingStatus::kOk);
  p.publish();
  std::uint16_t kind = 0;
  std::string msg = "untouched";
  CHECK(rx.next(&kind, &msg) == RingStatus::kEmpty);
  CHECK(msg == "untouched");
  REQUIRE(p.try_push(4, 0, "g") == RingStatus::kOk);
  p.publish();
  REQUIRE(rx.next(&kind, &msg) == RingStatus::kOk);
  CHECK(kind == 4);
  CHECK(msg == "abcdefg");
}

// Records a hostile or buggy producer could write, each of which must end the channel.
struct BadStream {
  const char* what;
  std::vector<RecordHeader> records;  // payload: `length` bytes of 'x'
  std::uint64_t max_message;
};

TEST_CASE("a receiver refuses fragment streams no honest sender writes") {
  const BadStream k = GENERATE(
      BadStream{"kind changes mid-message", {{3, 7, kRecordMore}, {3, 8, 0}}, 100},
      BadStream{"kind changes on a later fragment",
                {{3, 7, kRecordMore}, {3, 7, kRecordMore}, {3, 9, 0}},
                100},
      BadStream{"fragments add up past max_message", {{60, 1, kRecordMore}, {41, 1, 0}}, 100},
      BadStream{"one record over max_message", {{101, 1, 0}}, 100},
      BadStream{"an empty fragment that is not the last", {{0, 1, kRecordMore}}, 100},
      BadStream{"an unknown flag bit", {{1, 1, 2}}, 100});
  INFO(k.what);
  LocalRing ring(kRing);
  RingProducer p = ring.producer();
  MessageReceiver rx(ring.consumer(), k.max_message);
  for (const RecordHeader& h : k.records) {
    REQUIRE(p.try_push(h.kind, h.flags, std::string(h.length, 'x')) == RingStatus::kOk);
  }
  p.publish();
  std::uint16_t kind = 0;
  std::string msg;
  CHECK(rx.next(&kind, &msg) == RingStatus::kCorrupt);
  CHECK(msg.empty());
  // Final: a perfectly good message afterwards is not handed out either.
  REQUIRE(p.try_push(1, 0, "fine") == RingStatus::kOk);
  p.publish();
  CHECK(rx.next(&kind, &msg) == RingStatus::kCorrupt);
  CHECK(msg.empty());
}

TEST_CASE("a message of exactly max_message bytes is accepted, fragmented or not") {
  const std::uint64_t max_message = GENERATE(std::uint64_t{100}, std::uint64_t{3000});
  LocalRing ring(kRing);
  MessageSender tx(ring.producer());
  MessageReceiver rx(ring.consumer(), max_message);
  REQUIRE(tx.send(2, pattern(max_message, 5)) == RingStatus::kOk);
  const std::vector<Msg> got = drain(tx, rx);
  REQUIRE(got.size() == 1);
  CHECK(got[0] == Msg{2, pattern(max_message, 5)});
}

TEST_CASE("a sender facing an impossible tail reports corrupt from then on") {
  LocalRing ring(kRing);
  MessageSender tx(ring.producer());
  REQUIRE(tx.send(1, pattern(4 * kFragment, 0)) == RingStatus::kOk);  // exactly fills the ring
  tx.publish();
  ring.control().tail.store(kRing + 8);  // beyond anything published
  CHECK(tx.send(1, "x") == RingStatus::kCorrupt);
  ring.control().tail.store(kRing);  // even a sane tail does not revive it
  CHECK(tx.send(1, "x") == RingStatus::kCorrupt);
  CHECK(tx.pump() == RingStatus::kCorrupt);
}

}  // namespace
}  // namespace sandpool::ipc
