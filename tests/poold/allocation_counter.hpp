// Counts the heap allocations (operator new) each thread makes, so a test can prove a code
// path's cost does not grow with something. Replaces the global operator new/delete
// (allocation_counter.cpp) for the whole test binary.
#pragma once

#include <cstdint>

namespace sandpool::testing {

// operator new calls made by the calling thread so far.
std::uint64_t allocations_on_this_thread();

}  // namespace sandpool::testing
