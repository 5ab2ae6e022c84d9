// JournalOpenTasks: what the task journal keeps in memory of each unfinished task
// (docs/journal.md, "What the state keeps of a task"): its id, state, submit time, the rounds
// and sizes of its live records, and its shape (pool, type and options, shared by every task
// that has the same); a task that has more of its own (an idempotency key, a `not_before`, a
// journaled start, a retry due time, attempts, more than two live records) has it in an
// OpenExtra beside. Its payload and the rest of its whole-task record stay in the log, and
// are read back from the round of that record when needed (compaction's carry, recovery,
// lookups). 48 bytes per task and 4 bytes of index per slot, where a whole JournalTask in a
// node of an unordered_map cost about 600.
//
// The tasks live in chunks of fixed size (no copy when the table grows, and no capacity
// counted that was never touched), found through an open-addressing index of 4-byte slots,
// each a position only (linear probing, backward-shift deletion): at most kMaxTasks tasks.
// Private to the journal (JournalState). Not thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <sandpool/task/task.hpp>
#include <sandpool/task/task_options.hpp>

namespace sandpool {

// One live record of a task: the round it is in and its size there.
struct LiveRecord {
  std::uint64_t seq = 0;
  std::uint32_t bytes = 0;
};

// The fields of an unfinished task that its later records (start, requeue, attempt end)
// change: what a replay sets over its whole-task record.
struct OpenSteps {
  TaskState state = TaskState::kQueued;
  std::optional<Attempt> running;
  std::int64_t retry_due_ms = 0;
  std::vector<Attempt> history;
};

// What an unfinished task has that most do not (its entry's `extra`).
struct OpenExtra {
  std::string idempotency_key;
  std::optional<std::chrono::system_clock::time_point> not_before;
  std::optional<Attempt> running;  // a journaled start
  std::int64_t retry_due_ms = 0;
  std::vector<Attempt> history;
  std::vector<LiveRecord> more_records;  // the live records after the first two

  bool empty() const {
    return idempotency_key.empty() && !not_before && !running && retry_due_ms == 0 &&
           history.empty() && more_records.empty();
  }
  void clear();
};

// What tasks share: their pool, type and options (without the idempotency key and
// `not_before`, which are each task's own).
struct TaskShape {
  std::string pool;
  std::string type;
  TaskOptions options;
  bool operator==(const TaskShape&) const = default;
};

// 48 bytes: the index's slot and this are what an unfinished task costs the journal when it
// has no extra.
struct OpenTask {
  std::uint64_t id = 0;
  std::int64_t submitted_ms = 0;
  std::uint64_t seq = 0;         // the first live record's round: its whole-task record's
  std::uint32_t seq2_after = 0;  // the second's, as the distance from the first
  std::uint32_t bytes[2] = {0, 0};
  std::uint32_t shape = 0;  // JournalOpenTasks::shape()
  std::uint32_t extra = 0;  // JournalOpenTasks::extra_of(); 0: none
  TaskState state = TaskState::kQueued;
  std::uint8_t inline_records = 0;  // 0..2
};

class JournalOpenTasks {
 public:
  // The most tasks it holds: a slot holds 1 + a position, in 32 bits (the journal refuses
  // accepts beyond TaskJournalOptions::max_unfinished, at most this).
  static constexpr std::size_t kMaxTasks = 0xFFFFFFFEu;

  // Holding at most `max_tasks` (kMaxTasks at most).
  explicit JournalOpenTasks(std::size_t max_tasks = kMaxTasks);
  ~JournalOpenTasks();
  JournalOpenTasks(const JournalOpenTasks&) = delete;
  JournalOpenTasks& operator=(const JournalOpenTasks&) = delete;

  OpenTask* find(std::uint64_t id);
  const OpenTask* find(std::uint64_t id) const;
  // A new entry for `id` (not held): no records, no shape, no extra. Holding its most
  // already (the journal's accepts are bounded below it): std::length_error.
  OpenTask& insert(std::uint64_t id);
  // Removes the entry, releasing its shape and its extra.
  void erase(std::uint64_t id);
  std::size_t size() const { return size_; }
  template <typename F>
  void for_each(F f) const {
    for (const std::uint32_t pos1 : slots_) {
      if (pos1 != 0) f(at(pos1 - 1));
    }
  }

  // Records: the task's live ones, the first being its whole-task record.
  void add_record(OpenTask& t, LiveRecord r);
  void clear_records(OpenTask& t);
  std::size_t record_count(const OpenTask& t) const {
    const OpenExtra* x = extra_of(t);
    return t.inline_records + (x != nullptr ? x->more_records.size() : 0);
  }
  LiveRecord record(const OpenTask& t, std::size_t i) const;

  // The task's extra, or null.
  const OpenExtra* extra_of(const OpenTask& t) const {
    return t.extra == 0 ? nullptr : extras_[t.extra].get();
  }
  // The task's extra, made when it has none (from a spare when there is one); and given
  // back once it holds nothing.
  OpenExtra& extra(OpenTask& t);
  void trim_extra(OpenTask& t);

  // Shapes, counted: intern() returns the shape's number and counts one more user;
  // release() counts one less and forgets the shape with its last user.
  std::uint32_t intern(const std::string& pool, const std::string& type,
                       const TaskOptions& options);
  void release(std::uint32_t shape);
  const TaskShape& shape(std::uint32_t n) const { return *shapes_[n].shape; }
  std::size_t shapes() const { return shape_ids_.size(); }

 private:
  struct ShapeHash {
    std::size_t operator()(const TaskShape& s) const;
  };
  struct ShapeRef {
    const TaskShape* shape = nullptr;  // the key in shape_ids_
    std::uint64_t users = 0;
  };
  static constexpr std::size_t kChunk = 4096;        // tasks per chunk
  static constexpr std::size_t kSpareExtras = 1024;  // extras kept for reuse at most

  OpenTask& at(std::uint32_t pos) { return chunks_[pos / kChunk][pos % kChunk]; }
  const OpenTask& at(std::uint32_t pos) const { return chunks_[pos / kChunk][pos % kChunk]; }
  std::size_t home(std::uint64_t id) const {
    return static_cast<std::size_t>((id * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  // The slot holding `id`, or the empty one where it would go (the index is never full).
  std::size_t probe(std::uint64_t id) const;
  void rehash(std::size_t slots);
  std::uint32_t take_position();
  void give_back_extra(OpenTask& t);

  // 1 + the task's position in the chunks; 0: empty. No part of the id beside it: a probe
  // compares the entry's id, which a hit reads anyway, and the index is half the size.
  std::vector<std::uint32_t> slots_;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
  std::size_t max_tasks_;
  std::vector<std::unique_ptr<OpenTask[]>> chunks_;
  std::uint32_t used_ = 0;           // positions handed out so far
  std::vector<std::uint32_t> free_;  // positions given back
  // The extras by number (0 unused), and the numbers given back (the first kSpareExtras of
  // them keep their object, cleared, for reuse).
  std::vector<std::unique_ptr<OpenExtra>> extras_;
  std::vector<std::uint32_t> free_extras_;
  std::unordered_map<TaskShape, std::uint32_t, ShapeHash> shape_ids_;
  std::vector<ShapeRef> shapes_;
  std::vector<std::uint32_t> free_shapes_;
  TaskShape probe_shape_;  // intern()'s key, reused
};

}  // namespace sandpool
