// sandpool::Client: one blocking socket, writes serialised by a mutex, one reader thread
// that routes replies and events to the pending request they answer.
#include <sandpool/control/client.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <optional>
#include <thread>
#include <unordered_map>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/base/thread_name.hpp>
#include <sandpool/base/unique_fd.hpp>

#include <sandpool/control/frame_codec.hpp>
#include <sandpool/control/wire_errors.hpp>
#include "control/listen_socket.hpp"
#include "control/raw_client.hpp"

namespace sandpool {

using control::Frame;
using control::FrameDecoder;
using control::FrameKind;

namespace {

Status unavailable(std::string message) {
  return Status::error(Code::kUnavailable, std::move(message));
}

// Parses the server's JSON, refusing nesting that would overflow nlohmann's recursion.
nlohmann::json parse_json(const std::string& text) {
  if (text.empty()) return nlohmann::json::object();
  if (!control::json_depth_within(text)) return nlohmann::json::value_t::discarded;
  return nlohmann::json::parse(text, nullptr, false);
}

Status error_of(const Frame& f) {
  auto body = parse_json(f.json);
  std::string message;
  if (body.is_object() && body.contains("message") && body["message"].is_string()) {
    message = body["message"].get<std::string>();
  }
  return control::status_from_wire(f.name, message);
}

Result<Reply> reply_of(Frame&& f) {
  auto body = parse_json(f.json);
  if (body.is_discarded()) return Status::protocol("the server sent malformed JSON");
  return Reply{std::move(body), std::move(f.blob)};
}

}  // namespace

class Client::Impl {
 public:
  using Clock = std::chrono::steady_clock;

  Impl(UniqueFd fd, ClientOptions options)
      : fd_(std::move(fd)), options_(std::move(options)), decoder_(options_.max_frame) {}

  ~Impl() {
    ::shutdown(fd_.get(), SHUT_RDWR);
    if (reader_.joinable()) reader_.join();
    fail_all(unavailable("the client was closed"));
  }

  Status handshake() EXCLUDES(mu_) {
    Frame hello;
    hello.kind = FrameKind::kHello;
    {
      MutexLock lock(mu_);  // no reader thread yet: taken only to say that next_id_ is mu_'s
      hello.id = next_id_++;
    }
    hello.json =
        nlohmann::json{{"version", control::kProtocolVersion}, {"client", options_.name}}.dump(
            -1, ' ', false, nlohmann::json::error_handler_t::replace);
    // A server that refuses us (rights, connection limit) writes its error and closes
    // without reading, so our hello may fail with EPIPE while its answer waits unread.
    const Status sent = write_frame(hello);
    Frame f;
    std::optional<Clock::time_point> deadline;
    if (options_.hello_timeout.count() > 0) deadline = Clock::now() + options_.hello_timeout;
    Status got = read_frame(&f, deadline);
    if (got.code() == Code::kTimeout) {
      got =
          Status::error(Code::kTimeout, "the service did not answer the hello within " +
                                            std::to_string(options_.hello_timeout.count()) + " ms");
    }
    if (!got.is_ok()) return sent.is_ok() ? got : sent;
    if (f.kind == FrameKind::kError) return error_of(f);
    if (f.kind != FrameKind::kOk || f.id != hello.id) {
      return Status::protocol("the server did not answer the hello");
    }
    auto body = parse_json(f.json);
    if (!body.is_object()) return Status::protocol("the server's hello is not a JSON object");
    hello_ = std::move(body);
    if (hello_.contains("max_frame") && hello_["max_frame"].is_number_unsigned()) {
      server_max_frame_ = hello_["max_frame"].get<std::size_t>();
    }
    reader_ = std::thread([this] { read_loop(); });
    name_thread(reader_.native_handle(), "sp-client");
    return Status::ok();
  }

