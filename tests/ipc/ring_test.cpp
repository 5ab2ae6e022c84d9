// RingProducer / RingConsumer on a local buffer: records, wrap-around, batching, doorbells,
// and the checks that turn a hostile peer's positions into kCorrupt.
#include <cstring>
#include <string>

#include <catch2/catch.hpp>

#include "local_ring.hpp"

namespace sandpool::ipc {
namespace {

using testing::LocalRing;

// A payload whose bytes depend on its length and a seed, so a misplaced copy shows.
std::string ring_pattern(std::size_t n, std::size_t seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed * 7) & 0xff);
  return s;
}

// Pushes, publishes, pops and releases one record of n bytes; returns its payload.
std::string round_trip(RingProducer& p, RingConsumer& c, std::size_t n, unsigned seed) {
  REQUIRE(p.try_push(3, 0, ring_pattern(n, seed)) == RingStatus::kOk);
  p.publish();
  RecordHeader h{};
  std::string out;
  REQUIRE(c.try_pop(&h, &out, 1 << 20) == RingStatus::kOk);
  REQUIRE(h.kind == 3);
  REQUIRE(h.length == n);
  c.release();
  return out;
}

TEST_CASE("a record that wraps the end of the ring comes out whole") {
  const std::uint64_t start = GENERATE(0u, 8u, 200u, 232u, 240u, 248u);
  const std::size_t len = GENERATE(0u, 1u, 7u, 8u, 9u, 23u, 56u);
  LocalRing ring(256);
  RingProducer p = ring.producer();
  RingConsumer c = ring.consumer();
  // Move both positions to `start` with empty-ish records (each spans 8 + payload).
  while (p.position() < start) {
    const std::uint64_t gap = start - p.position();
    round_trip(p, c, gap >= 16 ? 8 : 0, 0);
  }
  REQUIRE(p.position() == start);
  CHECK(round_trip(p, c, len, 9) == ring_pattern(len, 9));
  CHECK(p.position() == start + record_span(len));
  CHECK(c.position() == p.position());
}

TEST_CASE("two payload parts are concatenated into one record") {
  LocalRing ring(256);
  RingProducer p = ring.producer();
  RingConsumer c = ring.consumer();
  REQUIRE(p.try_push(1, kRecordMore, "head-", "tail") == RingStatus::kOk);
  p.publish();
  RecordHeader h{};
  std::string out;
  REQUIRE(c.try_pop(&h, &out, 100) == RingStatus::kOk);
  CHECK(out == "head-tail");
  CHECK(h.flags == kRecordMore);
  CHECK(h.kind == 1);
}

TEST_CASE("a full ring refuses a record without writing it, then takes it once space is released") {
  LocalRing ring(256);
  RingProducer p = ring.producer();
  RingConsumer c = ring.consumer();
  const std::string rec = ring_pattern(56, 1);  // spans 64: four fill the ring
  for (int i = 0; i < 4; ++i) REQUIRE(p.try_push(1, 0, rec) == RingStatus::kOk);
  const std::uint64_t full_at = p.position();
  CHECK(p.try_push(1, 0, "") == RingStatus::kFull);
  CHECK_FALSE(p.fits(0));
  CHECK(p.position() == full_at);
  p.publish();

  RecordHeader h{};
  std::string out;
  REQUIRE(c.try_pop(&h, &out, 1000) == RingStatus::kOk);
  // Popped but not released: the producer still sees no room.
  CHECK(p.try_push(1, 0, "") == RingStatus::kFull);
  c.release();
  CHECK(p.fits(56));
  CHECK_FALSE(p.fits(57));
  CHECK(p.try_push(1, 0, rec) == RingStatus::kOk);
}

TEST_CASE("records pushed in a batch stay invisible until one publish, then all pop in order") {
  LocalRing ring(1024);
  RingProducer p = ring.producer();
  RingConsumer c = ring.consumer();
  for (std::size_t i = 0; i < 10; ++i)
    REQUIRE(p.try_push(7, 0, ring_pattern(i * 5, i)) == RingStatus::kOk);
  RecordHeader h{};
  std::string out;
  CHECK(c.try_pop(&h, &out, 1000) == RingStatus::kEmpty);
  CHECK_FALSE(c.has_data());
  p.publish();
  CHECK(c.has_data());
  for (std::size_t i = 0; i < 10; ++i) {
    REQUIRE(c.try_pop(&h, &out, 1000) == RingStatus::kOk);
    CHECK(out == ring_pattern(i * 5, i));
  }
  CHECK(c.try_pop(&h, &out, 1000) == RingStatus::kEmpty);
  // Nothing is freed for the producer until the consumer publishes its tail once.
  CHECK(ring.control().tail.load() == 0);
  c.release();
  CHECK(ring.control().tail.load() == p.position());
}

TEST_CASE("the consumer loads the producer's head once per batch") {
  LocalRing ring(1024);
  RingProducer p = ring.producer();
  RingConsumer c = ring.consumer();
  REQUIRE(p.try_push(1, 0, "a") == RingStatus::kOk);
  REQUIRE(p.try_push(1, 0, "b") == RingStatus::kOk);
  p.publish();
  RecordHeader h{};
  std::string out;
  REQUIRE(c.try_pop(&h, &out, 10) == RingStatus::kOk);
  // A scribbled head is not looked at while the cached batch lasts...
  ring.control().head.store(3);
  REQUIRE(c.try_pop(&h, &out, 10) == RingStatus::kOk);
  CHECK(out == "b");
  // ...and is caught when the batch is used up.
  CHECK(c.try_pop(&h, &out, 10) == RingStatus::kCorrupt);
}

