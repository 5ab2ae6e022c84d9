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

bool matches(const std::string& want, const nlohmann::json& e) {
  return want.empty() || e.value("pool", std::string()) == want;
}

}  // namespace

nlohmann::json event_json(const std::string& pool, const PoolEvent& e) {
  nlohmann::json j{{"event", to_string(e.kind)}, {"pool", pool}, {"time_ms", wall_ms()}};
  switch (e.kind) {
    case PoolEvent::Kind::kWorkerStarted:
    case PoolEvent::Kind::kWorkerReady:
      j["pid"] = e.pid;
      break;
    case PoolEvent::Kind::kWorkerExited:
      j["pid"] = e.pid;
      j["outcome"] = to_string(e.outcome);
      j["detail"] = std::string(e.detail);
      if (e.task_id != 0) j["task_id"] = e.task_id;
      break;
    case PoolEvent::Kind::kAttemptEnded:
      j["task_id"] = e.task_id;
      j["pid"] = e.pid;
      j["attempt"] = e.attempt;
      j["outcome"] = to_string(e.outcome);
      j["detail"] = std::string(e.detail);
      break;
    case PoolEvent::Kind::kTaskEnded:
      j["task_id"] = e.task_id;
      j["state"] = to_string(e.state);
      j["reason"] = to_string(e.reason);
      j["attempts"] = e.attempt;
      j["detail"] = std::string(e.detail);
      break;
  }
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
  nlohmann::json j = event_json(pool, e);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, sub] : subscribers_) {
    if (!matches(sub.pool, j)) continue;
    if (sub.queue.size() >= kQueueCapacity) {
      ++sub.dropped;
      ++dropped_;
      continue;
    }
    sub.queue.push_back(j);
    if (sub.dropped != 0) {  // the first event after a gap says how long the gap was
      sub.queue.back()["dropped"] = sub.dropped;
      sub.dropped = 0;
    }
  }
  recent_.push_back(std::move(j));
  if (recent_.size() > kRecent) recent_.pop_front();
  cv_.notify_one();
}

void EventHub::subscribe(const std::string& pool, bool follow, Responder responder) {
  std::uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Subscriber sub{pool, responder, {}, 0};
    for (const auto& e : recent_) {
      if (matches(pool, e)) sub.queue.push_back(e);
    }
    if (!follow) sub.queue.push_back(nullptr);  // the end marker: ok after the backlog
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
    std::vector<std::pair<Responder, std::deque<nlohmann::json>>> batches;
    std::vector<std::uint64_t> finished;
    for (auto& [id, sub] : subscribers_) {
      if (sub.queue.empty()) continue;
      if (sub.queue.back() == nullptr) finished.push_back(id);
      batches.emplace_back(sub.responder, std::move(sub.queue));
      sub.queue.clear();
    }
    for (std::uint64_t id : finished) subscribers_.erase(id);
    if (batches.empty()) {
      if (stopping_) break;
      cv_.wait(lock);
      continue;
    }
    lock.unlock();
    for (auto& [responder, events] : batches) {
      for (auto& e : events) {
        if (e == nullptr) {
          responder.ok();
        } else {
          responder.event(std::move(e));
        }
      }
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
