// A control request made in-process: the HTTP API and the dashboard hand it to the same
// ControlHandler (poold's Service) the socket server does, with a ReplySink that keeps the
// final reply and queues a stream's event frames for the HTTP thread that waits on them.
//
// Thread-safety: the handler's threads call take(); one HTTP thread waits (wait_final(),
// next_events()). Lifetime: shared by the Responder and the waiter; abandon() (the HTTP
// client went away) ends a stream (its on_cancel runs) and drops later frames.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/control/control.hpp>
#include <sandpool/control/rights.hpp>

namespace sandpool::http {

// The final reply of a request.
struct CallReply {
  bool ok = false;
  std::string code;  // an error's wire code (docs/protocol.md, "Errors")
  std::string body;  // the reply's JSON text; an error's is {"message": ...}
  std::string blob;  // the reply's raw bytes (a task's result, a letter's payload)
};

class LocalCall final : public ReplySink {
 public:
  using Clock = std::chrono::steady_clock;
  // Event frames not yet taken by next_events() are kept up to `max_queued_events`; while
  // the queue is full accepting_events() is false and the producer counts what it does not
  // send (the hub: the next event's `dropped`).
  explicit LocalCall(std::size_t max_queued_events = 1024) : max_queued_(max_queued_events) {}

  // Hands `op` to `handler` with `rights` (the HTTP side already checked them) and returns
  // the call to wait on. `handler.handle()` never blocks (ControlHandler's contract).
  static std::shared_ptr<LocalCall> start(ControlHandler& handler, std::string op,
                                          nlohmann::json args, std::string blob, Rights rights);

  bool take(Kind kind, std::string_view code, std::string body, std::string blob) override
      EXCLUDES(mu_);
  std::size_t queued_output() const override EXCLUDES(mu_);
  bool accepting_events() const override EXCLUDES(mu_);

  // The final reply, once it came; nullopt when `deadline` passed first.
  std::optional<CallReply> wait_final(Clock::time_point deadline) EXCLUDES(mu_);
  // The event frames (JSON text) queued since the last call, waiting up to `deadline` for
  // one; `final` gets the final reply once it came (then no event follows).
  std::vector<std::string> next_events(Clock::time_point deadline, std::optional<CallReply>* final)
      EXCLUDES(mu_);
  // The requester went away, or the listener stops: ends a stream, drops what comes
  // later; a waiter gets an `unavailable` error as the final reply. Idempotent. Takes mu_,
  // then, without it, the Responder's lock and the stream's on_cancel (the event hub's).
  void abandon() EXCLUDES(mu_);

 private:
  // Waits until `ready` holds or `deadline` passes (Clock::time_point::max(): no deadline).
  template <class Ready>
  void wait_locked(Clock::time_point deadline, Ready ready) REQUIRES(mu_);

  const std::size_t max_queued_;
  // A leaf: nothing else is taken, nothing is called, while it is held.
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::string> events_ GUARDED_BY(mu_);
  std::size_t queued_bytes_ GUARDED_BY(mu_) = 0;
  std::optional<CallReply> final_ GUARDED_BY(mu_);
  std::function<void()> abandon_ GUARDED_BY(mu_);  // set by start()
};

}  // namespace sandpool::http
