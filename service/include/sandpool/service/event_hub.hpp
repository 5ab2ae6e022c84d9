// EventHub: the `events` stream. Pools publish their lifecycle events (on their loop
// threads) into one bounded log; a delivery thread of the hub's own fans each event out to
// the subscribers (open `events` requests) as JSON. Publishing costs a pool's loop the same
// whatever the number of subscribers: a copy of the event into the log under one mutex, and
// a wake-up of the delivery thread only when it sleeps while somebody follows. A follower
// the delivery thread cannot keep up with (the log wrapped past events it had not taken)
// loses them, counted (the first event after the gap carries "dropped").
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/control/control.hpp>
#include <sandpool/control/control_ops.hpp>
#include <sandpool/pool/pool.hpp>

namespace sandpool::poold {

// A pool event as the hub keeps it: the event with its detail moved into a string of its
// own (event.detail is left empty: PoolEvent's view is valid during publish() only).
struct RecordedEvent {
  std::string pool;
  PoolEvent event;
  std::string detail;
  std::int64_t time_ms = 0;
};

// A pool event as the `events` stream sends it (ops::Events' Event), and its JSON form:
// {"event":"worker_started",...,"pool":P,"time_ms":T}.
ops::PoolEventRecord event_record(const RecordedEvent& e);
nlohmann::json event_json(const RecordedEvent& e);

// Thread-safety: every member may be called from any thread. publish() copies the event's
// fields, then, under the hub's mutex, moves them into the log's next slot: O(1) whatever
// the number of subscribers, no JSON, no allocation of the hub's. The delivery thread
// holds that mutex only to copy at most kChunk events out of the log (or to take new and
// cancelled subscribers), never while it builds JSON or calls a Responder.
// Lifetime: ~EventHub ends every stream (ok) and joins the thread.
class EventHub {
 public:
  static constexpr std::size_t kCapacity = 4096;  // events in the log
  static constexpr std::size_t kRecent = 256;     // sent first to every new subscriber
  static constexpr std::size_t kChunk = 128;      // copied out of the log per lock hold

  EventHub();
  ~EventHub();
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;

  void publish(const std::string& pool, const PoolEvent& e) EXCLUDES(mu_);
  // follow=false: sends the recent events (of `pool`, or all when empty), then ok.
  // follow=true: the recent ones, then every new one, until the client cancels.
  void subscribe(const std::string& pool, bool follow, Responder responder) EXCLUDES(mu_);
  // Events published while somebody followed and overwritten in the log before the
  // delivery thread took them, in total.
  std::uint64_t dropped() const EXCLUDES(mu_);
  std::size_t subscribers() const EXCLUDES(mu_);  // open streams (a cancelled one leaves at once)

  // For tests: `hook` runs on the delivery thread with each chunk's first log position and
  // size, once the chunk is copied out of the log and before it is delivered (no lock held).
  // A hook that blocks stops delivery at that known point, as a stuck connection would.
  // Set it before the first subscribe(), and only once.
  void set_delivery_hook(std::function<void(std::uint64_t from, std::size_t n)> hook);

 private:
  // Owned by the delivery thread once adopted.
  struct Subscriber {
    std::string pool;
    Responder responder;
    std::uint64_t next = 0;          // the next log position it is due
    std::uint64_t end = UINT64_MAX;  // follow=false: ok once `next` reaches it
    std::uint64_t missed = 0;        // lost before `next`, not reported yet
  };
  void run() EXCLUDES(mu_);
  // Delivery thread, mu_ held: adopts new subscribers, forgets cancelled ones, moves every
  // cursor past what the log no longer holds. Returns true iff there is work.
  bool prepare_locked() REQUIRES(mu_);
  // Delivery thread, without mu_: sends events [from, from + chunk.size()) to each
  // subscriber due them; returns the ids of the finished (follow=false) ones.
  std::vector<std::uint64_t> deliver(std::uint64_t from, const std::vector<RecordedEvent>& chunk);
  std::uint64_t oldest_locked() const REQUIRES(mu_) {
    return head_ > kCapacity ? head_ - kCapacity : 0;
  }

  mutable Mutex mu_;
  CondVar cv_;
  std::vector<RecordedEvent> log_ GUARDED_BY(mu_);  // position p lives at log_[p % kCapacity]
  std::uint64_t head_ GUARDED_BY(mu_) = 0;          // the next position published
  std::uint64_t low_water_ GUARDED_BY(mu_) = 0;     // the lowest position a subscriber waits for
  std::uint64_t dropped_ GUARDED_BY(mu_) = 0;
  std::size_t active_ GUARDED_BY(mu_) = 0;  // subscribers not cancelled and not finished
  bool idle_ GUARDED_BY(mu_) = false;       // the delivery thread waits for publish()
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::pair<std::uint64_t, Subscriber>> joining_ GUARDED_BY(mu_);
  std::set<std::uint64_t> leaving_ GUARDED_BY(mu_);  // cancelled, still in subscribers_
  std::uint64_t next_id_ GUARDED_BY(mu_) = 1;

  std::map<std::uint64_t, Subscriber> subscribers_;                // the delivery thread's
  std::function<void(std::uint64_t, std::size_t)> delivery_hook_;  // set under mu_, see above
  std::thread thread_;
};

}  // namespace sandpool::poold
