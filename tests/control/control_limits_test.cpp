// The server's bounds and its answers to bad input: the connection limit, outstanding
// requests, slow readers, malformed and oversized frames.
#include <sys/socket.h>

#include <future>

#include "control_fixture.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using control::FrameKind;
using nlohmann::json;

namespace {

ControlServerOptions limits_options_for(const TempDir& dir) {
  ControlServerOptions o;
  o.path = dir.file("poold.sock");
  return o;
}

// The next frame must be a reply of `kind` to request `id` (with error `code`).
void expect_reply(RawConnection& raw, std::uint64_t id, FrameKind kind,
                  const std::string& code = {}) {
  auto f = raw.read();
  REQUIRE(f);
  CHECK(f->id == id);
  CHECK(f->kind == kind);
  CHECK(f->name == code);
}

}  // namespace

TEST_CASE(
    "malformed, oversized and unknown requests get errors and the next good one is answered") {
  TempDir dir;
  FakeHandler handler;
  auto o = limits_options_for(dir);
  o.max_frame = 4096;
  auto server = start_server(o, handler);
  RawConnection raw(server->path());
  raw.hello();
  expect_reply(raw, 1, FrameKind::kOk);

  raw.send(FrameKind::kRequest, 2, "status", "{not json");
  expect_reply(raw, 2, FrameKind::kError, "bad_request");
  raw.send(FrameKind::kRequest, 3, "status", "[1,2]");
  expect_reply(raw, 3, FrameKind::kError, "bad_request");
  raw.send(FrameKind::kRequest, 4, "no_such_op", "{}");
  expect_reply(raw, 4, FrameKind::kError, "unknown_op");
  raw.send(FrameKind::kRequest, 5, "submit", "{}", std::string(100000, 'x'));
  expect_reply(raw, 5, FrameKind::kError, "too_large");
  raw.send(FrameKind::kOk, 6, "", "{}");  // a server's kind of frame
  expect_reply(raw, 6, FrameKind::kError, "bad_request");
  raw.send(FrameKind::kHello, 7, "", R"({"version":1})");
  expect_reply(raw, 7, FrameKind::kError, "bad_request");
  std::string unknown_kind;
  control::encode_frame({FrameKind::kRequest, 8, "status", "{}", ""}, &unknown_kind);
  unknown_kind[4] = 77;
  raw.send_bytes(unknown_kind);
  expect_reply(raw, 8, FrameKind::kError, "bad_request");

  raw.send(FrameKind::kRequest, 10, "scale", R"({"pool":)" + std::string(3000, '[') + "}");
  expect_reply(raw, 10, FrameKind::kError, "bad_request");

  raw.send(FrameKind::kRequest, 9, "status", "");
  expect_reply(raw, 9, FrameKind::kOk);
  CHECK(handler.ops() == std::vector<std::string>{"status"});
}

TEST_CASE("an unframeable stream is answered with an error and closed, and the server carries on") {
  TempDir dir;
  FakeHandler handler;
  auto server = start_server(limits_options_for(dir), handler);
  RawConnection raw(server->path());
  raw.hello();
  expect_reply(raw, 1, FrameKind::kOk);
  raw.send_bytes(std::string("\x03\x00\x00\x00garbage", 11));
  expect_reply(raw, 0, FrameKind::kError, "bad_request");
  CHECK_FALSE(raw.read());

  Client client = connect_client(server->path());
  REQUIRE(raw_body(client, "status"));
}

TEST_CASE("a request over the outstanding limit gets busy, and the connection stays") {
  TempDir dir;
  FakeHandler handler;
  handler.park("task");
  auto o = limits_options_for(dir);
  o.max_outstanding = 2;
  auto server = start_server(o, handler);
  Client client = connect_client(server->path());
  std::promise<void> first_two;
  std::atomic<int> answered{0};
  std::atomic<int> ok_replies{0};
  for (int i = 0; i < 2; ++i) {
    REQUIRE(raw_start(client, "task", {{"id", i}}, {}, {}, [&](Result<Reply> r) {
      ok_replies += r.is_ok();  // checked below: callbacks run on the reader thread
      if (++answered == 2) first_two.set_value();
    }));
  }
  auto parked = handler.take_parked(2);
  auto busy = raw_body(client, "status");
  REQUIRE_FALSE(busy);
  CHECK(error_code_of(busy.status()) == "busy");
  for (auto& p : parked) p.responder.ok();
  REQUIRE(first_two.get_future().wait_for(kPatience) == std::future_status::ready);
  CHECK(ok_replies == 2);
  REQUIRE(raw_body(client, "status"));
}

TEST_CASE("a connection over the limit is refused with busy while existing ones keep working") {
  TempDir dir;
  FakeHandler handler;
  auto o = limits_options_for(dir);
  o.max_connections = 1;
  auto server = start_server(o, handler);
  Client first = connect_client(server->path());
  auto second = Client::connect(server->path());
  REQUIRE_FALSE(second);
  CHECK(error_code_of(second.status()) == "busy");
  REQUIRE(raw_body(first, "status"));
}

TEST_CASE("a slow reader over the output limit is disconnected and its streams are cancelled") {
  TempDir dir;
  FakeHandler handler;
  handler.park("events");
  auto o = limits_options_for(dir);
  o.max_output_bytes = 256 * 1024;
  auto server = start_server(o, handler);

  RawConnection raw(server->path());
  raw.hello();
  expect_reply(raw, 1, FrameKind::kOk);
  // A tiny receive buffer, so the kernel holds little on the reader's behalf.
  int small = 4096;
  ::setsockopt(raw.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  raw.send(FrameKind::kRequest, 2, "events", R"({"follow":true})");
  auto parked = handler.take_parked(1);
  std::promise<void> cancelled;
  parked[0].responder.on_cancel([&] { cancelled.set_value(); });

  // Never read; produce until the server gives up on this reader.
  const std::string chunk(16 * 1024, 'e');
  std::size_t sent = 0;
  while (parked[0].responder.event({{"event", "bulk"}}, chunk)) {
    sent += chunk.size();
    REQUIRE(sent < (512u << 20));  // the bound must bite long before this
  }
  REQUIRE(cancelled.get_future().wait_for(kPatience) == std::future_status::ready);
  CHECK_FALSE(parked[0].responder.is_open());

  // Everyone else is still served.
  Client other = connect_client(server->path());
  REQUIRE(raw_body(other, "status"));
}
