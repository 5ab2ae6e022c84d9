// The state a connection shares between the server thread and Responders on any thread:
// its pending output, its open requests, and the doorbell that tells the server thread to
// flush. Lock order: Responder::State::mu before Outbox::mu; Waker::mu is taken last.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <sandpool/base/unique_fd.hpp>
#include <sandpool/control/control.hpp>

#include <sandpool/control/frame_codec.hpp>
#include "control/connection_budget.hpp"

namespace sandpool::control {

// The server's eventfd plus the list of connections with new output. Shared with every
// Outbox so a Responder that outlives the server thread still writes to a valid fd.
struct Waker {
  UniqueFd eventfd;
  std::mutex mu;
  std::vector<std::uint64_t> dirty;   // connection keys
  void ring(std::uint64_t key);       // thread-safe
  std::vector<std::uint64_t> take();  // thread-safe
};

struct Outbox {
  Outbox(std::uint64_t key, std::size_t max_output, std::shared_ptr<Waker> waker)
      : key(key), max_output(max_output), waker(std::move(waker)) {}
  const std::uint64_t key;
  const std::size_t max_output;
  const std::shared_ptr<Waker> waker;

  std::mutex mu;
  std::string bytes;              // encoded frames not yet handed to the server thread
  std::size_t sending_bytes = 0;  // what the server thread holds, not yet written
  bool closed = false;
  bool overflowed = false;       // output went over max_output: the server disconnects
  bool flush_requested = false;  // the waker was rung since the server last took `bytes`
  std::unordered_map<std::uint64_t, std::weak_ptr<Responder::State>> open;
  // When `open` last became empty (the idle timeout counts from here or the last input).
  std::chrono::steady_clock::time_point open_emptied{};

  // Appends `encoded` unless closed; `final` also forgets request `id`. Returns false when
  // the bytes were dropped (closed or overflowed). Rings the waker.
  bool append(std::string&& encoded, std::uint64_t id, bool final);
  // Forgets open request `id`; mu held.
  void forget_locked(std::uint64_t id);
};

}  // namespace sandpool::control

namespace sandpool {

struct Responder::State {
  State(std::weak_ptr<control::Outbox> outbox, std::uint64_t id)
      : outbox(std::move(outbox)), id(id) {}
  explicit State(std::shared_ptr<ReplySink> sink) : id(0), sink(std::move(sink)) {}
  ~State();  // an unanswered request gets an `internal` error
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // Sends `f` (id filled in) unless done; `final` marks done. Returns true iff queued.
  bool send(control::Frame f, bool final);
  // The client cancelled (reply_cancelled: answer `cancelled`) or the connection closed.
  void cancel(bool reply_cancelled);
  // Marks the request done and gives back its stream slot, if any; mu held.
  void finish_locked();

  const std::weak_ptr<control::Outbox> outbox;
  const std::uint64_t id;
  // Set for a request made in-process (local_request()); then `outbox` is empty.
  const std::shared_ptr<ReplySink> sink;
  std::mutex mu;
  bool done = false;
  bool cancelled = false;
  std::function<void()> on_cancel;
  control::StreamSlot stream;  // a stream's share of the connection budget, until done
};

}  // namespace sandpool
