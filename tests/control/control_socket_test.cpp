// The socket file: mode, a stale file replaced, a live server or a non-socket refused.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "control_fixture.hpp"
#include "host_probe.hpp"

using namespace sandpool;
using namespace sandpool::testing;

TEST_CASE("the socket gets the configured mode before anyone connects") {
  TempDir dir;
  FakeHandler handler;
  const std::uint32_t mode = GENERATE(0600u, 0660u, 0666u);
  ControlServerOptions o;
  o.path = dir.file("poold.sock");
  o.mode = mode;
  auto server = start_server(o, handler);
  struct stat st {};
  REQUIRE(::stat(o.path.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 07777) == mode);
}

// A group the socket would not get by itself (it is created with this process's group, in a
// directory of that group): root may chown to any gid; another user only to one of its
// supplementary groups, and the test skips for a user that has none.
gid_t group_other_than_own() {
  const gid_t own = ::getegid();
  if (::geteuid() == 0) return own == 4242 ? 4243 : 4242;
  std::vector<gid_t> groups(static_cast<std::size_t>(std::max(::getgroups(0, nullptr), 0)));
  const int n = ::getgroups(static_cast<int>(groups.size()), groups.data());
  for (int i = 0; i < n; ++i) {
    if (groups[static_cast<std::size_t>(i)] != own) return groups[static_cast<std::size_t>(i)];
  }
  skip_test("this user has no group but its own to give the socket");
}

TEST_CASE("the socket gets the configured group") {
  TempDir dir;
  FakeHandler handler;
  ControlServerOptions o;
  o.path = dir.file("poold.sock");
  o.group = group_other_than_own();
  struct stat st {};
  REQUIRE(::stat(dir.file(".").c_str(), &st) == 0);
  REQUIRE(st.st_gid != o.group);
  auto server = start_server(o, handler);
  REQUIRE(::stat(o.path.c_str(), &st) == 0);
  CHECK(st.st_gid == o.group);
}

TEST_CASE("a stale socket left by a dead server is replaced") {
  TempDir dir;
  const std::string path = dir.file("poold.sock");
  {
    // Bound but never listening, then closed: what a crashed server leaves behind.
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  REQUIRE(std::filesystem::exists(path));
  FakeHandler handler;
  ControlServerOptions o;
  o.path = path;
  auto server = start_server(o, handler);
  Client client = connect_client(path);
  REQUIRE(client.status());
}

TEST_CASE("a second server on a live socket is refused and the first keeps serving") {
  TempDir dir;
  FakeHandler handler;
  ControlServerOptions o;
  o.path = dir.file("poold.sock");
  auto first = start_server(o, handler);
  auto second = ControlServer::start(o, handler);
  REQUIRE_FALSE(second);
  CHECK(second.status().message().find("another server") != std::string::npos);
  Client client = connect_client(o.path);
  REQUIRE(client.status());
}

TEST_CASE("a path that is not a socket is left alone and refused") {
  TempDir dir;
  const std::string path = dir.file("poold.sock");
  std::ofstream(path) << "precious";
  FakeHandler handler;
  ControlServerOptions o;
  o.path = path;
  auto s = ControlServer::start(o, handler);
  REQUIRE_FALSE(s);
  CHECK(s.status().message().find("not a socket") != std::string::npos);
  std::ifstream in(path);
  std::string text;
  in >> text;
  CHECK(text == "precious");
}

TEST_CASE("stopping the server removes its socket, and connecting then is unavailable") {
  TempDir dir;
  FakeHandler handler;
  ControlServerOptions o;
  o.path = dir.file("poold.sock");
  start_server(o, handler).reset();
  CHECK_FALSE(std::filesystem::exists(o.path));
  auto c = Client::connect(o.path);
  REQUIRE_FALSE(c);
  CHECK(c.status().code() == Code::kUnavailable);
  auto too_long = Client::connect(std::string(200, 'x'));
  REQUIRE_FALSE(too_long);
  CHECK(too_long.status().code() == Code::kUnavailable);
}
