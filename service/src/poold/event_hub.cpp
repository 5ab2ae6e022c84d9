#include <sandpool/service/event_hub.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include <sandpool/base/thread_name.hpp>

#include <sandpool/control/op_json.hpp>

namespace sandpool::poold {
namespace {

std::int64_t wall_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

bool matches(const std::string& want, const RecordedEvent& e) {
  return want.empty() || e.pool == want;
}

}  // namespace

ops::PoolEventRecord event_record(const RecordedEvent& r) {
  const PoolEvent& e = r.event;
  ops::PoolEventRecord out;
  out.event = std::string(to_string(e.kind));
  out.pool = r.pool;
  out.time_ms = r.time_ms;
  switch (e.kind) {
    case PoolEvent::Kind::kWorkerStarted:
    case PoolEvent::Kind::kWorkerReady:
      out.pid = e.pid;
      break;
    case PoolEvent::Kind::kWorkerExited:
      out.pid = e.pid;
      out.outcome = std::string(to_string(e.outcome));
      out.detail = r.detail;
      if (e.task_id != 0) out.task_id = e.task_id;
      break;
    case PoolEvent::Kind::kAttemptEnded:
      out.task_id = e.task_id;
      out.pid = e.pid;
      out.attempt = e.attempt;
      out.outcome = std::string(to_string(e.outcome));
      out.detail = r.detail;
      break;
    case PoolEvent::Kind::kTaskEnded:
      out.task_id = e.task_id;
      out.state = std::string(to_string(e.state));
      out.reason = std::string(to_string(e.reason));
      out.attempts = e.attempt;
      out.detail = r.detail;
      break;
    case PoolEvent::Kind::kScaled:
      out.workers = e.workers;
      out.detail = r.detail;
      break;
  }
  return out;
}

nlohmann::json event_json(const RecordedEvent& r) { return ops::encode(event_record(r)); }

EventHub::EventHub() : log_(kCapacity), thread_([this] { run(); }) {
  name_thread(thread_.native_handle(), "sp-hub");
}

EventHub::~EventHub() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void EventHub::publish(const std::string& pool, const PoolEvent& e) {
  RecordedEvent r{pool, e, std::string(e.detail), wall_ms()};
  r.event.detail = {};
  bool wake = false;
  {
    MutexLock lock(mu_);
    // The slot taken holds position head_ - kCapacity: lost if a subscriber still waits
    // for it (the delivery thread had not copied it out).
    if (active_ > 0 && head_ >= kCapacity && head_ - kCapacity >= low_water_) ++dropped_;
    log_[head_ % kCapacity] = std::move(r);
    ++head_;
    if (active_ > 0 && idle_) {
      idle_ = false;  // one wake-up until the thread has caught up again
      wake = true;
    }
  }
  if (wake) cv_.notify_one();
}

void EventHub::subscribe(const std::string& pool, bool follow, Responder responder) {
  std::uint64_t id = 0;
  {
    MutexLock lock(mu_);
    id = next_id_++;
    Subscriber sub{pool, responder};
    sub.next = std::max(head_ > kRecent ? head_ - kRecent : 0, oldest_locked());
    if (!follow) sub.end = head_;
    low_water_ = active_ == 0 ? sub.next : std::min(low_water_, sub.next);
    ++active_;
    joining_.emplace_back(id, std::move(sub));
    idle_ = false;
  }
  cv_.notify_one();
  // A cancelled stream (or a closed connection) leaves; on_cancel may run right here.
  responder.on_cancel([this, id] {
    MutexLock lock(mu_);
    auto it = std::find_if(joining_.begin(), joining_.end(),
                           [id](const auto& j) { return j.first == id; });
    if (it != joining_.end()) {
      joining_.erase(it);
    } else {
      leaving_.insert(id);
    }
    --active_;
  });
}

std::uint64_t EventHub::dropped() const {
  MutexLock lock(mu_);
  return dropped_;
}

std::size_t EventHub::subscribers() const {
  MutexLock lock(mu_);
  return active_;
}

void EventHub::set_delivery_hook(std::function<void(std::uint64_t, std::size_t)> hook) {
  MutexLock lock(mu_);
  delivery_hook_ = std::move(hook);
}

bool EventHub::prepare_locked() {
  for (auto& [id, sub] : joining_) subscribers_.emplace(id, std::move(sub));
  joining_.clear();
  for (std::uint64_t id : leaving_) subscribers_.erase(id);
  leaving_.clear();
  const std::uint64_t oldest = oldest_locked();
  bool work = false;
  for (auto& [id, sub] : subscribers_) {
    if (sub.next < oldest) {  // overwritten before this thread took them
      sub.missed += oldest - sub.next;
      sub.next = oldest;
    }
    work = work || sub.next < head_ || sub.next >= sub.end;
  }
  if (!work) low_water_ = head_;
  return work;
}

std::vector<std::uint64_t> EventHub::deliver(std::uint64_t from,
                                             const std::vector<RecordedEvent>& chunk) {
  // Each event's JSON is built once, for the first subscriber that wants it.
  std::vector<std::optional<nlohmann::json>> built(chunk.size());
  const std::uint64_t to = from + chunk.size();
  std::vector<std::uint64_t> finished;
  for (auto& [id, sub] : subscribers_) {
    const std::uint64_t stop = std::min(to, sub.end);
    for (std::uint64_t p = std::max(sub.next, from); p < stop; ++p) {
      const RecordedEvent& e = chunk[p - from];
      if (!matches(sub.pool, e)) continue;
      if (!sub.responder.wants_events()) {  // its reader is behind: counted, not built
        ++sub.missed;
        continue;
      }
      auto& j = built[p - from];
      if (!j) j = event_json(e);
      nlohmann::json body = *j;
      // The first event after a gap says how long the gap was.
      if (sub.missed != 0) body["dropped"] = std::exchange(sub.missed, 0);
      sub.responder.event(std::move(body));
    }
    sub.next = std::max(sub.next, stop);
    if (sub.next >= sub.end) {
      sub.responder.ok();
      finished.push_back(id);
    }
  }
  return finished;
}

void EventHub::run() {
  std::vector<RecordedEvent> chunk;
  MutexLock lock(mu_);
  while (!stopping_) {
    if (!prepare_locked()) {
      idle_ = true;
      cv_.wait(mu_);
      idle_ = false;
      continue;
    }
    std::uint64_t from = head_;
    for (const auto& [id, sub] : subscribers_) from = std::min(from, sub.next);
    const std::uint64_t to = std::min(head_, from + kChunk);
    chunk.resize(to - from);  // assigning into kept strings mostly reuses their buffers
    for (std::uint64_t p = from; p < to; ++p) chunk[p - from] = log_[p % kCapacity];
    low_water_ = to;  // every subscriber is past `to` once this chunk is delivered
    // Delivered without the lock: a Responder takes its connection's locks, which must
    // never nest inside the hub's.
    lock.unlock();
    if (delivery_hook_) delivery_hook_(from, chunk.size());  // set before any subscriber
    const std::vector<std::uint64_t> finished = deliver(from, chunk);
    lock.lock();
    for (std::uint64_t id : finished) {
      subscribers_.erase(id);
      if (leaving_.erase(id) == 0) --active_;  // a cancelled one was counted out already
    }
  }
  // Every stream ends, outside the lock like every delivery.
  std::vector<Responder> left;
  for (auto& [id, sub] : subscribers_) {
    if (leaving_.count(id) == 0) left.push_back(sub.responder);
  }
  for (auto& [id, sub] : joining_) left.push_back(sub.responder);
  subscribers_.clear();
  joining_.clear();
  lock.unlock();
  for (const Responder& r : left) r.ok();
}

}  // namespace sandpool::poold
