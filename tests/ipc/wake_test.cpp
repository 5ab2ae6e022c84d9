// Futex doorbells, the eventfd, the manager's socket-pair doorbell, and the monotonic clock.
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include <catch2/catch.hpp>

#include <sandpool/base/unique_fd.hpp>
#include <sandpool/ipc/wake.hpp>

namespace sandpool::ipc {
namespace {

constexpr std::int64_t kMs = 1000000;

TEST_CASE("futex_wait returns at once, as woken, when the word already changed") {
  std::atomic<std::uint32_t> word{5};
  CHECK(futex_wait(&word, 4, 10000 * kMs));
}

TEST_CASE("futex_wait gives up after its timeout when nobody wakes it") {
  const std::int64_t timeout = GENERATE(std::int64_t{0}, 20 * kMs);
  std::atomic<std::uint32_t> word{0};
  const std::int64_t start = monotonic_ns();
  CHECK_FALSE(futex_wait(&word, 0, timeout));
  CHECK(monotonic_ns() - start >= timeout);
}

// One memfd page mapped twice: the same futex word at two addresses, as the manager and a
// worker see it. Only a shared (non-private) futex matches a waiter and a waker across them.
class TwoMappings {
 public:
  TwoMappings() {
    fd_.reset(::memfd_create("futex-test", MFD_CLOEXEC));
    REQUIRE(fd_.valid());
    REQUIRE(::ftruncate(fd_.get(), 4096) == 0);
    a_ = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    b_ = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    REQUIRE(a_ != MAP_FAILED);
    REQUIRE(b_ != MAP_FAILED);
  }
  ~TwoMappings() {
    ::munmap(a_, 4096);
    ::munmap(b_, 4096);
  }
  std::atomic<std::uint32_t>* a() { return static_cast<std::atomic<std::uint32_t>*>(a_); }
  std::atomic<std::uint32_t>* b() { return static_cast<std::atomic<std::uint32_t>*>(b_); }

 private:
  UniqueFd fd_;
  void* a_ = MAP_FAILED;
  void* b_ = MAP_FAILED;
};

long raw_futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t val, const timespec* ts) {
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op, val, ts, nullptr, 0);
}

TEST_CASE("futex_wait blocks on the shared futex, so a wake through another mapping reaches it",
          "[threaded]") {
  TwoMappings m;
  std::atomic<int> result{-1};
  std::thread waiter([&] { result = futex_wait(m.a(), 0, 20000 * kMs) ? 1 : 0; });
  // The word never changes: only a real wake can end the wait before its timeout. Retry
  // until the kernel reports it woke someone, i.e. the waiter was queued under the key a
  // shared wake on the other address computes.
  const std::int64_t deadline = monotonic_ns() + 20000 * kMs;
  long woken = 0;
  while (woken == 0 && monotonic_ns() < deadline) {
    woken = raw_futex(m.b(), FUTEX_WAKE, 1, nullptr);
    if (woken == 0) ::sched_yield();
  }
  waiter.join();
  CHECK(woken == 1);
  CHECK(result == 1);
}

TEST_CASE("futex_wake wakes a shared-futex waiter through another mapping", "[threaded]") {
  TwoMappings m;
  std::atomic<bool> done{false};
  long rc = -1;
  int err = 0;
  std::thread waiter([&] {
    const timespec ts{20, 0};
    rc = raw_futex(m.a(), FUTEX_WAIT, 0, &ts);
    err = errno;
    done = true;
  });
  const std::int64_t deadline = monotonic_ns() + 30000 * kMs;
  while (!done && monotonic_ns() < deadline) {
    futex_wake(m.b(), 1);
    ::sched_yield();
  }
  waiter.join();
  INFO("errno " << err);
  CHECK(rc == 0);  // woken, not ETIMEDOUT
}

