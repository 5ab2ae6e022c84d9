// The state a connection shares between the server thread and Responders on any thread:
// its pending output, its open requests, and the doorbell that tells the server thread to
// flush. Lock order: Responder::State::mu before Outbox::mu; Waker::mu is taken last.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/base/unique_fd.hpp>
#include <sandpool/control/control.hpp>

#include <sandpool/control/frame_codec.hpp>
#include "control/connection_budget.hpp"

namespace sandpool::control {

// The server's eventfd plus the list of connections with new output. Shared with every
// Outbox so a Responder that outlives the server thread still writes to a valid fd.
struct Waker {
  UniqueFd eventfd;
  Mutex mu;
  std::vector<std::uint64_t> dirty GUARDED_BY(mu);  // connection keys
  void ring(std::uint64_t key) EXCLUDES(mu);        // thread-safe
  std::vector<std::uint64_t> take() EXCLUDES(mu);   // thread-safe
};

struct Outbox {
  Outbox(std::uint64_t key, std::size_t max_output, std::shared_ptr<Waker> waker)
      : key(key), max_output(max_output), waker(std::move(waker)) {}
  const std::uint64_t key;
  const std::size_t max_output;
  const std::shared_ptr<Waker> waker;

  Mutex mu;
  // Encoded frames not yet handed to the server thread.
  std::string bytes GUARDED_BY(mu);
  // What the server thread holds, not yet written.
  std::size_t sending_bytes GUARDED_BY(mu) = 0;
  bool closed GUARDED_BY(mu) = false;
  // Output went over max_output: the server disconnects.
  bool overflowed GUARDED_BY(mu) = false;
  // The waker was rung since the server last took `bytes`.
  bool flush_requested GUARDED_BY(mu) = false;
  std::unordered_map<std::uint64_t, std::weak_ptr<Responder::State>> open GUARDED_BY(mu);
  // When `open` last became empty (the idle timeout counts from here or the last input).
  std::chrono::steady_clock::time_point open_emptied GUARDED_BY(mu){};

  // Appends `encoded` unless closed; `final` also forgets request `id`. Returns false when
  // the bytes were dropped (closed or overflowed). Rings the waker (after mu).
  bool append(std::string&& encoded, std::uint64_t id, bool final) EXCLUDES(mu);
  // Forgets open request `id`.
  void forget_locked(std::uint64_t id) REQUIRES(mu);
};

}  // namespace sandpool::control

namespace sandpool {

struct Responder::State {
  State(std::weak_ptr<control::Outbox> outbox, std::uint64_t id, control::StreamSlot stream = {})
      : outbox(std::move(outbox)), id(id), stream(std::move(stream)) {}
  explicit State(std::shared_ptr<ReplySink> sink) : id(0), sink(std::move(sink)) {}
  ~State();  // an unanswered request gets an `internal` error
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // Sends `f` (id filled in); `final` forgets the request in the outbox. Returns true iff
  // queued. Takes the outbox's mu, or the sink's lock.
  bool send(control::Frame f, bool final) REQUIRES(mu);
  // The client cancelled (reply_cancelled: answer `cancelled`) or the connection closed.
  // Runs on_cancel after mu.
  void cancel(bool reply_cancelled) EXCLUDES(mu);
  // Marks the request done and gives back its stream slot, if any.
  void finish_locked() REQUIRES(mu);

  const std::weak_ptr<control::Outbox> outbox;
  const std::uint64_t id;
  // Set for a request made in-process (local_request()); then `outbox` is empty.
  const std::shared_ptr<ReplySink> sink;
  Mutex mu;  // before the outbox's mu (the lock order above)
  bool done GUARDED_BY(mu) = false;
  bool cancelled GUARDED_BY(mu) = false;
  std::function<void()> on_cancel GUARDED_BY(mu);
  // A stream's share of the connection budget, until done.
  control::StreamSlot stream GUARDED_BY(mu);
};

}  // namespace sandpool
