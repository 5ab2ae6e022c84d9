// PackedOptions: what a task was submitted with (SubmitOptions), packed for its TaskRecord.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <sandpool/base/status.hpp>
#include <sandpool/task/submit_options.hpp>

namespace sandpool::core {

// A SubmitOptions is 280 bytes, most of it strings and callbacks that few tasks set; a record
// keeps the scalars the loop reads per task inline (about 40 bytes), the strings and the delay
// in one block allocated only when a task sets one of them, and the progress and done
// callbacks in another (poold sets on_done on every task; few set a key or a tenant), see
// docs/performance.md, "Memory per task". on_accepted is apart: poold sets it on every task
// and it is dropped once called (take_on_accepted).
//
// Thread-safety: immutable after construction but for on_accepted, which only its one caller
// (the journal's callback or release_ack, ordered by the record's ack flags) touches.
class PackedOptions {
 public:
  using Ms = std::chrono::milliseconds;
  using Progress = std::function<void(std::uint64_t id, std::string_view data)>;
  using Done = std::function<void(const TaskResult&)>;
  using Accepted = std::function<void(std::uint64_t id, const Status&)>;

  explicit PackedOptions(SubmitOptions o);
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
  bool fail_fast() const { return has(kFailFast); }
  std::uint32_t attempts_before() const { return attempts_before_; }
  std::optional<Ms> delay() const { return strings_ ? strings_->delay : std::nullopt; }
  const std::string& key() const { return strings_ ? strings_->key : empty_string(); }
  const std::string& tenant() const { return strings_ ? strings_->tenant : empty_string(); }
  const std::string& idempotency_key() const {
    return strings_ ? strings_->idempotency_key : empty_string();
  }
  // Null (an empty function) when the task set none.
  const Progress* on_progress() const {
    return callbacks_ && callbacks_->on_progress ? &callbacks_->on_progress : nullptr;
  }
  const Done* on_done() const {
    return callbacks_ && callbacks_->on_done ? &callbacks_->on_done : nullptr;
  }

  // Takes on_accepted (empty when none, or when taken before): its one caller runs it once.
  Accepted take_on_accepted();
  // For a prefetch: where on_accepted's holder is.
  const void* on_accepted_address() const { return &on_accepted_; }

 private:
  struct Strings {
    std::string key;
    std::string idempotency_key;
    std::string tenant;
    std::optional<Ms> delay;
  };
  struct Callbacks {
    Progress on_progress;
    Done on_done;
  };
  enum Flag : std::uint8_t {
    kTimeout = 1,
    kRetries = 2,
    kQueueTtl = 4,
    kNotBefore = 8,
    kFailFast = 16,
  };
  bool has(Flag f) const { return (flags_ & f) != 0; }
  static const std::string& empty_string();

  std::unique_ptr<const Strings> strings_;      // null: none of its members set
  std::unique_ptr<const Callbacks> callbacks_;  // null: neither set
  std::unique_ptr<Accepted> on_accepted_;       // null: none, or taken
  std::int64_t timeout_ms_ = 0;                 // kTimeout
  std::int64_t queue_ttl_ms_ = 0;               // kQueueTtl
  std::int64_t not_before_ticks_ = 0;           // kNotBefore: system_clock ticks since the epoch
  std::uint32_t retries_ = 0;                   // kRetries
  std::uint32_t attempts_before_ = 0;
  std::int32_t priority_ = 0;
  std::uint8_t flags_ = 0;
};

}  // namespace sandpool::core
