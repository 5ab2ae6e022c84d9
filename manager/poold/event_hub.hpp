// EventHub: the `events` stream. Pools publish their lifecycle events (on their loop
// threads); subscribers (open `events` requests) receive them as JSON objects. Publishing
// never blocks: each subscriber has a bounded queue, and an event that finds it full is
// dropped and counted (the count rides on the first event queued after the gap, as
// "dropped").
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>
#include <sandpool/control.hpp>
#include <sandpool/pool.hpp>

namespace sandpool::poold {

// Returns the JSON form of a pool event: {"event":"worker_started",...,"pool":P,"ts_ms":T}.
nlohmann::json event_json(const std::string& pool, const PoolEvent& e);

// Thread-safety: every member may be called from any thread. publish() takes one mutex for
// a few pushes and never waits on a subscriber. A thread of its own delivers to the
// subscribers' Responders. Lifetime: ~EventHub ends every stream (ok) and joins the thread.
class EventHub {
 public:
  static constexpr std::size_t kQueueCapacity = 1024;  // per subscriber
  static constexpr std::size_t kRecent = 256;          // kept for `events` without follow

  EventHub();
  ~EventHub();
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;

  void publish(const std::string& pool, const PoolEvent& e);
  // follow=false: sends the recent events (of `pool`, or all when empty), then ok.
  // follow=true: the recent ones, then every new one, until the client cancels.
  void subscribe(const std::string& pool, bool follow, Responder responder);
  std::uint64_t dropped() const;    // events dropped for full subscriber queues, in total
  std::size_t subscribers() const;  // open streams (a cancelled one leaves at once)

 private:
  struct Subscriber {
    std::string pool;
    Responder responder;
    std::deque<nlohmann::json> queue;
    std::uint64_t dropped = 0;
  };
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<nlohmann::json> recent_;
  std::map<std::uint64_t, Subscriber> subscribers_;
  std::uint64_t next_id_ = 1, dropped_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sandpool::poold
