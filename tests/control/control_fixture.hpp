// What the control server tests share: a temporary socket directory, a scriptable fake
// ControlHandler, and a raw connection for sending bytes the real client never would.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sandpool/base/unique_fd.hpp>
#include <sandpool/control/control.hpp>
#include "wire_json.hpp"

#include <sandpool/control/frame_codec.hpp>

namespace sandpool::testing {

inline constexpr std::chrono::seconds kPatience{60};

// A fresh directory under /tmp (short: sun_path holds 107 bytes), removed at the end.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/sp-control-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Answers from the test's script: ops listed in `parked` are kept for the test to answer;
// "status" answers at once; "submit" echoes (with progress events when asked); every other
// op answers ok with its args echoed back.
class FakeHandler : public ControlHandler {
 public:
  void handle(Request request, Responder responder) override {
    std::unique_lock<std::mutex> lock(mu_);
    ops_.push_back(request.op);
    last_request_ = request.op + " " + request.args.dump();
    if (parked_ops_.count(request.op) != 0) {
      parked_.push_back({std::move(request), responder});
      cv_.notify_all();
      return;
    }
    lock.unlock();
    if (on_request) return on_request(std::move(request), responder);
    respond(std::move(request), responder);
  }

  static void respond(Request request, const Responder& r) {
    if (request.op == "status") {
      r.ok({{"client", request.client_name}, {"rights", to_string(request.rights)}});
    } else if (request.op == "submit") {
      std::string result(request.blob.rbegin(), request.blob.rend());
      const bool wait = request.args.value("wait", false);
      if (!wait) return (void)r.ok({{"id", 7}, {"existing", false}});
      r.event({{"event", "accepted"}, {"id", 7}});
      if (request.args.value("progress", false)) {
        r.event({{"event", "progress"}, {"id", 7}}, "half");
        r.event({{"event", "progress"}, {"id", 7}}, "all");
      }
      r.ok({{"id", 7}, {"state", "completed"}, {"attempts", 1}}, result);
    } else {
      r.ok({{"op", request.op}, {"args", request.args}, {"blob", request.blob}});
    }
  }

  // "<op> <args as JSON>" of the last request that came.
  std::string last_request() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_request_;
  }

  // Ops whose requests the test answers itself (through take_parked).
  void park(const std::string& op) {
    std::lock_guard<std::mutex> lock(mu_);
    parked_ops_[op] = true;
  }

  struct Parked {
    Request request;
    Responder responder;
  };
  // Waits until `n` requests are parked and hands them over.
  std::vector<Parked> take_parked(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    REQUIRE(cv_.wait_for(lock, kPatience, [&] { return parked_.size() >= n; }));
    std::vector<Parked> out(std::make_move_iterator(parked_.begin()),
                            std::make_move_iterator(parked_.begin() + n));
    parked_.erase(parked_.begin(), parked_.begin() + n);
    return out;
  }

  std::vector<std::string> ops() {
    std::lock_guard<std::mutex> lock(mu_);
    return ops_;
  }

  // Set before the server starts; replaces respond() for unparked ops.
  std::function<void(Request, const Responder&)> on_request;

 private:
  std::string last_request_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, bool> parked_ops_;
  std::vector<Parked> parked_;
  std::vector<std::string> ops_;
};

inline std::unique_ptr<ControlServer> start_server(ControlServerOptions o, ControlHandler& h) {
  auto s = ControlServer::start(std::move(o), h);
  if (!s) FAIL("ControlServer::start: " << s.status().to_string());
  return std::move(s).value();
}

inline Client connect_client(const std::string& path, const std::string& name = "test") {
  auto c = Client::connect(path, ClientOptions{name});
  if (!c) FAIL("Client::connect: " << c.status().to_string());
  return std::move(c).value();
}

// A connection that speaks raw frames (or raw bytes) to the server.
class RawConnection {
 public:
  explicit RawConnection(const std::string& path) : fd_(::socket(AF_UNIX, SOCK_STREAM, 0)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    REQUIRE(::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  // One already connected (connect_as: a connection made as another uid).
  explicit RawConnection(UniqueFd fd) : fd_(std::move(fd)) {}
  void send_bytes(const std::string& bytes) {
    REQUIRE(::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(bytes.size()));
  }
  void send(control::FrameKind kind, std::uint64_t id, std::string name, std::string json,
            std::string blob = {}) {
    control::Frame f{kind, id, std::move(name), std::move(json), std::move(blob)};
    std::string bytes;
    control::encode_frame(f, &bytes);
    send_bytes(bytes);
  }
  void hello(std::uint32_t version = control::kProtocolVersion) {
    send(control::FrameKind::kHello, 1, "", R"({"version":)" + std::to_string(version) + "}");
  }
  // The next frame, or nullopt when the server closed the connection.
  std::optional<control::Frame> read() {
    for (;;) {
      control::Frame f;
      control::FrameDecoder::Error err;
      if (decoder_.next(&f, &err) == control::FrameDecoder::Status::kFrame) return f;
      pollfd p{fd_.get(), POLLIN, 0};
      REQUIRE(::poll(&p, 1, static_cast<int>(kPatience.count() * 1000)) == 1);
      char buf[65536];
      const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      decoder_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    }
  }
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
  control::FrameDecoder decoder_{64u << 20};
};

}  // namespace sandpool::testing
