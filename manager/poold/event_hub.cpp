#include "poold/event_hub.hpp"

#include <chrono>
#include <utility>
#include <vector>

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

nlohmann::json event_json(const RecordedEvent& r) {
  const PoolEvent& e = r.event;
  nlohmann::json j{{"event", to_string(e.kind)}, {"pool", r.pool}, {"time_ms", r.time_ms}};
  switch (e.kind) {
    case PoolEvent::Kind::kWorkerStarted:
    case PoolEvent::Kind::kWorkerReady:
      j["pid"] = e.pid;
      break;
    case PoolEvent::Kind::kWorkerExited:
      j["pid"] = e.pid;
      j["outcome"] = to_string(e.outcome);
      j["detail"] = r.detail;
      if (e.task_id != 0) j["task_id"] = e.task_id;
      break;
    case PoolEvent::Kind::kAttemptEnded:
      j["task_id"] = e.task_id;
      j["pid"] = e.pid;
      j["attempt"] = e.attempt;
      j["outcome"] = to_string(e.outcome);
      j["detail"] = r.detail;
      break;
    case PoolEvent::Kind::kTaskEnded:
      j["task_id"] = e.task_id;
      j["state"] = to_string(e.state);
      j["reason"] = to_string(e.reason);
      j["attempts"] = e.attempt;
      j["detail"] = r.detail;
      break;
  }
  // The first event after a gap says how long the gap was.
  if (r.dropped_before != 0) j["dropped"] = r.dropped_before;
  return j;
}

EventHub::EventHub() : thread_([this] { run(); }) {}

EventHub::~EventHub() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void EventHub::publish(const std::string& pool, const PoolEvent& e) {
  RecordedEvent r{pool, e, std::string(e.detail), wall_ms(), 0};
  r.event.detail = {};
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, sub] : subscribers_) {
      if (!matches(sub.pool, r)) continue;
      if (sub.queue.size() >= kQueueCapacity) {
        ++sub.dropped;
        ++dropped_;
        continue;
      }
      wake = wake || sub.queue.empty();  // a non-empty queue already woke the thread
      sub.queue.push_back(r);
      sub.queue.back().dropped_before = std::exchange(sub.dropped, 0);
    }
    recent_.push_back(std::move(r));
    if (recent_.size() > kRecent) recent_.pop_front();
  }
  if (wake) cv_.notify_one();
}

void EventHub::subscribe(const std::string& pool, bool follow, Responder responder) {
  std::uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Subscriber sub{pool, responder, {}, !follow, 0};
    for (const auto& e : recent_) {
      if (matches(pool, e)) sub.queue.push_back(e);
    }
    id = next_id_++;
    subscribers_.emplace(id, std::move(sub));
  }
  cv_.notify_one();
  // A cancelled stream (or a closed connection) leaves; on_cancel may run right here.
  responder.on_cancel([this, id] {
    std::lock_guard<std::mutex> lock(mu_);
    subscribers_.erase(id);
  });
}

std::uint64_t EventHub::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

std::size_t EventHub::subscribers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return subscribers_.size();
}

void EventHub::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // Take one batch per subscriber, then deliver without the lock (a Responder call takes
    // the server's locks).
    struct Batch {
      Responder responder;
      std::deque<RecordedEvent> events;
      bool end;
    };
    std::vector<Batch> batches;
    std::vector<std::uint64_t> finished;
    for (auto& [id, sub] : subscribers_) {
      if (sub.queue.empty() && !sub.end) continue;
      if (sub.end) finished.push_back(id);
      batches.push_back({sub.responder, std::move(sub.queue), sub.end});
      sub.queue.clear();
    }
    for (std::uint64_t id : finished) subscribers_.erase(id);
    if (batches.empty()) {
      if (stopping_) break;
      cv_.wait(lock);
      continue;
    }
    lock.unlock();
    for (Batch& b : batches) {
      for (const RecordedEvent& e : b.events) b.responder.event(event_json(e));
      if (b.end) b.responder.ok();
    }
    lock.lock();
  }
  // The streams end outside the lock, like every delivery: a responder takes its
  // connection's lock, which must never nest inside the hub's.
  auto left = std::move(subscribers_);
  subscribers_.clear();
  lock.unlock();
  for (auto& [id, sub] : left) sub.responder.ok();
}

}  // namespace sandpool::poold
