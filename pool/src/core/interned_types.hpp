// Task types stored once, so that a task's record names its type by a 4-byte index instead of
// carrying a copy of it (docs/performance.md, "The task type interned"): the record's size no
// longer grows with the type's length.
//
// The names live in one table for the process, not one per pool: a record outlives its pool
// (a Ticket, a finished task kept for `task ID`, an end written after the pool went), and
// its type must stay readable without a count on the table per task. A pool interns the
// types it serves when it learns them (TaskTypes) and looks a submitted type up among those
// only, so the table holds only served types (a plugin declares at most 64 of at most 128
// bytes, validate_declared_types; a config names its own): a type a client makes up is
// refused before it could reach the table. The table is bounded all the same
// (kMaxInternedTypes names of at most kMaxInternedTypeBytes): past that a type is not
// interned and its records keep it inline, as every record did before.
//
// Thread-safety: intern_type() takes a lock (at a pool's start, rarely); interned_type() takes
// none. An index is only known from intern_type(), whose writes happen before its return, and
// travels to other threads with the pool's TaskTypes or a record, both published with
// synchronization: the reader of a slot never races its writer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandpool::core {

inline constexpr std::uint32_t kMaxInternedTypes = 4096;
inline constexpr std::size_t kMaxInternedTypeBytes = 128;  // kMaxTypeLength, a declared type's

namespace detail {
// The interned names by index, each valid for the process's lifetime once written.
extern std::string_view interned_type_names[kMaxInternedTypes];
}  // namespace detail

// The index of `type` in the process's table, interned now if it is not yet; nullopt when
// `type` is empty, longer than kMaxInternedTypeBytes, or new to a full table.
std::optional<std::uint32_t> intern_type(std::string_view type);

// How many names the table holds.
std::uint32_t interned_type_count();

// The name interned at `index` (an index intern_type() returned); valid for the process's
// lifetime.
inline std::string_view interned_type(std::uint32_t index) {
  return detail::interned_type_names[index];
}

// A task's type as TaskRecord::make takes it: interned (its index), or its name, which the
// record copies. Implicit from a name: tests and records of types no pool serves (a task
// recovered from the journal after its pool's types changed) keep theirs inline.
class TaskType {
 public:
  TaskType(std::string_view name) : name_(name) {}    // NOLINT(google-explicit-constructor)
  TaskType(const char* name) : name_(name) {}         // NOLINT(google-explicit-constructor)
  TaskType(const std::string& name) : name_(name) {}  // NOLINT(google-explicit-constructor)
  static TaskType interned(std::uint32_t index) { return TaskType(index); }

  // The index; nullopt for a name copied into the record.
  std::optional<std::uint32_t> index() const { return index_; }
  // The name (interned or not); valid while the name given lives, or for ever if interned.
  std::string_view name() const { return index_ ? interned_type(*index_) : name_; }

 private:
  explicit TaskType(std::uint32_t index) : index_(index) {}
  std::optional<std::uint32_t> index_;
  std::string_view name_;
};

// The task types a pool serves, each interned once when the set is made. Immutable once made:
// a pool replaces its TaskTypes (on its loop thread, before it accepts tasks of them), never
// edits one; any thread may read one it was handed.
class TaskTypes {
 public:
  TaskTypes() = default;
  explicit TaskTypes(std::vector<std::string> names);

  const std::vector<std::string>& names() const { return names_; }
  bool empty() const { return names_.empty(); }
  // `type` as its task's record keeps it; nullopt when this pool does not serve it. No lock:
  // a scan of at most a few dozen short names, as the check it replaced was.
  std::optional<TaskType> find(std::string_view type) const;

 private:
  std::vector<std::string> names_;
  std::vector<std::optional<std::uint32_t>> indexes_;  // names_[i]'s, nullopt: not interned
};

}  // namespace sandpool::core
