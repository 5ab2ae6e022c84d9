// Helpers shared by the Redis tests: waiting for a state Redis or a node reaches (Redis has no
// event for it, so it is polled).
#pragma once

#include <chrono>
#include <thread>

namespace sandpool::testing {

// Polls `done` every 10 ms until it holds (true) or `patience` passes (false).
template <class Done>
bool eventually(Done done, std::chrono::milliseconds patience = std::chrono::seconds(60)) {
  const auto until = std::chrono::steady_clock::now() + patience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace sandpool::testing