  Result<std::uint64_t> start(const std::string& op, nlohmann::json args, std::string blob,
                              EventFn on_event, ReplyFn on_done) EXCLUDES(mu_) {
    Frame f;
    f.kind = FrameKind::kRequest;
    f.name = op;
    f.json = args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    f.blob = std::move(blob);
    if (control::body_size(f) > server_max_frame_) {
      return Status::too_large("request of " + std::to_string(control::body_size(f)) +
                               " bytes is over the server's limit of " +
                               std::to_string(server_max_frame_));
    }
    {
      MutexLock lock(mu_);
      if (!broken_.is_ok()) return broken_;
      f.id = next_id_++;
      pending_.emplace(f.id, Pending{std::move(on_event), std::move(on_done)});
    }
    Status st = write_frame(f);
    if (!st.is_ok()) {
      MutexLock lock(mu_);
      // The reader may have failed it already; only report it once.
      if (pending_.erase(f.id) == 0) return f.id;
      return st;
    }
    return f.id;
  }

  // timeout zero: wait for the final reply however long it takes.
  Result<Reply> call(const std::string& op, nlohmann::json args, std::string blob, EventFn on_event,
                     std::chrono::milliseconds timeout) EXCLUDES(mu_) {
    // Shared: after a timeout the reader may still deliver into it.
    auto done = std::make_shared<std::promise<Result<Reply>>>();
    auto fut = done->get_future();
    auto id = start(op, std::move(args), std::move(blob), std::move(on_event),
                    [done](Result<Reply> r) { done->set_value(std::move(r)); });
    if (!id) return id.status();
    if (timeout.count() <= 0 || fut.wait_for(timeout) == std::future_status::ready) {
      return fut.get();
    }
    {
      MutexLock lock(mu_);
      // Gone already: the reply (or the connection's failure) came in just now.
      if (pending_.erase(*id) == 0) return fut.get();
    }
    cancel(*id);
    return Status::error(Code::kTimeout, "no reply to '" + op + "' within " +
                                             std::to_string(timeout.count()) + " ms");
  }

  std::chrono::milliseconds call_timeout() const { return options_.call_timeout; }
  const ClientOptions& options() const { return options_; }

  void cancel(std::uint64_t id) {
    Frame f;
    f.kind = FrameKind::kCancel;
    f.id = id;
    (void)write_frame(f);  // a lost connection fails the stream anyway
  }

  const nlohmann::json& hello() const { return hello_; }

 private:
  struct Pending {
    EventFn on_event;
    ReplyFn on_done;
  };

  Status write_frame(const Frame& f) EXCLUDES(write_mu_) {
    std::string bytes;
    control::encode_frame(f, &bytes);
    MutexLock lock(write_mu_);
    std::size_t off = 0;
    while (off < bytes.size()) {
      auto n = posix_call("send", [&] {
        return ::send(fd_.get(), bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      });
      if (!n) return unavailable("connection to the service lost: " + n.status().message());
      off += static_cast<std::size_t>(*n);
    }
    return Status::ok();
  }

  // Blocks until one frame arrives (handshake and reader thread), or until `deadline`
  // (then kTimeout).
  Status read_frame(Frame* f, std::optional<Clock::time_point> deadline = std::nullopt) {
    for (;;) {
      FrameDecoder::Error err;
      const auto st = decoder_.next(f, &err);
      if (st == FrameDecoder::Status::kFrame) return Status::ok();
      if (st != FrameDecoder::Status::kNeedMore) {
        return Status::protocol("the server sent a bad frame: " + err.message);
      }
      if (deadline) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
        pollfd p{fd_.get(), POLLIN, 0};
        auto ready = posix_call("poll", [&] {
          return ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
        });
        if (!ready) return unavailable("connection to the service: " + ready.status().message());
        if (*ready == 0) return Status::error(Code::kTimeout, "no frame before the deadline");
      }
      char buf[64 * 1024];
      auto n = posix_call("recv", [&] { return ::recv(fd_.get(), buf, sizeof buf, 0); });
      if (!n) return unavailable("connection to the service lost: " + n.status().message());
      if (*n == 0) return unavailable("the service closed the connection");
      decoder_.feed(std::string_view(buf, static_cast<std::size_t>(*n)));
    }
  }