// Writes a record header straight into the ring memory, as a hostile producer would.
void poke_header(LocalRing& ring, std::uint64_t pos, RecordHeader h) {
  std::memcpy(ring.data() + (pos & (ring.capacity() - 1)), &h, sizeof h);
}

TEST_CASE("the consumer reports an impossible head or record as corrupt") {
  struct Case {
    const char* what;
    std::uint64_t head;
    std::uint32_t record_length;
    std::uint64_t max_payload;
  };
  // The consumer has consumed and released 64 bytes first (tail 64).
  const Case k = GENERATE(Case{"head behind the consumer", 56, 0, 1000},
                          Case{"head more than a ring ahead", 64 + 256 + 8, 0, 1000},
                          Case{"head unaligned", 64 + 12, 0, 1000},
                          Case{"record longer than the published bytes", 64 + 16, 9, 1000},
                          Case{"record far longer than the ring", 64 + 256, 0xffffffffu, ~0ull},
                          Case{"record over the caller's max payload", 64 + 64, 40, 39});
  INFO(k.what);
  LocalRing ring(256);
  RingProducer p = ring.producer();
  RingConsumer c = ring.consumer();
  round_trip(p, c, 56, 0);
  poke_header(ring, 64, RecordHeader{k.record_length, 1, 0});
  ring.control().head.store(k.head);
  RecordHeader h{};
  std::string out;
  CHECK(c.try_pop(&h, &out, k.max_payload) == RingStatus::kCorrupt);
  CHECK(out.size() <= 256);  // nothing was allocated on the record's say-so
}

TEST_CASE("a record that exactly fills what was published is accepted") {
  LocalRing ring(256);
  RingConsumer c = ring.consumer();
  poke_header(ring, 0, RecordHeader{9, 1, 0});
  ring.control().head.store(record_span(9));
  RecordHeader h{};
  std::string out;
  CHECK(c.try_pop(&h, &out, 9) == RingStatus::kOk);
  CHECK(out.size() == 9);
}

TEST_CASE("the producer reports an impossible tail as corrupt") {
  struct Case {
    const char* what;
    std::uint64_t tail;
  };
  // The producer has published 128 bytes and seen the consumer's tail at 64.
  const Case k = GENERATE(Case{"tail moving backwards", 56},
                          Case{"tail beyond the published head", 264}, Case{"tail unaligned", 68});
  INFO(k.what);
  LocalRing ring(256);
  RingProducer p = ring.producer();
  const std::string rec = ring_pattern(56, 2);
  for (int i = 0; i < 4; ++i) REQUIRE(p.try_push(1, 0, rec) == RingStatus::kOk);
  p.publish();
  ring.control().tail.store(64);
  REQUIRE(p.try_push(1, 0, rec) == RingStatus::kOk);  // refreshes the tail: 64
  ring.control().tail.store(k.tail);
  CHECK(p.try_push(1, 0, rec) == RingStatus::kCorrupt);
  CHECK_FALSE(p.fits(56));
}

TEST_CASE("publish asks for a wake iff the consumer had announced its sleep") {
  const bool sleeping = GENERATE(false, true);
  LocalRing ring(256);
  RingProducer p = ring.producer();
  RingConsumer c = ring.consumer();
  if (sleeping) REQUIRE(c.prepare_sleep());
  const std::uint32_t seq = ring.control().data_seq.load();
  REQUIRE(p.try_push(1, 0, "x") == RingStatus::kOk);
  CHECK(p.publish() == sleeping);
  CHECK(ring.control().data_seq.load() == seq + (sleeping ? 1 : 0));
  CHECK(ring.control().consumer_sleeping.load() == 0);
  // A publish with nothing new never wakes anyone.
  ring.control().consumer_sleeping.store(1);
  CHECK_FALSE(p.publish());
}

TEST_CASE("release asks for a wake iff the producer had announced its wait") {
  const bool waiting = GENERATE(false, true);
  LocalRing ring(256);
  RingProducer p = ring.producer();
  RingConsumer c = ring.consumer();
  const std::string rec = ring_pattern(56, 3);
  for (int i = 0; i < 4; ++i) REQUIRE(p.try_push(1, 0, rec) == RingStatus::kOk);
  p.publish();
  if (waiting) REQUIRE(p.prepare_wait(56));
  const std::uint32_t seq = ring.control().space_seq.load();
  RecordHeader h{};
  std::string out;
  REQUIRE(c.try_pop(&h, &out, 100) == RingStatus::kOk);
  CHECK(c.release() == waiting);
  CHECK(ring.control().space_seq.load() == seq + (waiting ? 1 : 0));
  CHECK(ring.control().producer_waiting.load() == 0);
  ring.control().producer_waiting.store(1);
  CHECK_FALSE(c.release());
}

TEST_CASE("prepare_sleep refuses to sleep when data is already published") {
  LocalRing ring(256);
  RingProducer p = ring.producer();
  RingConsumer c = ring.consumer();
  REQUIRE(p.try_push(1, 0, "x") == RingStatus::kOk);
  REQUIRE_FALSE(p.publish());
  CHECK_FALSE(c.prepare_sleep());
  CHECK(ring.control().consumer_sleeping.load() == 0);
}

TEST_CASE("prepare_wait refuses to wait when the record already fits") {
  LocalRing ring(256);
  RingProducer p = ring.producer();
  CHECK_FALSE(p.prepare_wait(56));
  CHECK(ring.control().producer_waiting.load() == 0);
  REQUIRE(p.prepare_wait(256));
  CHECK(ring.control().producer_waiting.load() == 1);
  p.cancel_wait();
  CHECK(ring.control().producer_waiting.load() == 0);
}

}  // namespace
}  // namespace sandpool::ipc
