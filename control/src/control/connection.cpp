#include "control/connection.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <unordered_map>
#include <utility>

#include <spdlog/spdlog.h>

namespace sandpool::control {
namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr int kReadsPerWake = 16;  // fairness: one busy client cannot starve the others

std::string encode_error(std::uint64_t id, std::string_view code, std::string message) {
  Frame f;
  f.kind = FrameKind::kError;
  f.id = id;
  f.name = std::string(code);
  f.json = nlohmann::json{{"message", std::move(message)}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  encode_frame(f, &out);
  return out;
}

}  // namespace

void refuse(int fd, std::string_view code, std::string message) {
  const std::string bytes = encode_error(0, code, std::move(message));
  [[maybe_unused]] ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
}

Connection::Connection(std::uint64_t key, UniqueFd socket, PeerCredentials peer, Rights rights,
                       const ControlServerOptions& options, std::shared_ptr<Waker> waker,
                       ControlHandler& handler, std::shared_ptr<ConnectionBudget> budget)
    : fd(std::move(socket)),
      peer(peer),
      key_(key),
      rights_(rights),
      options_(options),
      handler_(handler),
      decoder_(options.max_frame),
      outbox_(std::make_shared<Outbox>(key, options.max_output_bytes, std::move(waker))),
      budget_(std::move(budget)) {}

std::chrono::steady_clock::duration Connection::idle_for(
    std::chrono::steady_clock::time_point now) const {
  if (wants_output()) return {};
  MutexLock lock(outbox_->mu);
  if (!outbox_->open.empty() || !outbox_->bytes.empty()) return {};
  return now - std::max(last_input_, outbox_->open_emptied);
}

const char* Connection::read_input() {
  char buf[kReadChunk];
  last_input_ = std::chrono::steady_clock::now();
  for (int i = 0; i < kReadsPerWake && !closing_; ++i) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n == 0) {
      log_close = false;  // the client hung up: nothing to report
      return "closed by the client";
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      log_close = errno != ECONNRESET;  // the client went away with replies unread
      return "read failed";
    }
    decoder_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    for (;;) {
      Frame f;
      FrameDecoder::Error err;
      const auto st = decoder_.next(&f, &err);
      if (st == FrameDecoder::Status::kNeedMore) break;
      if (closing_) continue;  // drain what is buffered, answer nothing more
      if (st == FrameDecoder::Status::kFrame) {
        handle(std::move(f));
      } else if (st == FrameDecoder::Status::kBadFrame) {
        reply_error(err.id, err.code, err.message);
      } else {
        reply_error(0, err.code, err.message + "; closing the connection");
        closing_ = true;
        close_reason_ = "unframeable input";
        break;
      }
    }
    if (static_cast<std::size_t>(n) < sizeof buf) break;
  }
  return nullptr;
}

const char* Connection::write_output() {
  {
    MutexLock lock(outbox_->mu);
    if (outbox_->overflowed) return "a slow reader: unread output went over max_output_bytes";
  }
  for (;;) {
    if (sent_ == sending_.size()) {
      MutexLock lock(outbox_->mu);
      sending_.clear();
      sending_.swap(outbox_->bytes);
      outbox_->flush_requested = false;
      sent_ = 0;
      outbox_->sending_bytes = sending_.size();
      if (sending_.empty()) break;
    }
    const ssize_t n = ::send(fd.get(), sending_.data() + sent_, sending_.size() - sent_,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      log_close = errno != EPIPE && errno != ECONNRESET;
      return "write failed";
    }
    sent_ += static_cast<std::size_t>(n);
    MutexLock lock(outbox_->mu);
    outbox_->sending_bytes = sending_.size() - sent_;
  }
  if (closing_ && !wants_output()) return close_reason_;
  return nullptr;
}

void Connection::abandon() {
  std::unordered_map<std::uint64_t, std::weak_ptr<Responder::State>> open;
  {
    MutexLock lock(outbox_->mu);
    outbox_->closed = true;
    open.swap(outbox_->open);
  }
  for (auto& [id, weak] : open) {
    if (auto state = weak.lock()) state->cancel(false);
  }
}

void Connection::reply_error(std::uint64_t id, std::string_view code, std::string message) {
  outbox_->append(encode_error(id, code, std::move(message)), id, false);
}

void Connection::handle(Frame&& f) {
  if (!hello_done_) {
    if (f.kind == FrameKind::kHello) return handle_hello(f);
    reply_error(f.id, "bad_request", "the first frame must be a hello");
    closing_ = true;
    close_reason_ = "no hello";
    return;
  }
  switch (f.kind) {
    case FrameKind::kRequest:
      return handle_request(std::move(f));
    case FrameKind::kCancel:
      return handle_cancel(f);
    case FrameKind::kHello:
      return reply_error(f.id, "bad_request", "hello was already done");
    default:
      return reply_error(
          f.id, "bad_request",
          "a client does not send frames of kind " + std::to_string(static_cast<int>(f.kind)));
  }
}

