// What one peer may hold of the control server, over real sockets, with peers that are
// really other uids (connected from a child that drops to them, see peer_connector.hpp):
// the connections kept for admins, the per-uid connection share, the stream caps, and the
// idle timeout. Needs root (to connect as other uids): skipped (77) otherwise.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "control_fixture.hpp"
#include "peer_connector.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using control::FrameKind;
using nlohmann::json;

namespace {

constexpr uid_t kReader = 65534;       // nobody
constexpr uid_t kOtherReader = 65533;  // a second uid without admin rights

void require_root() {
  if (::geteuid() == 0) return;
  std::fprintf(stderr, "skipped: connecting as other uids needs root\n");
  std::exit(77);
}

// Both readers get read rights; root stays admin. The socket is reachable by every uid.
ControlServerOptions peer_options(const TempDir& dir) {
  REQUIRE(::chmod(dir.file("").c_str(), 0755) == 0);
  ControlServerOptions o;
  o.path = dir.file("poold.sock");
  o.mode = 0666;
  o.access.grants = {{AccessGrant::Kind::kUid, kReader, Rights::kRead},
                     {AccessGrant::Kind::kUid, kOtherReader, Rights::kRead}};
  return o;
}

// The next frame is a reply of `kind` to `id` (error `code`); returns its message.
std::string expect_peer_reply(RawConnection& raw, std::uint64_t id, FrameKind kind,
                              const std::string& code = {}) {
  auto f = raw.read();
  REQUIRE(f);
  CHECK(f->id == id);
  CHECK(f->kind == kind);
  CHECK(f->name == code);
  if (f->kind != FrameKind::kError) return {};
  return json::parse(f->json).value("message", std::string());
}

// Says hello on `raw`; requires the server to accept it with `rights`.
void hello_ok(RawConnection& raw, const std::string& rights) {
  raw.hello();
  auto f = raw.read();
  REQUIRE(f);
  REQUIRE(f->kind == FrameKind::kOk);
  CHECK(json::parse(f->json)["rights"] == rights);
}

// Requires the server to have refused `raw` at accept: a connection-level `busy` whose
// message contains `why`, then the close.
void refused_busy(RawConnection& raw, const std::string& why) {
  const std::string message = expect_peer_reply(raw, 0, FrameKind::kError, "busy");
  INFO(message);
  CHECK(message.find(why) != std::string::npos);
  CHECK_FALSE(raw.read());
}

std::vector<RawConnection> wrap(std::vector<UniqueFd> fds) {
  std::vector<RawConnection> out;
  for (auto& fd : fds) out.emplace_back(std::move(fd));
  return out;
}

}  // namespace

TEST_CASE(
    "peers without admin rights get neither the admins' connections nor more than a uid's share") {
  require_root();
  TempDir dir;
  FakeHandler handler;
  auto o = peer_options(dir);
  o.max_connections = 8;
  o.admin_reserved_connections = 2;
  o.max_connections_per_uid = 4;
  auto server = start_server(o, handler);

  // One uid: its share, then `busy` naming the per-uid limit.
  auto reader = wrap(connect_as(kReader, server->path(), 5));
  for (int i = 0; i < 4; ++i) hello_ok(reader[i], "read");
  refused_busy(reader[4], "limit 4 per uid");
  // Another uid: what is left of the 6 not kept for admins, then `busy` saying why.
  auto other = wrap(connect_as(kOtherReader, server->path(), 3));
  for (int i = 0; i < 2; ++i) hello_ok(other[i], "read");
  refused_busy(other[2], "2 of 8 are kept for admins");

  // The readers hold every slot they may, idle: admins still get in, up to the total.
  Client admin1 = connect_client(server->path());
  Client admin2 = connect_client(server->path());
  CHECK(admin1.rights() == "admin");
  REQUIRE(admin1.status());
  REQUIRE(admin2.status());
  auto third = Client::connect(server->path());
  REQUIRE_FALSE(third);
  CHECK(error_code_of(third.status()) == "busy");
  CHECK(third.status().message().find("limit 8") != std::string::npos);
  // The readers' connections still work.
  reader[0].send(FrameKind::kRequest, 2, "status", "{}");
  expect_peer_reply(reader[0], 2, FrameKind::kOk);
}

