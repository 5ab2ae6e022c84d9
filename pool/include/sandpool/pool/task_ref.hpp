// TaskPtr: a counted handle on one task's record (core::TaskRecord), the pool's own
// references and a Ticket's alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace sandpool::core {

struct TaskRecord;

// The record's count; defined beside it (task_record.cpp). release_record destroys the
// record, and frees its one allocation, when the last handle lets go.
void retain_record(TaskRecord* rec) noexcept;
void release_record(TaskRecord* rec) noexcept;
std::uint32_t record_refs(const TaskRecord* rec) noexcept;

// Shared ownership of a record like std::shared_ptr's, in 8 bytes and without a control
// block: the count lives in the record, which is one allocation with its type and payload
// (TaskRecord::make, docs/performance.md "Memory per task"). Copies may be made and dropped
// on any thread; the record they point at follows its own rules (task_record.hpp).
class TaskPtr {
 public:
  TaskPtr() noexcept = default;
  TaskPtr(std::nullptr_t) noexcept {}  // NOLINT(google-explicit-constructor): like shared_ptr
  // Takes over a reference the caller holds (TaskRecord::make's first).
  static TaskPtr adopt(TaskRecord* rec) noexcept {
    TaskPtr p;
    p.rec_ = rec;
    return p;
  }
  TaskPtr(const TaskPtr& o) noexcept : rec_(o.rec_) {
    if (rec_ != nullptr) retain_record(rec_);
  }
  TaskPtr(TaskPtr&& o) noexcept : rec_(std::exchange(o.rec_, nullptr)) {}
  TaskPtr& operator=(const TaskPtr& o) noexcept {
    TaskPtr(o).swap(*this);
    return *this;
  }
  TaskPtr& operator=(TaskPtr&& o) noexcept {
    TaskPtr(std::move(o)).swap(*this);
    return *this;
  }
  ~TaskPtr() {
    if (rec_ != nullptr) release_record(rec_);
  }

  void swap(TaskPtr& o) noexcept { std::swap(rec_, o.rec_); }
  void reset() noexcept { TaskPtr().swap(*this); }
  TaskRecord* get() const noexcept { return rec_; }
  TaskRecord* operator->() const noexcept { return rec_; }
  TaskRecord& operator*() const noexcept { return *rec_; }
  explicit operator bool() const noexcept { return rec_ != nullptr; }
  // How many handles share the record (for tests).
  long use_count() const noexcept { return rec_ != nullptr ? record_refs(rec_) : 0; }

  friend bool operator==(const TaskPtr& a, const TaskPtr& b) noexcept { return a.rec_ == b.rec_; }
  friend bool operator==(const TaskPtr& a, std::nullptr_t) noexcept { return a.rec_ == nullptr; }

 private:
  TaskRecord* rec_ = nullptr;
};

}  // namespace sandpool::core
