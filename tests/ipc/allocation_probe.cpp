#include "allocation_probe.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace sandpool::ipc::testing {
namespace {
std::atomic<std::size_t> g_largest{0};
}

void reset_largest_allocation() { g_largest.store(0, std::memory_order_relaxed); }
std::size_t largest_allocation() { return g_largest.load(std::memory_order_relaxed); }

}  // namespace sandpool::ipc::testing

// Plain malloc/free underneath, so the sanitizers' interceptors still see every block.
void* operator new(std::size_t n) {
  std::size_t seen = sandpool::ipc::testing::g_largest.load(std::memory_order_relaxed);
  while (n > seen && !sandpool::ipc::testing::g_largest.compare_exchange_weak(
                         seen, n, std::memory_order_relaxed)) {
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
