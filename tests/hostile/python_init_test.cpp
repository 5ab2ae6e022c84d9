// A Python handler module whose import-time code (run in the plugin's init) reaches outside
// what the pool declared: it reads a world-readable file outside its paths, or connects to a
// listener on 127.0.0.1. Init is confined (docs/security.md, "Init"): the pool does not start
// and says why, naming the key that would grant it; declared (sandbox.init.read_paths,
// sandbox.init.network: true), the same module starts.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <sandpool/sandbox/lockdown.hpp>

#include "hostile_world.hpp"
#include "public_dir.hpp"
#include "python_init_paths.hpp"

using namespace sandpool;
using sandpool::hostile::hostile_options;
using sandpool::hostile::HostileWorld;
using sandpool::hostile::skip_test;
using sandpool::testing::PublicDir;

namespace {

// A non-blocking TCP listener on 127.0.0.1, an ephemeral port. Owns its fd.
class Listener {
 public:
  Listener() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 8) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd_); }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  int port() const { return port_; }
  // Returns true iff a connection is waiting (the module's connect completes the handshake
  // before its import returns, so a connection made at init is there by now).
  bool was_connected() const {
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return false;
    ::close(c);
    return true;
  }

 private:
  int fd_;
  int port_ = 0;
};

// The leaky module: at import it reads `secret` or connects to `port`, as `what` says.
std::string leaky_module(const std::string& what, const std::string& secret, int port) {
  return "import socket\n"
         "if '" +
         what +
         "' == 'read':\n"
         "    DATA = open('" +
         secret +
         "', 'rb').read()\n"
         "else:\n"
         "    s = socket.create_connection(('127.0.0.1', " +
         std::to_string(port) +
         "))\n"
         "    s.close()\n"
         "    DATA = b'connected'\n"
         "def handle(payload):\n"
         "    return DATA\n";
}

PoolOptions leaky_options(const PublicDir& dir) {
  PoolOptions o = hostile_options(std::string(SANDPOOL_PLUGIN_DIR) + "/libpython.so");
  o.plugin_config_json = R"({"handler": "leaky:handle", "path": [")" + dir.path() + "\"]}";
  o.sandbox.init.read_paths = sandpool::testing::python_init_read_paths(o.plugin_config_json);
  o.max_init_failures = 1;
  return o;
}

}  // namespace

TEST_CASE("a python module that reads outside its paths or connects at import does not start") {
  const std::string what = GENERATE("read", "connect");
  INFO(what);
  if (what == "read" && sandbox::probe_landlock().abi == 0) {
    skip_test("no Landlock: " + sandbox::probe_landlock().unavailable);
  }
  PublicDir secret_dir;  // world-readable, like a secret left readable by mistake
  secret_dir.write("secret", "the-import-time-secret-7f3e");
  const std::string secret = secret_dir.path() + "/secret";
  Listener listener;
  PublicDir dir;
  dir.write("leaky.py", leaky_module(what, secret, listener.port()));

  HostileWorld world;
  PoolOptions o = leaky_options(dir);
  const auto refused = world.try_start(o);
  REQUIRE_FALSE(refused);
  const std::string message = refused.status().message();
  INFO(message);
  CHECK(message.find("init failed") != std::string::npos);
  if (what == "read") {
    CHECK(message.find("cannot import 'leaky': PermissionError: [Errno 13] Permission denied: '" +
                       secret + "'") != std::string::npos);
    CHECK(message.find("sandbox.init.read_paths") != std::string::npos);
  } else {
    CHECK(message.find("cannot import 'leaky': PermissionError: [Errno 1] Operation not "
                       "permitted") != std::string::npos);
    CHECK(message.find("makes no socket unless sandbox.init.network is true") != std::string::npos);
  }
  CHECK_FALSE(listener.was_connected());
  world.require_pools_serve();
  world.close_and_check_clean();

  // Declared, the same module starts and its init did what it asked.
  HostileWorld declared;
  if (what == "read") {
    o.sandbox.init.read_paths.push_back(secret_dir.path());
  } else {
    o.sandbox.init.network = true;
  }
  declared.start(o);
  const TaskResult r = declared.attack("python", "x");
  INFO(r.error);
  CHECK(r.result == (what == "read" ? "the-import-time-secret-7f3e" : "connected"));
  if (what == "connect") CHECK(listener.was_connected());
  declared.close_and_check_clean();
}
