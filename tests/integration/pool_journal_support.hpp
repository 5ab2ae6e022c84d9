// What the tests of a Pool on a journal share: a store with a task journal in a directory of
// the test's, and a pool "jobs" of the sleep plugin on it.
#pragma once

#include <chrono>
#include <memory>

#include <sandpool/pool/pool_options.hpp>

#include "../manager/task_journal_support.hpp"
#include "test_support.hpp"

namespace sandpool::testing {

inline std::shared_ptr<DeadLetterStore> journaled_store(
    const TempDir& dir, std::chrono::milliseconds busy_timeout = std::chrono::seconds(1)) {
  auto o = journal_options_in(dir.state_dir());
  o.busy_timeout = busy_timeout;
  return open_store(std::move(o));
}

// One worker running one task at a time: a second task waits in the queue.
inline PoolOptions sleep_pool(std::shared_ptr<DeadLetterStore> store) {
  PoolOptions o = pool_options("sleep", 1);
  o.name = "jobs";
  o.concurrency = 1;
  o.dead_letter_store = std::move(store);
  return o;
}

}  // namespace sandpool::testing