TEST_CASE("streams are capped per connection and per uid, and a cancelled one frees its slot") {
  require_root();
  TempDir dir;
  FakeHandler handler;
  handler.park("events");
  auto o = peer_options(dir);
  o.max_streams_per_connection = 2;
  o.max_streams_per_uid = 3;
  auto server = start_server(o, handler);
  auto conns = wrap(connect_as(kReader, server->path(), 2));
  RawConnection& first = conns[0];
  RawConnection& second = conns[1];
  hello_ok(first, "read");
  hello_ok(second, "read");

  const std::string follow = R"({"follow":true})";
  first.send(FrameKind::kRequest, 2, "events", follow);
  first.send(FrameKind::kRequest, 3, "events", follow);
  auto parked = handler.take_parked(2);
  first.send(FrameKind::kRequest, 4, "events", follow);
  CHECK(expect_peer_reply(first, 4, FrameKind::kError, "busy").find("limit 2 per connection") !=
        std::string::npos);
  // A request that is not a stream is not counted.
  first.send(FrameKind::kRequest, 5, "status", "{}");
  expect_peer_reply(first, 5, FrameKind::kOk);

  second.send(FrameKind::kRequest, 2, "events", follow);
  auto third = handler.take_parked(1);
  second.send(FrameKind::kRequest, 3, "events", follow);
  CHECK(expect_peer_reply(second, 3, FrameKind::kError, "busy").find("limit 3 per uid") !=
        std::string::npos);

  // Another uid (root) is not held back by this one's streams.
  RawConnection root(server->path());
  hello_ok(root, "admin");
  root.send(FrameKind::kRequest, 2, "events", follow);
  auto roots = handler.take_parked(1);

  // Cancelling one gives its slot back at once: the reply says it is gone.
  first.send(FrameKind::kCancel, 2, "", "");
  expect_peer_reply(first, 2, FrameKind::kError, "cancelled");
  second.send(FrameKind::kRequest, 4, "events", follow);
  auto again = handler.take_parked(1);
  // So does a final reply.
  third[0].responder.ok();
  expect_peer_reply(second, 2, FrameKind::kOk);
  second.send(FrameKind::kRequest, 5, "events", follow);
  auto more = handler.take_parked(1);
  CHECK(more[0].request.peer.uid == kReader);
}

TEST_CASE("a connection idle past idle_timeout is closed with timeout, one with a stream is not") {
  TempDir dir;
  FakeHandler handler;
  handler.park("events");
  ControlServerOptions o;
  o.path = dir.file("poold.sock");
  o.idle_timeout = std::chrono::milliseconds(2000);  // long enough for a loaded host
  auto server = start_server(o, handler);

  // The streaming connection sends its last request before the idle one says hello, so it
  // has been silent longer when the idle one is closed.
  RawConnection streaming(server->path());
  hello_ok(streaming, "admin");
  streaming.send(FrameKind::kRequest, 2, "events", R"({"follow":true})");
  auto parked = handler.take_parked(1);
  RawConnection idle(server->path());
  hello_ok(idle, "admin");

  const std::string why = expect_peer_reply(idle, 0, FrameKind::kError, "timeout");
  CHECK(why.find("idle for 2000 ms") != std::string::npos);
  CHECK_FALSE(idle.read());

  // Still served, its stream open.
  streaming.send(FrameKind::kRequest, 3, "status", "{}");
  expect_peer_reply(streaming, 3, FrameKind::kOk);
  REQUIRE(parked[0].responder.event({{"event", "still"}}));
  expect_peer_reply(streaming, 2, FrameKind::kEvent);
  // Once its stream ends it is idle like any other.
  parked[0].responder.ok();
  expect_peer_reply(streaming, 2, FrameKind::kOk);
  expect_peer_reply(streaming, 0, FrameKind::kError, "timeout");
  CHECK_FALSE(streaming.read());
}
