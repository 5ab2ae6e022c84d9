// The task journal's round log (docs/journal.md, "The round log"): each transaction of the
// journal appends rows to journal_rounds whose body is a sequence of records. A record is a
// whole task (its accept, its end, or a copy carried forward by compaction) or one step of an
// unfinished task (an attempt's start, its end, a requeue). Replaying every body in sequence
// order rebuilds the journal's state; a record about a task the replay does not hold
// unfinished is a no-op. Private to the journal's sources.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <sandpool/ipc/byte_archive.hpp>
#include <sandpool/status.hpp>
#include <sandpool/task_journal.hpp>

namespace sandpool::journal_log {

// The first byte of every body: the format of the records after it.
inline constexpr std::uint8_t kFormat = 1;

enum class RecordKind : std::uint8_t { kTask = 1, kStart = 2, kRequeue = 3, kAttempt = 4 };

// One decoded record.
struct Record {
  RecordKind kind = RecordKind::kTask;
  JournalTask task;      // kTask: the whole task as it stands
  std::uint64_t id = 0;  // the others: the task they are about
  Attempt attempt;       // kStart: number, worker_pid, started_ms; kAttempt: the ended attempt
  TaskState next = TaskState::kQueued;  // kAttempt: kQueued or kRetryWait
  std::int64_t retry_due_ms = 0;        // kAttempt into kRetryWait
  std::int64_t at_ms = 0;               // wall clock when the step was queued
  std::size_t bytes = 0;                // its size in the body
};

// Appends records to a body; the caller owns the string and inserts it.
class BodyWriter {
 public:
  // Empties `out` (keeping its capacity) and writes the format byte.
  void reset(std::string* out);
  void task(const JournalTask& t);
  void start(std::uint64_t id, const Attempt& start, std::int64_t at_ms);
  void requeue(std::uint64_t id, std::int64_t at_ms);
  void attempt(std::uint64_t id, const Attempt& ended, TaskState next, std::int64_t retry_due_ms,
               std::int64_t at_ms);
  std::size_t size() const { return out_ == nullptr ? 0 : out_->size(); }

 private:
  ipc::wire::StringOutputArchive ar_;
  std::string* out_ = nullptr;
};

// Calls on_record for each record of `body`, in order. A malformed body (a short record, an
// unknown kind or enum value, an unknown format) is kInternal naming the record's index; the
// records before it were delivered.
Status decode(std::string_view body, const std::function<void(Record&)>& on_record);

}  // namespace sandpool::journal_log