TEST_CASE("an eventfd counts signals until drained and is non-blocking and close-on-exec") {
  Result<EventFd> created = EventFd::create();
  REQUIRE(created.is_ok());
  const EventFd& ev = created.value();
  CHECK((::fcntl(ev.fd(), F_GETFL) & O_NONBLOCK) != 0);
  CHECK((::fcntl(ev.fd(), F_GETFD) & FD_CLOEXEC) != 0);
  CHECK(ev.drain() == 0);

  pollfd p{ev.fd(), POLLIN, 0};
  CHECK(::poll(&p, 1, 0) == 0);
  ev.signal();
  ev.signal();
  CHECK(::poll(&p, 1, 0) == 1);
  CHECK(ev.drain() == 2);
  CHECK(ev.drain() == 0);
  CHECK(::poll(&p, 1, 0) == 0);
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

// The worker's end, as the worker host holds it once the spawn is done.
DoorbellRinger take_worker_end(Doorbell& bell) {
  DoorbellRinger ringer = DoorbellRinger::adopt(::fcntl(bell.worker_fd(), F_DUPFD_CLOEXEC, 3));
  bell.release_worker_end();
  return ringer;
}

TEST_CASE("a doorbell's rings wake the manager's end, which drains them all at once") {
  Result<Doorbell> created = Doorbell::create();
  REQUIRE(created.is_ok());
  Doorbell& bell = created.value();
  CHECK((::fcntl(bell.fd(), F_GETFD) & FD_CLOEXEC) != 0);
  CHECK((::fcntl(bell.worker_fd(), F_GETFD) & FD_CLOEXEC) != 0);
  const DoorbellRinger ringer = take_worker_end(bell);
  CHECK(bell.worker_fd() == -1);
  CHECK_FALSE(readable(bell.fd()));
  CHECK(bell.drain());                     // nothing pending is not the end
  const int rings = GENERATE(1, 3, 1000);  // 1000: more than one drain buffer
  for (int i = 0; i < rings; ++i) ringer.ring();
  CHECK(readable(bell.fd()));
  CHECK(bell.drain());
  CHECK_FALSE(readable(bell.fd()));
}

TEST_CASE("nothing the worker does to its end makes the manager's drain block or miss a ring",
          "[threaded]") {
  // The attack on a shared eventfd: clear O_NONBLOCK on the worker's description and park a
  // reader on it to steal the count between the manager's poll and its read. Here the
  // worker's end is a description of its own, and it can only read what the manager sends.
  Result<Doorbell> created = Doorbell::create();
  REQUIRE(created.is_ok());
  Doorbell& bell = created.value();
  const DoorbellRinger ringer = take_worker_end(bell);
  REQUIRE(::fcntl(ringer.fd(), F_SETFL, 0) == 0);
  CHECK((::fcntl(bell.fd(), F_GETFL) & O_NONBLOCK) != 0);  // the manager's flag is its own
  std::atomic<ssize_t> stolen{-2};
  std::thread thief([&] {
    char byte = 0;
    stolen = ::read(ringer.fd(), &byte, 1);  // blocks: nothing ever comes this way
  });
  for (int round = 0; round < 100; ++round) {
    ringer.ring();
    REQUIRE(readable(bell.fd()));
    CHECK(bell.drain());  // returns: MSG_DONTWAIT, whatever the flags say
    CHECK_FALSE(readable(bell.fd()));
  }
  CHECK(bell.drain());  // and again with nothing pending: still no block
  CHECK(stolen.load() == -2);
  const char release = 0;  // the test (not the manager) lets the thief go
  REQUIRE(::send(bell.fd(), &release, 1, MSG_DONTWAIT) == 1);
  thief.join();
  CHECK(stolen.load() == 1);
}

TEST_CASE("a worker that closes or shuts down its end leaves a doorbell that drains as ended") {
  Result<Doorbell> created = Doorbell::create();
  REQUIRE(created.is_ok());
  Doorbell& bell = created.value();
  DoorbellRinger ringer = take_worker_end(bell);
  ringer.ring();
  const bool shut_down = GENERATE(false, true);
  if (shut_down) {
    REQUIRE(::shutdown(ringer.fd(), SHUT_WR) == 0);
  } else {
    ringer = DoorbellRinger();  // closes it
  }
  CHECK(bell.drain());  // the ring it left first
  // Then the end: the manager's end stays readable from now on, which is why the caller
  // must stop polling it.
  CHECK(readable(bell.fd()));
  CHECK_FALSE(bell.drain());
  CHECK(readable(bell.fd()));
  CHECK_FALSE(bell.drain());
}

TEST_CASE("monotonic time moves forward and agrees with CLOCK_MONOTONIC") {
  timespec ts{};
  REQUIRE(::clock_gettime(CLOCK_MONOTONIC, &ts) == 0);
  const std::int64_t before = ts.tv_sec * 1000000000ll + ts.tv_nsec;
  const std::int64_t a = monotonic_ns();
  const std::int64_t b = monotonic_ns();
  CHECK(before <= a);
  CHECK(a <= b);
  CHECK(monotonic_ms() >= a / 1000000);
}

}  // namespace
}  // namespace sandpool::ipc