  void read_loop() EXCLUDES(mu_) {
    for (;;) {
      Frame f;
      Status st = read_frame(&f);
      if (!st.is_ok()) return fail_all(st);
      if (f.kind == FrameKind::kError && f.id == 0) return fail_all(error_of(f));
      if (f.kind == FrameKind::kEvent) {
        EventFn fn;
        {
          MutexLock lock(mu_);
          auto it = pending_.find(f.id);
          if (it == pending_.end()) continue;
          fn = it->second.on_event;
        }
        if (!fn) continue;
        auto r = reply_of(std::move(f));
        if (r) fn(*r);
        continue;
      }
      if (f.kind != FrameKind::kOk && f.kind != FrameKind::kError) continue;
      ReplyFn done;
      {
        MutexLock lock(mu_);
        auto it = pending_.find(f.id);
        if (it == pending_.end()) continue;
        done = std::move(it->second.on_done);
        pending_.erase(it);
      }
      if (!done) continue;
      if (f.kind == FrameKind::kError) {
        done(error_of(f));
      } else {
        done(reply_of(std::move(f)));
      }
    }
  }

  void fail_all(const Status& why) EXCLUDES(mu_) {
    std::unordered_map<std::uint64_t, Pending> pending;
    {
      MutexLock lock(mu_);
      if (broken_.is_ok()) broken_ = why;
      pending.swap(pending_);
    }
    for (auto& [id, p] : pending) {
      if (p.on_done) p.on_done(why);
    }
  }

  UniqueFd fd_;
  const ClientOptions options_;
  FrameDecoder decoder_;  // the handshake's, then the reader thread's
  nlohmann::json hello_;
  std::size_t server_max_frame_ = (16u << 20) + 65536;
  // Held for one frame's whole send(), so that frames of two threads never interleave.
  Mutex write_mu_;
  Mutex mu_;
  std::unordered_map<std::uint64_t, Pending> pending_ GUARDED_BY(mu_);
  std::uint64_t next_id_ GUARDED_BY(mu_) = 1;
  Status broken_ GUARDED_BY(mu_);
  std::thread reader_;
};

Result<Client> Client::connect(const std::string& socket_path, ClientOptions options) {
  if (Status st = control::check_socket_path(socket_path); !st.is_ok()) {
    return Status::error(Code::kUnavailable, st.message());
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return unavailable(std::string("socket: ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  auto r = posix_call("connect", [&] {
    return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  });
  if (!r) return unavailable("cannot connect to " + socket_path + ": " + r.status().message());
  auto impl = std::make_unique<Impl>(std::move(fd), std::move(options));
  Status st = impl->handshake();
  if (!st.is_ok()) return st;
  Client client(std::move(impl));
  client.socket_path_ = socket_path;
  return client;
}

Status Client::reconnect() {
  auto fresh = connect(socket_path_, impl_->options());
  if (!fresh) return fresh.status();
  *this = std::move(fresh).value();
  return Status::ok();
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

std::string Client::rights() const {
  const auto& h = impl_->hello();
  return h.contains("rights") && h["rights"].is_string() ? h["rights"].get<std::string>() : "";
}

void Client::cancel_stream(std::uint64_t request_id) { impl_->cancel(request_id); }

const nlohmann::json& server_hello(const Client& client) {
  return control::RawAccess::impl(client).hello();
}

Result<Reply> raw_call(Client& client, const std::string& op, nlohmann::json args,
                       std::string blob) {
  Client::Impl& impl = control::RawAccess::impl(client);
  return impl.call(op, std::move(args), std::move(blob), {}, impl.call_timeout());
}

Result<Reply> raw_call_streaming(Client& client, const std::string& op, nlohmann::json args,
                                 std::string blob, EventFn on_event) {
  return control::RawAccess::impl(client).call(op, std::move(args), std::move(blob),
                                               std::move(on_event), std::chrono::milliseconds(0));
}

Result<std::uint64_t> raw_start(Client& client, const std::string& op, nlohmann::json args,
                                std::string blob, EventFn on_event, ReplyFn on_done) {
  return control::RawAccess::impl(client).start(op, std::move(args), std::move(blob),
                                                std::move(on_event), std::move(on_done));
}

std::string error_code_of(const Status& status) {
  if (status.is_ok()) return "";
  // A server error's message starts with its wire code: lower-case letters and '_'.
  const std::string& m = status.message();
  const auto colon = m.find(": ");
  if (colon != std::string::npos && colon > 0 &&
      m.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == colon) {
    return m.substr(0, colon);
  }
  return std::string(control::wire_code(status.code()));
}

}  // namespace sandpool
