// PackedOptions: what a task was submitted with (SubmitOptions), packed for its TaskRecord.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <sandpool/base/status.hpp>
#include <sandpool/task/submit_options.hpp>

namespace sandpool::core {

// The progress and done callbacks, one block that the tasks of a batch may share
// (Pool::submit_batch's `shared`): poold's batch path gives every task the same on_done,
// which was a 64-byte block per task. Counted; immutable once made.
class SharedCallbacks {
 public:
  using Progress = std::function<void(std::uint64_t id, std::string_view data)>;
  using Done = std::function<void(const TaskResult&)>;

  SharedCallbacks() = default;
  // Null when both are empty.
  SharedCallbacks(Progress&& on_progress, Done&& on_done);
  SharedCallbacks(const SharedCallbacks& o) noexcept : block_(o.block_) { retain(); }
  SharedCallbacks& operator=(SharedCallbacks o) noexcept {
    std::swap(block_, o.block_);
    return *this;
  }
  ~SharedCallbacks() { release(); }
  explicit operator bool() const { return block_ != nullptr; }
  // For a prefetch: the counted block (null when none).
  const void* block_address() const { return block_; }
  const Progress& on_progress() const { return block_->on_progress; }
  const Done& on_done() const { return block_->on_done; }

 private:
  struct Block {
    Progress on_progress;
    Done on_done;
    std::atomic<std::uint32_t> refs{1};
  };
  void retain() noexcept;
  void release() noexcept;
  Block* block_ = nullptr;
};

// A SubmitOptions is 280 bytes, most of it strings and callbacks that few tasks set; a record
// keeps the scalars the loop reads per task inline (32 bytes), the strings, the delay and
// not_before in one block allocated only when a task sets one of them, and the progress and
// done callbacks in another, counted, which a batch's tasks may share (poold's batch path
// gives every task the same on_done; few set a key or a tenant), see docs/performance.md,
// "Memory per task". on_accepted is apart: poold sets it on every task and it is dropped
// once called (take_on_accepted).
//
// Thread-safety: immutable after construction but for on_accepted, which only its one caller
// (the journal's callback or release_ack, ordered by the record's ack flags) touches, and
// the pool's defaults, which take_defaults() writes where no other thread reads (below).
class PackedOptions {
 public:
  using Ms = std::chrono::milliseconds;
  using Progress = std::function<void(std::uint64_t id, std::string_view data)>;
  using Done = std::function<void(const TaskResult&)>;
  using Accepted = std::function<void(std::uint64_t id, const Status&)>;

  using Callbacks = SharedCallbacks;

  // `shared`: the callbacks of the task's batch, taken when the task sets neither its own.
  // Moves what it keeps out of `o` (taken by reference: a SubmitOptions is 280 bytes, and the
  // submit path hands it down without a copy or a move per call, docs/performance.md).
  explicit PackedOptions(SubmitOptions&& o, const Callbacks& shared = {});
  PackedOptions(const PackedOptions&) = delete;
  PackedOptions& operator=(const PackedOptions&) = delete;

  // The options as submitted but on_accepted, which only its one caller reads (any other
  // reader would race with that caller's take_on_accepted).
  SubmitOptions unpack() const;
  // The options the task keeps (journal, letters): SubmitOptions::kept() of unpack().
  TaskOptions kept() const;

  std::optional<Ms> timeout() const {
    return has(kTimeout) ? std::optional(Ms(timeout_ms_)) : std::nullopt;
  }
  std::optional<std::uint32_t> retries() const {
    return has(kRetries) ? std::optional(retries_) : std::nullopt;
  }
  std::optional<Ms> queue_ttl() const {
    return has(kQueueTtl) ? std::optional(Ms(queue_ttl_ms_)) : std::nullopt;
  }
  std::optional<std::chrono::system_clock::time_point> not_before() const;
  std::int32_t priority() const { return priority_; }

  // What the task runs with: its own retries, timeout and queue_ttl, or the pool's defaults
  // when it took the task in. Loop thread: take_defaults() once, at take-in, before the
  // others are read. It writes only what the task did not set, which no other thread reads
  // (unpack() and kept() read the set ones), so a Ticket may read the options meanwhile.
  void take_defaults(std::uint32_t retries, Ms timeout, std::optional<Ms> queue_ttl);
  std::uint32_t max_attempts() const { return 1 + retries_; }  // 1 + retries
  Ms run_timeout() const { return Ms(timeout_ms_); }           // per attempt
  std::optional<Ms> run_queue_ttl() const {
    return has(kQueueTtl) || default_ttl_ ? std::optional(Ms(queue_ttl_ms_)) : std::nullopt;
  }

  bool fail_fast() const { return has(kFailFast); }
  // SubmitOptions::on_done_on_waiter: its on_done may run on a direct waiter's thread.
  bool done_on_waiter() const { return has(kDoneOnWaiter); }
  std::uint32_t attempts_before() const { return attempts_before_; }
  std::optional<Ms> delay() const { return strings_ ? strings_->delay : std::nullopt; }
  const std::string& key() const { return strings_ ? strings_->key : empty_string(); }
  const std::string& tenant() const { return strings_ ? strings_->tenant : empty_string(); }
  const std::string& idempotency_key() const {
    return strings_ ? strings_->idempotency_key : empty_string();
  }
  // Null (an empty function) when the task set none.
  const Progress* on_progress() const {
    return callbacks_ && callbacks_.on_progress() ? &callbacks_.on_progress() : nullptr;
  }
  const Done* on_done() const {
    return callbacks_ && callbacks_.on_done() ? &callbacks_.on_done() : nullptr;
  }

  // Takes on_accepted (empty when none, or when taken before): its one caller runs it once.
  Accepted take_on_accepted();
  // For a prefetch: where on_accepted's holder is.
  const void* on_accepted_address() const { return &on_accepted_; }
  // For a prefetch: the blocks a release of these options reads (null when none).
  const void* strings_address() const { return strings_.get(); }
  const void* callbacks_address() const { return callbacks_.block_address(); }

 private:
  // What few tasks set (a scheduled task's not_before among them: 8 bytes every record
  // would carry, see task_record.hpp).
  struct Strings {
    std::string key;
    std::string idempotency_key;
    std::string tenant;
    std::optional<Ms> delay;
    std::int64_t not_before_ticks = 0;  // kNotBefore: system_clock ticks since the epoch
  };
  enum Flag : std::uint8_t {
    kTimeout = 1,
    kRetries = 2,
    kQueueTtl = 4,
    kNotBefore = 8,
    kFailFast = 16,
    kDoneOnWaiter = 32,
  };
  bool has(Flag f) const { return (flags_ & f) != 0; }
  static const std::string& empty_string();

  std::unique_ptr<const Strings> strings_;  // null: none of its members set
  Callbacks callbacks_;                     // null: neither set
  std::unique_ptr<Accepted> on_accepted_;   // null: none, or taken
  // Each the task's own when its flag is set, else the pool's default once taken in.
  std::int64_t timeout_ms_ = 0;    // kTimeout
  std::int64_t queue_ttl_ms_ = 0;  // kQueueTtl, or default_ttl_
  std::uint32_t retries_ = 0;      // kRetries
  std::uint32_t attempts_before_ = 0;
  std::int32_t priority_ = 0;
  std::uint8_t flags_ = 0;    // immutable after construction
  bool default_ttl_ = false;  // queue_ttl_ms_ holds the pool's default (loop thread)
};

}  // namespace sandpool::core
