#include "core/task_record.hpp"

namespace sandpool::core {
namespace {

// Enough that two threads rarely meet on one (the loop writes one record's account while a
// Ticket copies another's), each on its own cache line.
constexpr std::size_t kRecordLocks = 64;
struct alignas(64) RecordLock {
  Mutex mu;
};
RecordLock record_locks[kRecordLocks];

}  // namespace

Mutex& record_lock(std::uint64_t id) { return record_locks[id % kRecordLocks].mu; }

}  // namespace sandpool::core
