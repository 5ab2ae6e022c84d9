#include "cli_context.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <sandpool/units/units.hpp>

namespace sandpool::poolctl {

std::string resolve_socket(const std::string& flag, const char* env,
                           const std::function<bool(const std::string&)>& exists) {
  if (!flag.empty()) return flag;
  if (env != nullptr && *env != '\0') return env;
  const std::string local = "./var/poold.sock";
  if (exists(local)) return local;
  return "/run/sandpool/poold.sock";
}

std::string resolve_socket(const Cli& cli) {
  return resolve_socket(cli.socket_flag, std::getenv("SANDPOOL_SOCKET"), [](const std::string& p) {
    std::error_code ec;
    return std::filesystem::exists(p, ec);
  });
}

Result<Client> connect(const Cli& cli) {
  const std::string path = resolve_socket(cli);
  ClientOptions options;
  options.name = "poolctl";
  auto client = Client::connect(path, options);
  if (!client) {
    std::cerr << "poolctl: cannot reach the service at " << path << ": "
              << client.status().message() << "\n";
  }
  return client;
}

int fail(const std::string& what, const Status& status) {
  std::cerr << "poolctl: " << what << ": " << status.message() << "\n";
  return status.code() == Code::kUnavailable ? kExitUnreachable : kExitFailed;
}

std::chrono::milliseconds duration_arg(const std::string& name, const std::string& text) {
  auto d = parse_duration(text);
  if (!d) throw CLI::ValidationError(name, d.status().to_string());
  return *d;
}

}  // namespace sandpool::poolctl
