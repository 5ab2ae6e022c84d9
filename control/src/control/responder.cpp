// Responder and the per-connection Outbox: how replies from any thread reach the server
// thread's sockets.
#include <unistd.h>

#include <cstdint>
#include <utility>

#include <sandpool/control/wire_errors.hpp>
#include "control/outbox.hpp"

namespace sandpool {
namespace control {

void Waker::ring(std::uint64_t key) {
  {
    MutexLock lock(mu);
    dirty.push_back(key);
  }
  const std::uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the server will wake anyway.
  [[maybe_unused]] ssize_t n = ::write(eventfd.get(), &one, sizeof one);
}

std::vector<std::uint64_t> Waker::take() {
  MutexLock lock(mu);
  return std::exchange(dirty, {});
}

bool Outbox::append(std::string&& encoded, std::uint64_t id, bool final) {
  bool queued = false;
  bool ring = false;
  {
    MutexLock lock(mu);
    if (final) forget_locked(id);
    if (closed || overflowed) return false;
    ring = !flush_requested;  // one doorbell until the server thread takes the bytes
    flush_requested = true;
    if (bytes.size() + sending_bytes + encoded.size() > max_output) {
      overflowed = true;  // the server thread disconnects this slow reader
      ring = true;        // even when a flush is pending: the socket may never drain
    } else {
      queued = true;
      if (bytes.empty()) {
        bytes = std::move(encoded);
      } else {
        bytes.append(encoded);
      }
    }
  }
  if (ring) waker->ring(key);
  return queued;
}

void Outbox::forget_locked(std::uint64_t id) {
  if (open.erase(id) != 0 && open.empty()) open_emptied = std::chrono::steady_clock::now();
}

}  // namespace control

namespace {

control::Frame error_frame(std::string_view code, std::string message) {
  control::Frame f;
  f.kind = control::FrameKind::kError;
  f.name = std::string(code);
  f.json = nlohmann::json{{"message", std::move(message)}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  return f;
}

}  // namespace

Responder::State::~State() {
  // The last owner: nobody else can take mu, but send() and finish_locked() want it held.
  MutexLock lock(mu);
  if (!done) {
    finish_locked();
    send(error_frame("internal", "the service dropped the request without answering"), true);
  }
}

void Responder::State::finish_locked() {
  done = true;
  stream.release();
}

bool Responder::State::send(control::Frame f, bool final) {
  if (sink) {
    using Kind = ReplySink::Kind;
    const Kind kind = f.kind == control::FrameKind::kEvent ? Kind::kEvent
                      : f.kind == control::FrameKind::kOk  ? Kind::kOk
                                                           : Kind::kError;
    const std::string code = kind == Kind::kError ? std::move(f.name) : std::string();
    return sink->take(kind, code, std::move(f.json), std::move(f.blob));
  }
  f.id = id;
  std::string bytes;
  control::encode_frame(f, &bytes);
  auto box = outbox.lock();
  if (!box) return false;
  return box->append(std::move(bytes), id, final);
}

void Responder::State::cancel(bool reply_cancelled) {
  std::function<void()> fn;
  {
    MutexLock lock(mu);
    if (done) return;
    finish_locked();
    cancelled = true;
    fn = std::move(on_cancel);
    if (reply_cancelled) {
      send(error_frame("cancelled", "the client cancelled the request"), true);
    } else if (auto box = outbox.lock()) {
      MutexLock box_lock(box->mu);
      box->forget_locked(id);
    }
  }
  if (fn) fn();
}

Responder::Responder(std::shared_ptr<State> state) : state_(std::move(state)) {}

bool Responder::event(nlohmann::json body, std::string blob) const {
  control::Frame f;
  f.kind = control::FrameKind::kEvent;
  f.json = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  f.blob = std::move(blob);
  MutexLock lock(state_->mu);
  if (state_->done) return false;
  return state_->send(std::move(f), false);
}

bool Responder::ok(nlohmann::json body, std::string blob) const {
  control::Frame f;
  f.kind = control::FrameKind::kOk;
  f.json = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  f.blob = std::move(blob);
  MutexLock lock(state_->mu);
  if (state_->done) return false;
  state_->finish_locked();
  state_->on_cancel = nullptr;
  return state_->send(std::move(f), true);
}

bool Responder::error(std::string_view code, std::string message) const {
  control::Frame f = error_frame(code, std::move(message));
  MutexLock lock(state_->mu);
  if (state_->done) return false;
  state_->finish_locked();
  state_->on_cancel = nullptr;
  return state_->send(std::move(f), true);
}

bool Responder::error(const Status& status) const {
  return error(control::wire_code(status.code()), status.message());
}

bool Responder::is_open() const {
  MutexLock lock(state_->mu);
  if (state_->done) return false;
  if (state_->sink) return true;
  auto box = state_->outbox.lock();
  if (!box) return false;
  MutexLock box_lock(box->mu);
  return !box->closed;
}

std::size_t Responder::queued_output() const {
  if (state_->sink) return state_->sink->queued_output();
  auto box = state_->outbox.lock();
  if (!box) return 0;
  MutexLock lock(box->mu);
  return box->closed ? 0 : box->bytes.size() + box->sending_bytes;
}

bool Responder::wants_events() const { return !state_->sink || state_->sink->accepting_events(); }

void Responder::on_cancel(std::function<void()> fn) const {
  {
    MutexLock lock(state_->mu);
    if (!state_->done) {
      state_->on_cancel = std::move(fn);
      return;
    }
    if (!state_->cancelled) return;  // ended by a final reply: nobody cancelled
  }
  fn();
}

LocalRequest local_request(std::shared_ptr<ReplySink> sink) {
  auto state = std::make_shared<Responder::State>(std::move(sink));
  std::weak_ptr<Responder::State> weak = state;
  return LocalRequest{Responder(std::move(state)), [weak] {
                        if (auto s = weak.lock()) s->cancel(false);
                      }};
}

}  // namespace sandpool
