#include <sandpool/service/idempotency.hpp>

namespace sandpool::poold {
namespace {

// What a kept final account costs: its variable-length parts.
std::uint64_t account_bytes(const TaskResult& r) {
  std::uint64_t n = r.type.size() + r.result.size() + r.error.size();
  for (const Attempt& a : r.history) n += sizeof(Attempt) + a.error.size() + a.backtrace.size();
  return n;
}

}  // namespace

std::optional<KeptTask> IdempotencyKeys::find(const std::string& key, Clock::time_point now) {
  MutexLock lock(mu_);
  evict(now);
  auto it = keys_.find(key);
  if (it == keys_.end()) return std::nullopt;
  return it->second.kept;
}

void IdempotencyKeys::remember(const std::string& key, std::uint64_t task_id,
                               Clock::time_point now) {
  MutexLock lock(mu_);
  auto it = keys_.find(key);
  if (it != keys_.end() && it->second.kept.task_id == task_id) {
    it->second.at = now;  // it ended first; keep what it kept
  } else {
    if (it != keys_.end()) erase(it);
    Entry e;
    e.kept.task_id = task_id;
    e.at = now;
    keys_.emplace(key, std::move(e));
    by_task_[task_id] = key;
  }
  order_.emplace_back(key, now);
  evict(now);
}

void IdempotencyKeys::forget(const std::string& key, std::uint64_t task_id) {
  MutexLock lock(mu_);
  auto it = keys_.find(key);
  if (it != keys_.end() && it->second.kept.task_id == task_id) erase(it);
}

void IdempotencyKeys::task_ended(const std::string& key, const TaskResult& result,
                                 Clock::time_point now) {
  MutexLock lock(mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    // Ended before remember(): remember it now, for remember() to find.
    Entry e;
    e.kept.task_id = result.id;
    e.at = now;
    it = keys_.emplace(key, std::move(e)).first;
    by_task_[result.id] = key;
    order_.emplace_back(key, now);
  } else if (it->second.kept.task_id != result.id) {
    return;  // the key names another task since
  }
  keep_final(key, it->second, result);
  evict(now);
}

void IdempotencyKeys::task_ended(const TaskResult& result, Clock::time_point now) {
  MutexLock lock(mu_);
  auto by = by_task_.find(result.id);
  if (by == by_task_.end()) return;
  const std::string key = by->second;
  auto it = keys_.find(key);
  if (it == keys_.end() || it->second.kept.task_id != result.id) return;
  keep_final(key, it->second, result);
  evict(now);
}

std::size_t IdempotencyKeys::size() const {
  MutexLock lock(mu_);
  return keys_.size();
}

std::uint64_t IdempotencyKeys::kept_bytes() const {
  MutexLock lock(mu_);
  return bytes_;
}

void IdempotencyKeys::keep_final(const std::string& key, Entry& e, const TaskResult& result) {
  bytes_ -= e.bytes;
  e.kept.final = result;
  e.kept.result_dropped = false;
  e.bytes = account_bytes(result);
  bytes_ += e.bytes;
  e.final_seq = next_seq_++;
  if (!result.result.empty()) results_.emplace_back(key, e.final_seq);
  // A key whose task ends again (a replay) leaves a stale record behind: compact now and
  // then so the list stays within a small multiple of the keys.
  if (results_.size() > 2 * keys_.size() + 16) {
    std::erase_if(results_, [this](const auto& r) {
      mu_.assert_held();  // called by erase_if, under mu_
      auto it = keys_.find(r.first);
      return it == keys_.end() || it->second.final_seq != r.second;
    });
  }
}

void IdempotencyKeys::erase(std::unordered_map<std::string, Entry>::iterator it) {
  bytes_ -= it->second.bytes;
  auto by = by_task_.find(it->second.kept.task_id);
  if (by != by_task_.end() && by->second == it->first) by_task_.erase(by);
  keys_.erase(it);
}

void IdempotencyKeys::evict(Clock::time_point now) {
  auto expired = [&] {
    mu_.assert_held();  // called below, under mu_
    return limits_.max_age.count() > 0 && now - order_.front().second > limits_.max_age;
  };
  drop_results();
  while (!order_.empty() &&
         (keys_.size() > limits_.max_keys || order_.size() > 2 * limits_.max_keys + 16 ||
          expired() || (bytes_ > limits_.max_bytes && results_.empty()))) {
    auto [key, at] = std::move(order_.front());
    order_.pop_front();
    // Only the entry this order record made: a re-remembered key has a newer time.
    auto it = keys_.find(key);
    if (it != keys_.end() && it->second.at == at) erase(it);
  }
}

void IdempotencyKeys::drop_results() {
  while (bytes_ > limits_.max_bytes && !results_.empty()) {
    auto [key, seq] = std::move(results_.front());
    results_.pop_front();
    auto it = keys_.find(key);
    if (it == keys_.end() || it->second.final_seq != seq) continue;  // gone or replaced
    Entry& e = it->second;
    const std::uint64_t size = e.kept.final->result.size();
    std::string().swap(e.kept.final->result);
    e.kept.result_dropped = true;
    e.bytes -= size;
    bytes_ -= size;
  }
}

}  // namespace sandpool::poold
