// The region between two real processes (fork): an honest worker, a hostile one that
// scribbles on everything it can write, and one killed in the middle of a message.
// Synchronisation is by events only (eventfd, futexes, waitpid), never by sleeping.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <sandpool/ipc/region.hpp>

#include "allocation_probe.hpp"
#include "blocking_channel.hpp"
#include "forked_child.hpp"
#include "numbered_messages.hpp"

namespace sandpool::ipc {
namespace {

using testing::BlockingSender;
using testing::ForkedChild;
using testing::NumberedMessages;

constexpr std::int64_t kSecond = 1'000'000'000;

SharedRegion make_cross_process_region(RegionConfig config) {
  Result<SharedRegion> r = SharedRegion::create(config);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

EventFd make_eventfd() {
  Result<EventFd> ev = EventFd::create();
  REQUIRE(ev.is_ok());
  return std::move(ev).value();
}

// The worker's side of a region: attached through a copy of the fd it inherited.
Result<SharedRegion> attach_in_child(const SharedRegion& region) {
  return SharedRegion::attach(::dup(region.fd()));
}

// The manager's way of waiting for a worker: announce the sleep on the result ring, then
// poll the eventfd the worker signals. Returns false iff the poll ran into `timeout_ms`.
bool manager_wait(MessageReceiver& rx, const EventFd& doorbell, int timeout_ms) {
  bool woken = true;
  if (rx.ring().prepare_sleep()) {
    pollfd p{doorbell.fd(), POLLIN, 0};
    woken = ::poll(&p, 1, timeout_ms) == 1;
    rx.ring().cancel_sleep();
  }
  doorbell.drain();
  return woken;
}

// Gives consumed space back; wakes the worker if it waits for it (a shared futex on the
// worker's mapping of the same word).
void manager_release(MessageReceiver& rx) {
  if (rx.release()) futex_wake(&rx.ring().control()->space_seq);
}

TEST_CASE("every message a worker process sends arrives once and in order") {
  constexpr std::uint64_t kMessages = 200'000;
  SharedRegion region = make_cross_process_region(RegionConfig{4096, 8192, 1 << 20});
  const EventFd doorbell = make_eventfd();
  const NumberedMessages stream(5 * region.result_ring_bytes() + 3);

  ForkedChild child([&] {
    Result<SharedRegion> worker = attach_in_child(region);
    if (!worker) return 2;
    BlockingSender tx(MessageSender(worker->result_producer()), [&] { doorbell.signal(); });
    std::string m;
    for (std::uint64_t i = 0; i < kMessages; ++i) {
      stream.build(i, &m);
      if (!tx.send(stream.kind_of(i), m, /*batch=*/4)) return 3;
    }
    if (!tx.flush()) return 3;
    return tx.stats().timeouts == 0 ? 0 : 4;
  });
  REQUIRE(child.started());

  MessageReceiver rx(region.result_consumer(), region.max_message());
  std::uint64_t received = 0, wrong = 0, lost_wakes = 0;
  std::uint16_t kind = 0;
  std::string m;
  RingStatus s = RingStatus::kOk;
  const std::int64_t deadline = monotonic_ns() + 120 * kSecond;
  while (received < kMessages && monotonic_ns() < deadline) {
    s = rx.next(&kind, &m);
    if (s == RingStatus::kCorrupt) break;
    if (s == RingStatus::kOk) {
      if (!stream.is_message(received, kind, m)) ++wrong;
      ++received;
      if (received % 32 == 0) manager_release(rx);
      continue;
    }
    manager_release(rx);
    if (!manager_wait(rx, doorbell, 10000)) ++lost_wakes;
  }
  const int status = child.wait();
  CHECK(s != RingStatus::kCorrupt);
  CHECK(received == kMessages);
  CHECK(wrong == 0);
  CHECK(lost_wakes == 0);
  CHECK(rx.next(&kind, &m) == RingStatus::kEmpty);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // 3: the worker saw corruption, 4: it lost a wake
}

// xorshift64*: the hostile worker's choices, reproducible from the seed Catch reports.
class Chaos {
 public:
  explicit Chaos(std::uint64_t seed) : s_(seed | 1) {}
  std::uint64_t next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 2685821657736338717ull;
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }

 private:
  std::uint64_t s_;
};

// Mostly behaves like a worker that writes plausible records (right positions, honest
// lengths, random kinds and fragment flags, so the manager gets deep into reassembly), and
// now and then scribbles on anything it can write: the header (including the geometry the
// manager must never re-read), the result ring's head, tail and doorbells, record headers
// and payload bytes anywhere in the ring. Never returns.
[[noreturn]] void scribble(const SharedRegion& worker, std::uint64_t seed) {
  Chaos rng(seed);
  RegionHeader* h = worker.header();
  RingControl* ctl = &h->result_ring;
  auto* header_bytes = reinterpret_cast<volatile unsigned char*>(h);
  const std::uint64_t cap = worker.result_ring_bytes();
  // Read before the first scribble, while the header still holds the truth.
  std::byte* data = reinterpret_cast<std::byte*>(h) + h->result_ring_offset;
  std::uint64_t head = 0;
  for (;;) {
    // A plausible record, published once the manager has left room for it. Only then is
    // the dice rolled again, so the mischief rate follows the manager's pace.
    RecordHeader r{static_cast<std::uint32_t>(rng.below(rng.below(8) == 0 ? cap / 2 : 64)),
                   static_cast<std::uint16_t>(rng.below(512) == 0 ? 18 : 17),
                   static_cast<std::uint16_t>(rng.below(4) == 0 ? kRecordMore : 0)};
    // Bounded: after its own scribbles on the tail the room may never show up, and a
    // worker that overwrites unread records is just more hostility.
    for (int spin = 0;
         spin < (1 << 16) &&
         head + record_span(r.length) - ctl->tail.load(std::memory_order_acquire) > cap;
         ++spin) {
      testing::cpu_relax();
    }
    std::memcpy(data + (head & (cap - 1)), &r, sizeof r);
    head += record_span(r.length);
    ctl->head.store(head, std::memory_order_release);

    const std::uint64_t roll = rng.below(1024);
    if (roll >= 8) continue;
    switch (roll) {
      case 0:  // a record header anywhere, with any length
        std::memcpy(data + 8 * rng.below(cap / 8), &roll, sizeof roll);
        break;
      case 1:  // payload noise
        data[rng.below(cap)] = static_cast<std::byte>(rng.next());
        break;
      case 2:  // any head at all
        ctl->head.store(rng.next() >> rng.below(64), std::memory_order_release);
        break;
      case 3:  // a head a little off
        ctl->head.store(head + rng.below(2 * cap) - cap, std::memory_order_release);
        break;
      case 4:  // the manager's tail, as if the worker could move it
        ctl->tail.store(rng.next() >> rng.below(64), std::memory_order_relaxed);
        break;
      case 5:  // any byte of the header: geometry, heartbeat, doorbells, task ring
        header_bytes[rng.below(sizeof(RegionHeader))] = static_cast<unsigned char>(rng.next());
        break;
      case 6:
        ctl->consumer_sleeping.store(static_cast<std::uint32_t>(rng.next()));
        ctl->producer_waiting.store(static_cast<std::uint32_t>(rng.next()));
        break;
      default: {  // a record header with a random length, kind and flags where the next goes
        const std::uint64_t junk = rng.next();
        std::memcpy(data + (head & (cap - 1)), &junk, sizeof junk);
        break;
      }
    }
  }
}

TEST_CASE(
    "a worker scribbling on the whole region makes the manager report corrupt, nothing worse") {
  const std::uint64_t seed = GENERATE(take(4, random(1ull, ~0ull)));
  INFO("seed " << seed);
  constexpr std::uint64_t kMaxMessage = std::uint64_t{64} << 10;
  SharedRegion region = make_cross_process_region(RegionConfig{4096, 4096, kMaxMessage});
  const std::uint64_t cap = region.result_ring_bytes();

  ForkedChild child([&]() -> int {
    Result<SharedRegion> worker = attach_in_child(region);
    if (!worker) return 2;
    scribble(*worker, seed);
  });
  REQUIRE(child.started());

  MessageReceiver rx(region.result_consumer(), kMaxMessage);
  testing::reset_largest_allocation();
  std::uint64_t iterations = 0, messages = 0;
  RingStatus s = RingStatus::kEmpty;
  std::uint16_t kind = 0;
  std::string m;
  const std::int64_t deadline = monotonic_ns() + 30 * kSecond;
  for (; iterations < 50'000'000; ++iterations) {
    s = rx.next(&kind, &m);
    if (s == RingStatus::kCorrupt) break;
    if (s == RingStatus::kOk) ++messages;
    manager_release(rx);
    if (iterations % 1024 == 0 && monotonic_ns() > deadline) break;
  }
  const int status = child.kill();
  INFO(iterations << " iterations, " << messages << " messages taken before the end");
  CHECK(s == RingStatus::kCorrupt);
  CHECK(rx.next(&kind, &m) == RingStatus::kCorrupt);  // and it stays corrupt
  // Bounded by what the manager configured, never by what the worker claimed: one record
  // (at most a ring) and one message under reassembly (string growth may double it).
  CHECK(testing::largest_allocation() <= 2 * kMaxMessage + cap);
  // The worker was still scribbling when killed: the manager's survival was not luck.
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  // The manager's own geometry never moved, whatever the header says now.
  CHECK(region.result_ring_bytes() == cap);
  CHECK(region.max_message() == kMaxMessage);
}

TEST_CASE("a worker killed in the middle of a fragmented message never yields a partial one") {
  SharedRegion region = make_cross_process_region(RegionConfig{4096, 4096, 1 << 20});
  const std::uint64_t cap = region.result_ring_bytes();
  const EventFd doorbell = make_eventfd();
  const std::string whole = std::string(64 * cap, 'w');  // 256 fragments: cannot finish

  ForkedChild child([&] {
    Result<SharedRegion> worker = attach_in_child(region);
    if (!worker) return 2;
    BlockingSender tx(MessageSender(worker->result_producer()), [&] { doorbell.signal(); });
    // Two complete messages, then one that blocks on space until the manager kills us.
    if (!tx.send(17, "first") || !tx.send(17, "second") || !tx.send(17, whole)) return 3;
    return 4;  // unreachable unless the manager let the whole message through
  });
  REQUIRE(child.started());

  MessageReceiver rx(region.result_consumer(), region.max_message());
  std::uint16_t kind = 0;
  std::string m;
  std::vector<std::string> got;
  const std::int64_t deadline = monotonic_ns() + 60 * kSecond;
  // Take the small ones and a few rings' worth of the big one's fragments, then kill.
  while (rx.ring().position() < 3 * cap && monotonic_ns() < deadline) {
    const RingStatus s = rx.next(&kind, &m);
    REQUIRE(s != RingStatus::kCorrupt);
    if (s == RingStatus::kOk) {
      got.push_back(m);
      continue;
    }
    manager_release(rx);
    manager_wait(rx, doorbell, 1000);
  }
  REQUIRE(rx.ring().position() >= 3 * cap);
  const int status = child.kill();
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK(got == std::vector<std::string>{"first", "second"});

  // Whatever fragments it had published are read to the end, and still nothing comes out.
  for (int i = 0; i < 1000; ++i) {
    const RingStatus s = rx.next(&kind, &m);
    REQUIRE(s == RingStatus::kEmpty);
    manager_release(rx);
  }
  CHECK(rx.ring().position() == rx.ring().control()->head.load());
  CHECK(rx.ring().position() < whole.size());
}

}  // namespace
}  // namespace sandpool::ipc
