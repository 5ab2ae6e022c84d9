// For the tests' allocation probes (tests/ipc/allocation_probe.cpp,
// tests/poold/allocation_counter.cpp): how they see the binary's allocations.
//
// clang's TSan runtime defines every operator new and delete itself, in an object it links
// whole: a replacement clashes with it at link time. There (SP_ALLOCATIONS_BY_HOOK) a probe
// listens to the sanitizer's allocator instead, which calls a hook on every allocation
// (operator new and malloc alike) on the allocating thread. Everywhere else, a probe replaces
// the operators.
#pragma once

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SP_ALLOCATIONS_BY_HOOK 1
#include <sanitizer/allocator_interface.h>
#endif
#endif
