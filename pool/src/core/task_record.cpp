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

TaskResult TaskRecord::fresh_account() const {
  TaskResult r;
  r.id = id;
  r.type = type;
  if (auto nb = opts.not_before()) {
    r.not_before_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(nb->time_since_epoch()).count();
  }
  r.tenant = opts.tenant();
  return r;
}

TaskResult& TaskRecord::account() {
  if (!account_) account_ = std::make_unique<TaskResult>(fresh_account());
  return *account_;
}

TaskResult TaskRecord::account_copy() const { return account_ ? *account_ : fresh_account(); }

}  // namespace sandpool::core
