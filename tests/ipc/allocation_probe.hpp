// Records the largest single heap allocation the test binary makes, so a test can prove
// that hostile input did not make the code under test allocate what the input claimed.
// Replaces the global operator new/delete (allocation_probe.cpp) for the whole binary.
#pragma once

#include <cstddef>

namespace sandpool::ipc::testing {

// Forgets allocations made so far.
void reset_largest_allocation();
// Returns the largest operator new request since the last reset.
std::size_t largest_allocation();

}  // namespace sandpool::ipc::testing