void Connection::handle_hello(const Frame& f) {
  const auto body = json_depth_within(f.json) ? nlohmann::json::parse(f.json, nullptr, false)
                                              : nlohmann::json(nlohmann::json::value_t::discarded);
  if (body.is_discarded() || !body.is_object() || !body.contains("version") ||
      !body["version"].is_number_unsigned()) {
    reply_error(f.id, "bad_request", "a hello needs a JSON object with an unsigned version");
    closing_ = true;
    close_reason_ = "bad hello";
    return;
  }
  const auto version = body["version"].get<std::uint64_t>();
  if (body.contains("client") && body["client"].is_string()) {
    client_name = body["client"].get<std::string>();
  }
  if (version != kProtocolVersion) {
    reply_error(f.id, "unsupported_version",
                "this server speaks control protocol version " + std::to_string(kProtocolVersion) +
                    ", the client " + std::to_string(version));
    closing_ = true;
    close_reason_ = "unsupported protocol version";
    return;
  }
  hello_done_ = true;
  Frame reply;
  reply.kind = FrameKind::kOk;
  reply.id = f.id;
  reply.json = nlohmann::json{{"version", kProtocolVersion},
                              {"server", options_.server_name},
                              {"rights", to_string(rights_)},
                              {"uid", peer.uid},
                              {"gid", peer.gid},
                              {"max_frame", options_.max_frame}}
                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string bytes;
  encode_frame(reply, &bytes);
  outbox_->append(std::move(bytes), f.id, false);
}

void Connection::handle_request(Frame&& f) {
  if (!json_depth_within(f.json)) {
    return reply_error(f.id, "bad_request",
                       "request arguments nest deeper than " + std::to_string(kMaxJsonDepth));
  }
  auto args =
      f.json.empty() ? nlohmann::json::object() : nlohmann::json::parse(f.json, nullptr, false);
  if (args.is_discarded() || !args.is_object()) {
    return reply_error(f.id, "bad_request", "request arguments must be a JSON object");
  }
  if (!ControlServer::known_op(f.name)) {
    return reply_error(f.id, "unknown_op", "no operation named '" + f.name + "'");
  }
  const Rights need = ControlServer::required_rights(f.name);
  if (rights_ < need) {
    return reply_error(f.id, "forbidden",
                       f.name + " needs " + std::string(to_string(need)) + " rights; uid " +
                           std::to_string(peer.uid) + " has " + std::string(to_string(rights_)));
  }
  StreamSlot stream;
  if (ControlServer::is_stream(f.name)) {
    if (auto refusal = budget_->open_stream(peer.uid, key_, &stream)) {
      return reply_error(f.id, "busy", f.name + ": " + *refusal);
    }
  }
  enum class Admission { kOk, kDuplicate, kBusy } admission = Admission::kOk;
  std::shared_ptr<Responder::State> state;
  {
    MutexLock lock(outbox_->mu);
    if (outbox_->open.count(f.id) != 0) {
      admission = Admission::kDuplicate;
    } else if (outbox_->open.size() >= options_.max_outstanding) {
      admission = Admission::kBusy;
    } else {
      state = std::make_shared<Responder::State>(outbox_, f.id, std::move(stream));
      outbox_->open.emplace(f.id, state);
    }
  }
  if (admission == Admission::kDuplicate) {
    return reply_error(f.id, "bad_request",
                       "request id " + std::to_string(f.id) + " is already in use");
  }
  if (admission == Admission::kBusy) {
    return reply_error(f.id, "busy",
                       std::to_string(options_.max_outstanding) +
                           " requests are outstanding on this connection; wait for replies");
  }
  Request request;
  request.id = f.id;
  request.op = std::move(f.name);
  request.args = std::move(args);
  request.blob = std::move(f.blob);
  request.rights = rights_;
  request.peer = peer;
  request.client_name = client_name;
  Responder responder(std::move(state));
  try {
    handler_.handle(std::move(request), responder);
  } catch (const std::exception& e) {
    responder.error("internal", std::string("the handler failed: ") + e.what());
  }
}

void Connection::handle_cancel(const Frame& f) {
  std::shared_ptr<Responder::State> state;
  {
    MutexLock lock(outbox_->mu);
    auto it = outbox_->open.find(f.id);
    if (it != outbox_->open.end()) state = it->second.lock();
  }
  if (state) state->cancel(true);  // an unknown id has already finished: nothing to do
}

}  // namespace sandpool::control
