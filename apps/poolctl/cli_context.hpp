// What every poolctl command shares: the global options, the exit codes, the socket
// resolution and the connection (docs/poolctl.md).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <sandpool/base/status.hpp>
#include <sandpool/control/client.hpp>

namespace sandpool::poolctl {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,       // the operation failed or the task did not complete
  kExitUsage = 2,        // bad command line
  kExitUnreachable = 3,  // cannot connect or handshake, or the connection was lost
};

// The global options, and the action the chosen subcommand registered. Owned by main();
// commands capture it by reference.
struct Cli {
  std::string socket_flag;  // --socket, empty when not given
  bool json = false;        // --json
  std::function<int()> action;
};

// The socket to use: `flag` when set, else `env` ($SANDPOOL_SOCKET) when set and not
// empty, else ./var/poold.sock when `exists` says it is there, else /run/sandpool/poold.sock.
std::string resolve_socket(const std::string& flag, const char* env,
                           const std::function<bool(const std::string&)>& exists);
std::string resolve_socket(const Cli& cli);  // with the real environment and filesystem

// Connects and handshakes; on failure prints which socket could not be reached.
Result<Client> connect(const Cli& cli);

// Prints "poolctl: <what>: <message>" on stderr and returns the exit code for `status`:
// kExitUnreachable for kUnavailable (connection lost), kExitFailed otherwise.
int fail(const std::string& what, const Status& status);

// Parses a duration option ("250ms", "30s", bare seconds); throws CLI::ValidationError.
std::chrono::milliseconds duration_arg(const std::string& name, const std::string& text);

}  // namespace sandpool::poolctl
