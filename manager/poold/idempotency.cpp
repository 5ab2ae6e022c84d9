#include "poold/idempotency.hpp"

namespace sandpool::poold {

std::optional<std::uint64_t> IdempotencyKeys::find(const std::string& key, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  evict(now);
  auto it = keys_.find(key);
  if (it == keys_.end()) return std::nullopt;
  return it->second.task_id;
}

void IdempotencyKeys::remember(const std::string& key, std::uint64_t task_id,
                               Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  keys_[key] = Entry{task_id, now};
  order_.emplace_back(key, now);
  evict(now);
}

std::size_t IdempotencyKeys::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keys_.size();
}

void IdempotencyKeys::evict(Clock::time_point now) {
  while (!order_.empty() && (keys_.size() > max_keys_ || order_.size() > 2 * max_keys_ + 16 ||
                             (max_age_.count() > 0 && now - order_.front().second > max_age_))) {
    auto [key, at] = std::move(order_.front());
    order_.pop_front();
    // Only the entry this order record made: a re-remembered key has a newer time.
    auto it = keys_.find(key);
    if (it != keys_.end() && it->second.at == at) keys_.erase(it);
  }
}

}  // namespace sandpool::poold
