// Which socket poolctl uses: --socket, else $SANDPOOL_SOCKET, else ./var/poold.sock when it
// exists, else /run/sandpool/poold.sock — the pure rule, and the real binary following it.
#include <catch2/catch.hpp>

#include <filesystem>

#include "cli_context.hpp"
#include "poolctl_runner.hpp"
#include "scripted_service.hpp"

using namespace sandpool::testing;
using sandpool::poolctl::resolve_socket;

TEST_CASE("the socket comes from the flag, the environment, ./var, then /run") {
  auto exists = [](bool there) { return [there](const std::string&) { return there; }; };
  CHECK(resolve_socket("/a.sock", "/b.sock", exists(true)) == "/a.sock");
  CHECK(resolve_socket("", "/b.sock", exists(true)) == "/b.sock");
  CHECK(resolve_socket("", "", exists(true)) == "./var/poold.sock");
  CHECK(resolve_socket("", nullptr, exists(true)) == "./var/poold.sock");
  CHECK(resolve_socket("", nullptr, exists(false)) == "/run/sandpool/poold.sock");
}

TEST_CASE("poolctl finds the service through $SANDPOOL_SOCKET and through ./var/poold.sock") {
  TempDir dir;
  std::filesystem::create_directory(dir.path() + "/var");
  ScriptedService service(dir.path() + "/var");
  CHECK(run_poolctl({"status"}, {.socket_env = service.socket(), .cwd = ""}).exit_code == 0);
  CHECK(run_poolctl({"status"}, {.socket_env = "", .cwd = dir.path()}).exit_code == 0);
  // The flag wins over the environment, the environment over ./var.
  CHECK(run_poolctl({"--socket", service.socket(), "status"},
                    {.socket_env = "/nowhere.sock", .cwd = ""})
            .exit_code == 0);
  auto env_wins = run_poolctl({"status"}, {.socket_env = "/nowhere.sock", .cwd = dir.path()});
  CHECK(env_wins.exit_code == 3);
  CHECK(env_wins.err.find("/nowhere.sock") != std::string::npos);
  TempDir empty;
  auto fallback = run_poolctl({"status"}, {.socket_env = "", .cwd = empty.path()});
  CHECK(fallback.exit_code == 3);
  CHECK(fallback.err.find("/run/sandpool/poold.sock") != std::string::npos);
}
