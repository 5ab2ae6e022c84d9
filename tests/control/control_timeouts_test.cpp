// Bounded waits on both sides of the control protocol: the server closes a connection that
// never says hello; the client gives up on a hello or a synchronous call nobody answers,
// with Code::kTimeout, and stays usable after a call timed out.
#include <sys/socket.h>
#include <sys/un.h>

#include <future>

#include "control_fixture.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using namespace std::chrono_literals;
using control::FrameKind;

TEST_CASE("a connection that never says hello gets a timeout error and is closed") {
  TempDir dir;
  FakeHandler handler;
  ControlServerOptions o;
  o.path = dir.file("poold.sock");
  o.hello_timeout = 200ms;
  auto server = start_server(o, handler);
  RawConnection polite(server->path());
  polite.hello();
  auto hello = polite.read();
  REQUIRE(hello);
  REQUIRE(hello->kind == FrameKind::kOk);

  RawConnection silent(server->path());
  auto refused = silent.read();
  REQUIRE(refused);
  CHECK(refused->kind == FrameKind::kError);
  CHECK(refused->id == 0);
  CHECK(refused->name == "timeout");
  CHECK(refused->json.find("no hello within 200 ms") != std::string::npos);
  CHECK_FALSE(silent.read());  // closed

  // The one that said hello in time is kept, however long it then stays quiet.
  polite.send(FrameKind::kRequest, 2, "status", "{}");
  auto answer = polite.read();
  REQUIRE(answer);
  CHECK(answer->kind == FrameKind::kOk);
  CHECK(answer->id == 2);
}

TEST_CASE("the client gives up on a hello nobody answers: kTimeout") {
  TempDir dir;
  const std::string path = dir.file("mute.sock");
  // Listens, so connect() succeeds through the backlog, but never accepts or answers.
  UniqueFd mute(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  REQUIRE(::bind(mute.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(mute.get(), 4) == 0);

  ClientOptions options;
  options.hello_timeout = 200ms;
  auto c = Client::connect(path, options);
  REQUIRE_FALSE(c);
  CHECK(c.status().code() == Code::kTimeout);
  CHECK(c.status().message().find("did not answer the hello within 200 ms") != std::string::npos);
}

TEST_CASE("a call past call_timeout fails with kTimeout, is cancelled, and the client goes on") {
  TempDir dir;
  FakeHandler handler;
  handler.park("reload");
  ControlServerOptions o;
  o.path = dir.file("poold.sock");
  auto server = start_server(o, handler);
  ClientOptions options;
  options.name = "impatient";
  options.call_timeout = 200ms;
  auto c = Client::connect(server->path(), options);
  REQUIRE(c);

  auto late = as_json(c->reload());
  REQUIRE_FALSE(late);
  CHECK(late.status().code() == Code::kTimeout);
  CHECK(late.status().message().find("no reply to 'reload' within 200 ms") != std::string::npos);

  // The server saw the request cancelled: answering it now sends nothing.
  auto parked = handler.take_parked(1);
  std::promise<void> cancelled;
  parked[0].responder.on_cancel([&cancelled] { cancelled.set_value(); });
  REQUIRE(cancelled.get_future().wait_for(kPatience) == std::future_status::ready);
  CHECK_FALSE(parked[0].responder.ok({{"late", true}}));
  auto status = raw_body(*c, "status");  // same connection, answered at once
  REQUIRE(status);
  CHECK((*status)["client"] == "impatient");
}
