#include "core/task_record.hpp"

#include <cstring>
#include <stdexcept>

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

TaskRecord::TaskRecord(std::uint64_t task_id, std::uint32_t type_ref, std::uint32_t payload_len,
                       SubmitOptions&& options, const PackedOptions::Callbacks& shared)
    : type_ref_(type_ref),
      id(task_id),
      opts(std::move(options), shared),
      payload_len_(payload_len) {
  level = opts.priority();
}

TaskRecord::~TaskRecord() {
  if (payload_len_ == kPayloadApart) payload_apart()->~basic_string();
}

std::size_t TaskRecord::apart_offset(std::uint32_t type_len) {
  constexpr std::size_t kAlign = alignof(std::string);
  // The record's size is a multiple of kAlign: the string's place after the type is too.
  static_assert(sizeof(TaskRecord) % kAlign == 0);
  return (type_len + kAlign - 1) / kAlign * kAlign;
}

std::size_t TaskRecord::allocation_size() const {
  const std::uint32_t type_len = inline_type_len();
  if (payload_len_ != kPayloadApart) return sizeof(TaskRecord) + type_len + payload_len_;
  return sizeof(TaskRecord) + apart_offset(type_len) + sizeof(std::string);
}

namespace {

// Frees a record's block: sized where the compiler has sized deallocation (GCC; jemalloc's
// sdallocx skips a size lookup), plain where it does not (clang 14, the sanitizer trees').
void free_record_block(void* block, [[maybe_unused]] std::size_t bytes) noexcept {
#if defined(__cpp_sized_deallocation)
  ::operator delete(block, bytes);
#else
  ::operator delete(block);
#endif
}

}  // namespace

TaskPtr TaskRecord::make(std::uint64_t task_id, TaskType task_type, std::string task_payload,
                         SubmitOptions&& options, const PackedOptions::Callbacks& shared) {
  const bool apart = task_payload.size() > kInlinePayloadMax;
  // An interned type takes no bytes here; an inline one's length shares type_ref_ with the bit.
  const std::string_view inline_type = task_type.index() ? std::string_view() : task_type.name();
  if (inline_type.size() >= kTypeInline) throw std::length_error("task type too long");
  const auto type_len = static_cast<std::uint32_t>(inline_type.size());
  const std::uint32_t type_ref = task_type.index() ? *task_type.index() : kTypeInline | type_len;
  const std::size_t bytes =
      sizeof(TaskRecord) +
      (apart ? apart_offset(type_len) + sizeof(std::string) : type_len + task_payload.size());
  void* block = ::operator new(bytes);
  TaskRecord* rec = nullptr;
  try {  // PackedOptions allocates the options' rare parts
    rec = new (block) TaskRecord(
        task_id, type_ref, apart ? kPayloadApart : static_cast<std::uint32_t>(task_payload.size()),
        std::move(options), shared);
  } catch (...) {
    free_record_block(block, bytes);
    throw;
  }
  if (type_len != 0) std::memcpy(rec->tail(), inline_type.data(), type_len);
  if (apart) {
    new (rec->tail() + apart_offset(type_len)) std::string(std::move(task_payload));
  } else if (!task_payload.empty()) {
    std::memcpy(rec->tail() + type_len, task_payload.data(), task_payload.size());
  }
  return TaskPtr::adopt(rec);
}

void retain_record(TaskRecord* rec) noexcept { rec->refs_.fetch_add(1, std::memory_order_relaxed); }

void release_record(TaskRecord* rec) noexcept {
  // The last handle's release must see every write made through the others (acq_rel), as
  // shared_ptr's does.
  if (rec->refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  const std::size_t bytes = rec->allocation_size();
  rec->~TaskRecord();
  free_record_block(static_cast<void*>(rec), bytes);
}

std::shared_ptr<const TaskResult> shared_account(const TaskPtr& task) {
  return {&task->account(), [keep = task](const TaskResult*) { (void)keep; }};
}

std::uint32_t record_refs(const TaskRecord* rec) noexcept {
  return rec->refs_.load(std::memory_order_relaxed);
}

void TaskRecord::prefetch_record() const {
  const char* p = reinterpret_cast<const char*>(this);
  for (std::size_t at = 0; at < sizeof(TaskRecord); at += 64) __builtin_prefetch(p + at, 1);
}

void TaskRecord::prefetch_owned() const {
  if (const TaskResult* a = account_.get()) {
    const char* p = reinterpret_cast<const char*>(a);
    for (std::size_t at = 0; at < sizeof(TaskResult); at += 64) __builtin_prefetch(p + at, 1);
  }
  if (const void* c = opts.callbacks_address()) __builtin_prefetch(c, 1);
  if (const void* s = opts.strings_address()) __builtin_prefetch(s, 0);
}

void TaskRecord::prefetch_account_buffers() const {
  const TaskResult* a = account_.get();
  if (a == nullptr) return;
  __builtin_prefetch(a->result.data(), 0);
  if (!a->history.empty()) __builtin_prefetch(a->history.data(), 0);
}

void TaskRecord::fill_fresh_account(TaskResult& r) const {
  r.id = id;
  r.type = type();
  if (auto nb = opts.not_before()) {
    r.not_before_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(nb->time_since_epoch()).count();
  }
  r.tenant = opts.tenant();
}

TaskResult& TaskRecord::account() {
  if (!account_) {  // filled in place: one per task ended, on the loop's path of every result
    account_ = std::make_unique<TaskResult>();
    fill_fresh_account(*account_);
  }
  return *account_;
}

TaskResult TaskRecord::account_copy() const {
  if (account_) return *account_;
  TaskResult r;
  fill_fresh_account(r);
  return r;
}

}  // namespace sandpool::core
