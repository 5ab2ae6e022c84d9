#include "allocation_probe.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

#include "allocation_hooks.hpp"

namespace sandpool::ipc::testing {
namespace {
std::atomic<std::size_t> g_largest{0};
}

void reset_largest_allocation() { g_largest.store(0, std::memory_order_relaxed); }
std::size_t largest_allocation() { return g_largest.load(std::memory_order_relaxed); }

}  // namespace sandpool::ipc::testing

namespace {
void note_allocation(std::size_t n) noexcept {
  std::size_t seen = sandpool::ipc::testing::g_largest.load(std::memory_order_relaxed);
  while (n > seen && !sandpool::ipc::testing::g_largest.compare_exchange_weak(
                         seen, n, std::memory_order_relaxed)) {
  }
}
}  // namespace

#ifdef SP_ALLOCATIONS_BY_HOOK
namespace {
void on_malloc(const volatile void*, std::size_t n) { note_allocation(n); }
void on_free(const volatile void*) {}
[[maybe_unused]] const int g_hooked = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}  // namespace
#else
// Plain malloc/free underneath, so the sanitizers' interceptors still see every block. Every
// non-aligned form is replaced: a form left to the runtime (ASan has its own) would pair its
// allocation with our free and look like a mismatch. The aligned forms stay the runtime's,
// as a consistent pair.
namespace {
void* probed_malloc(std::size_t n) noexcept {
  note_allocation(n);
  return std::malloc(n == 0 ? 1 : n);
}
void* probed_new(std::size_t n) {
  if (void* p = probed_malloc(n)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return probed_new(n); }
void* operator new[](std::size_t n) { return probed_new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return probed_malloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return probed_malloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#endif  // SP_ALLOCATIONS_BY_HOOK
