// One control connection as the server thread sees it: its socket, the handshake, the
// frame decoder, and the output it is writing. Owned and used by the server thread only;
// what other threads touch lives in `outbox`.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <sandpool/base/unique_fd.hpp>
#include <sandpool/control/control.hpp>

#include <sandpool/control/frame_codec.hpp>
#include "control/connection_budget.hpp"
#include "control/outbox.hpp"

namespace sandpool::control {

// Best-effort: writes one connection-level error frame (id 0) to a fresh socket.
void refuse(int fd, std::string_view code, std::string message);

class Connection {
 public:
  // `budget` already admitted this peer; the server gives the slot back when it closes.
  Connection(std::uint64_t key, UniqueFd fd, PeerCredentials peer, Rights rights,
             const ControlServerOptions& options, std::shared_ptr<Waker> waker,
             ControlHandler& handler, std::shared_ptr<ConnectionBudget> budget);

  // Reads what the socket has (bounded per call) and handles complete frames. Returns
  // null, or why the connection must close now.
  const char* read_input();
  // Writes pending output until the socket would block. Returns null, or why the
  // connection must close now (a slow reader over its limit, a write error, done).
  const char* write_output();
  bool wants_output() const { return sent_ < sending_.size(); }
  bool hello_done() const { return hello_done_; }
  bool admin() const { return rights_ == Rights::kAdmin; }
  // How long the connection has been idle at `now`: zero while a request is open or
  // output waits, else since the later of its last input and its last request's end.
  std::chrono::steady_clock::duration idle_for(std::chrono::steady_clock::time_point now) const;
  // The socket is gone: open requests are cancelled, later replies dropped.
  void abandon();

  UniqueFd fd;
  const PeerCredentials peer;
  std::string client_name = "?";
  std::uint32_t epoll_mask = 0;
  bool log_close = true;

 private:
  void handle(Frame&& f);
  void handle_hello(const Frame& f);
  void handle_request(Frame&& f);
  void handle_cancel(const Frame& f);
  void reply_error(std::uint64_t id, std::string_view code, std::string message);

  const std::uint64_t key_;
  const Rights rights_;
  const ControlServerOptions& options_;
  ControlHandler& handler_;
  FrameDecoder decoder_;
  std::shared_ptr<Outbox> outbox_;
  std::shared_ptr<ConnectionBudget> budget_;
  std::chrono::steady_clock::time_point last_input_ = std::chrono::steady_clock::now();
  std::string sending_;  // taken from the outbox, being written
  std::size_t sent_ = 0;
  bool hello_done_ = false;
  bool closing_ = false;  // close once the output is written; ignore further input
  const char* close_reason_ = nullptr;
};

}  // namespace sandpool::control
