#include "allocation_counter.hpp"

#include <cstdlib>
#include <new>

#include "allocation_hooks.hpp"

namespace sandpool::testing {
namespace {
thread_local std::uint64_t t_allocations = 0;  // constant-initialised: safe inside new
}

std::uint64_t allocations_on_this_thread() { return t_allocations; }

}  // namespace sandpool::testing

#ifdef SP_ALLOCATIONS_BY_HOOK
namespace {
void on_malloc(const volatile void*, std::size_t) { ++sandpool::testing::t_allocations; }
void on_free(const volatile void*) {}
[[maybe_unused]] const int g_hooked = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}  // namespace
#else
// Plain malloc/free underneath, so the sanitizers' interceptors still see every block. Every
// non-aligned form is replaced (a form left to the runtime would pair its allocation with
// our free); the aligned forms stay the runtime's, as a consistent pair.
namespace {
void* counted_malloc(std::size_t n) noexcept {
  ++sandpool::testing::t_allocations;
  return std::malloc(n == 0 ? 1 : n);
}
void* counted_new(std::size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_new(n); }
void* operator new[](std::size_t n) { return counted_new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif  // SP_ALLOCATIONS_BY_HOOK
