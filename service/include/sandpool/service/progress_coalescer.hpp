// ProgressCoalescer: a waited submit's progress on its way to the submitter, latest wins
// (docs/protocol.md: progress "may be coalesced"). A worker may send progress frames as fast as
// its ring allows (the worker host rate-limits the plugin's calls, a forged frame is not
// limited); each would become an event on the submitter's connection until the server
// disconnected it as a slow reader. Instead an update is queued only while the connection
// has less than kMaxBacklog bytes waiting; otherwise it replaces the one kept for later, and
// a thread of the coalescer retries the kept ones every kRetry. Memory: one update (at most
// the manager's 64 KiB progress cap) per task whose submitter lags.
//
// Thread-safety: every member may be called from any thread; a Stream's updates and its
// finish() come from the pool's loop thread in practice. Lifetime: Streams may outlive the
// coalescer (their kept updates then go out only at finish()); ~ProgressCoalescer joins
// its thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/control/control.hpp>

namespace sandpool::poold {

class ProgressCoalescer : public std::enable_shared_from_this<ProgressCoalescer> {
 public:
  static constexpr std::size_t kMaxBacklog = 256 * 1024;
  static constexpr std::chrono::milliseconds kRetry{20};

  // One waited submit's progress.
  class Stream : public std::enable_shared_from_this<Stream> {
   public:
    Stream(std::weak_ptr<ProgressCoalescer> owner, Responder responder)
        : owner_(std::move(owner)), responder_(std::move(responder)) {}
    // The task's latest progress: sent as {"event":"progress","id"} + `data` now when the
    // connection has room, else kept (replacing what was kept) for the retry thread.
    void update(std::uint64_t task_id, std::string_view data) EXCLUDES(mu_);
    // Before the final reply: sends what is kept, backlog or not (the submitter's last view
    // is the latest progress); later updates are dropped.
    void finish() EXCLUDES(mu_);
    // The retry thread: sends what is kept if the connection has room now. Returns true
    // iff an update is still kept.
    bool retry() EXCLUDES(mu_);
    std::uint64_t sent() const EXCLUDES(mu_);       // progress events queued on the connection
    std::uint64_t coalesced() const EXCLUDES(mu_);  // updates replaced before they went out

   private:
    // Sends it as an event, with mu_ held (its order: before the Responder's lock).
    void send_locked(std::uint64_t task_id, std::string_view data) REQUIRES(mu_);

    const std::weak_ptr<ProgressCoalescer> owner_;
    const Responder responder_;
    mutable Mutex mu_;
    std::string kept_ GUARDED_BY(mu_);
    std::uint64_t kept_id_ GUARDED_BY(mu_) = 0;
    bool has_kept_ GUARDED_BY(mu_) = false;
    bool parked_ GUARDED_BY(mu_) = false;
    bool finished_ GUARDED_BY(mu_) = false;
    std::uint64_t sent_ GUARDED_BY(mu_) = 0;
    std::uint64_t coalesced_ GUARDED_BY(mu_) = 0;
  };

  static std::shared_ptr<ProgressCoalescer> create();
  ~ProgressCoalescer() EXCLUDES(mu_);
  ProgressCoalescer(const ProgressCoalescer&) = delete;
  ProgressCoalescer& operator=(const ProgressCoalescer&) = delete;

  std::shared_ptr<Stream> open(Responder responder);

 private:
  ProgressCoalescer() = default;
  void park(std::shared_ptr<Stream> stream) EXCLUDES(mu_);
  void run() EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  std::vector<std::shared_ptr<Stream>> parked_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sandpool::poold
