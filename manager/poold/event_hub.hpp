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

// A pool event as the hub keeps it: the event with its detail moved into a string of its
// own (event.detail is left empty: PoolEvent's view is valid during publish() only).
struct RecordedEvent {
  std::string pool;
  PoolEvent event;
  std::string detail;
  std::int64_t time_ms = 0;
  std::uint64_t dropped_before = 0;  // events this subscriber lost just before this one
};

// Returns the JSON form of a pool event: {"event":"worker_started",...,"pool":P,"time_ms":T}.
nlohmann::json event_json(const RecordedEvent& e);

// Thread-safety: every member may be called from any thread. publish() copies the event's
// fields and takes one mutex for a few pushes; it never waits on a subscriber, builds no
// JSON and wakes the delivery thread only when a subscriber has something new, so a pool's
// loop pays little per event with nobody listening. A thread of its own turns events into
// JSON and delivers them to the subscribers' Responders. Lifetime: ~EventHub ends every
// stream (ok) and joins the thread.
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
    std::deque<RecordedEvent> queue;
    bool end = false;  // follow=false: ok once the queue is delivered
    std::uint64_t dropped = 0;
  };
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RecordedEvent> recent_;
  std::map<std::uint64_t, Subscriber> subscribers_;
  std::uint64_t next_id_ = 1, dropped_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sandpool::poold
