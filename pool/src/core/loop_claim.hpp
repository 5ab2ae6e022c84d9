// LoopClaim: the right to run a pass of the pool's loop, i.e. to touch what the loop owns (the
// PoolCore, the WorkerLinks, the loop's own fields). The loop thread holds it while it works
// and lets go of it while it is idle: while it spins for work and while it is parked in
// epoll_wait. A submitting thread that finds it free may take it (try_acquire, never blocks)
// and run one narrow pass itself, the direct hand-off, and a waiter may read its own task's
// result under it while the loop is parked, the return half (docs/architecture.md, "The
// loop's claim"); the loop takes it back (acquire, blocks) before it touches anything again.
//
// A futex word, as in Drepper's "Futexes Are Tricky" (mutex 2): 0 free, 1 held, 2 held and
// somebody may sleep in acquire(). A pass under the claim is short (a hand-off a few
// microseconds; a waiter's read at most 50 us, handed back at once when the loop wakes), so
// acquire() spins first, yielding its core, then sleeps.
//
// Thread-safety: any thread; like a mutex, released by the thread that took it. Clang's
// thread-safety analysis sees it as a capability ("loop claim").
#pragma once

#include <atomic>
#include <cstdint>

#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/ipc/wake.hpp>

namespace sandpool::core {

class CAPABILITY("loop claim") LoopClaim {
 public:
  LoopClaim() = default;
  LoopClaim(const LoopClaim&) = delete;
  LoopClaim& operator=(const LoopClaim&) = delete;

  // Returns true iff the claim was free and is now the caller's.
  bool try_acquire() TRY_ACQUIRE(true) {
    std::uint32_t free = 0;
    // acquire: what the last holder wrote before release() is visible to this one.
    return word_.compare_exchange_strong(free, 1, std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }

  // Takes the claim, waiting for its holder to let go.
  void acquire() ACQUIRE() {
    if (try_acquire()) return;
    if (ipc::spin_until([this] { return try_acquire(); }, ipc::monotonic_ns() + kSpinNs)) return;
    // Mark it contended (2) and sleep while it stays so; an exchange that returns 0 took it
    // (as contended: the release after this one pays a wake it may not need, never misses one).
    while (word_.exchange(2, std::memory_order_acquire) != 0) {
      ipc::futex_wait(&word_, 2, -1);
    }
  }

  void release() RELEASE() {
    // release: the holder's writes before it reach whoever takes the claim next.
    if (word_.exchange(0, std::memory_order_release) == 2) ipc::futex_wake(&word_, 1);
  }

  // Tells the checker that the calling thread holds the claim (a function reached only from
  // a holder that the analysis cannot follow). Not checked at run time.
  void assert_held() const ASSERT_CAPABILITY(this) {}

  // Returns true iff somebody holds the claim now (a snapshot: for tests and asserts).
  bool held() const { return word_.load(std::memory_order_relaxed) != 0; }
  // Returns true iff it is held and somebody may sleep in acquire() (a snapshot, as held()).
  bool contended() const { return word_.load(std::memory_order_relaxed) == 2; }

 private:
  static constexpr std::int64_t kSpinNs = 20'000;  // acquire()'s spin before it sleeps
  std::atomic<std::uint32_t> word_{0};
};

}  // namespace sandpool::core
