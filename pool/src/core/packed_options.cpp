// PackedOptions (packed_options.hpp): a task's SubmitOptions, packed for its record.
#include "core/packed_options.hpp"

#include <utility>

namespace sandpool::core {

SharedCallbacks::SharedCallbacks(Progress&& on_progress, Done&& on_done) {
  if (on_progress || on_done) block_ = new Block{std::move(on_progress), std::move(on_done)};
}

void SharedCallbacks::retain() noexcept {
  if (block_ != nullptr) block_->refs.fetch_add(1, std::memory_order_relaxed);
}

void SharedCallbacks::release() noexcept {
  if (block_ != nullptr && block_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete block_;
  }
}

PackedOptions::PackedOptions(SubmitOptions&& o, const Callbacks& shared)
    : attempts_before_(o.attempts_before), priority_(o.priority) {
  if (o.timeout) {
    flags_ |= kTimeout;
    timeout_ms_ = o.timeout->count();
  }
  if (o.retries) {
    flags_ |= kRetries;
    retries_ = *o.retries;
  }
  if (o.queue_ttl) {
    flags_ |= kQueueTtl;
    queue_ttl_ms_ = o.queue_ttl->count();
  }
  if (o.not_before) flags_ |= kNotBefore;
  if (o.fail_fast) flags_ |= kFailFast;
  if (o.on_done_on_waiter) flags_ |= kDoneOnWaiter;
  if (o.on_accepted) on_accepted_ = std::make_unique<Accepted>(std::move(o.on_accepted));
  if (!o.key.empty() || !o.idempotency_key.empty() || !o.tenant.empty() || o.delay ||
      o.not_before) {
    strings_ = std::make_unique<const Strings>(
        Strings{std::move(o.key), std::move(o.idempotency_key), std::move(o.tenant), o.delay,
                o.not_before ? o.not_before->time_since_epoch().count() : 0});
  }
  if (o.on_progress || o.on_done) {
    callbacks_ = Callbacks(std::move(o.on_progress), std::move(o.on_done));
  } else {
    callbacks_ = shared;
  }
}

std::optional<std::chrono::system_clock::time_point> PackedOptions::not_before() const {
  if (!has(kNotBefore)) return std::nullopt;
  return std::chrono::system_clock::time_point(
      std::chrono::system_clock::duration(strings_->not_before_ticks));
}

void PackedOptions::take_defaults(std::uint32_t retries, Ms timeout, std::optional<Ms> queue_ttl) {
  if (!has(kRetries)) retries_ = retries;
  if (!has(kTimeout)) timeout_ms_ = timeout.count();
  if (!has(kQueueTtl) && queue_ttl) {
    default_ttl_ = true;
    queue_ttl_ms_ = queue_ttl->count();
  }
}

TaskOptions PackedOptions::kept() const {
  TaskOptions o;
  o.timeout = timeout();
  o.retries = retries();
  o.priority = priority_;
  o.queue_ttl = queue_ttl();
  o.fail_fast = fail_fast();
  o.not_before = not_before();
  if (strings_) {
    o.key = strings_->key;
    o.idempotency_key = strings_->idempotency_key;
    o.tenant = strings_->tenant;
  }
  return o;
}

SubmitOptions PackedOptions::unpack() const {
  SubmitOptions o = SubmitOptions::of(kept());
  o.attempts_before = attempts_before_;
  if (strings_) o.delay = strings_->delay;
  if (callbacks_) {
    o.on_progress = callbacks_.on_progress();
    o.on_done = callbacks_.on_done();
  }
  o.on_done_on_waiter = done_on_waiter();
  return o;
}

PackedOptions::Accepted PackedOptions::take_on_accepted() {
  if (!on_accepted_) return nullptr;
  Accepted f = std::move(*on_accepted_);
  on_accepted_.reset();
  return f;
}

const std::string& PackedOptions::empty_string() {
  static const std::string kEmpty;
  return kEmpty;
}

}  // namespace sandpool::core
