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
#include <utility>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/ipc/byte_archive.hpp>
#include <sandpool/store/task_journal.hpp>

namespace sandpool::journal_log {

// The first byte of every body: the format of the records after it.
// Format 2 is written; format 1 (fixed-width fields, before 2026-11-27) is still read.
inline constexpr std::uint8_t kFormat = 2;
inline constexpr std::size_t kHeaderBytes = 9;  // format 2: the format byte, an i64 base time

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

// Appends records to a body, in format 2; the caller owns the string and inserts it.
class BodyWriter {
 public:
  // Empties `out` (keeping its capacity) and writes the header: the format byte and the
  // base time (set by the first time a record holds).
  void reset(std::string* out);
  void task(const JournalTask& t);
  void start(std::uint64_t id, const Attempt& start, std::int64_t at_ms);
  void requeue(std::uint64_t id, std::int64_t at_ms);
  void attempt(std::uint64_t id, const Attempt& ended, TaskState next, std::int64_t retry_due_ms,
               std::int64_t at_ms);
  std::size_t size() const { return out_ == nullptr ? 0 : out_->size(); }
  bool has_records() const { return size() > kHeaderBytes; }

 private:
  void varint(std::uint64_t v);
  void signed_varint(std::int64_t v);
  void time(std::int64_t ms);
  void str(std::string_view s);
  void ref(std::string_view s);  // a string of the body's table
  void attempt_fields(const Attempt& a);

  std::string* out_ = nullptr;
  std::int64_t base_ = 0;
  bool has_base_ = false;
  std::vector<std::pair<std::size_t, std::size_t>> table_;  // (offset, length) in *out_
};

// Calls on_record for each record of `body`, in order. A malformed body (a short record, an
// unknown kind or enum value, an unknown format) is kInternal naming the record's index; the
// records before it were delivered.
Status decode(std::string_view body, const std::function<void(Record&)>& on_record);

}  // namespace sandpool::journal_log
