// poolctl: the command-line controller of poold (docs/poolctl.md).
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli_context.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
  using namespace sandpool::poolctl;
  Cli cli;
  CLI::App app{"poolctl: control a running poold (docs/poolctl.md)", "poolctl"};
  app.add_option("--socket", cli.socket_flag,
                 "control socket (else $SANDPOOL_SOCKET, ./var/poold.sock, "
                 "/run/sandpool/poold.sock)");
  app.add_flag("--json", cli.json, "machine-readable output: one JSON object (per line)");
  app.require_subcommand(1);
  add_service_commands(app, cli);
  add_submit_command(app, cli);
  add_wait_command(app, cli);
  add_batch_command(app, cli);
  add_dlq_commands(app, cli);
  add_events_command(app, cli);
  add_top_command(app, cli);
  // Global options may also follow the subcommand ("poolctl status --json").
  for (CLI::App* sub : app.get_subcommands({})) {
    sub->fallthrough();
    for (CLI::App* nested : sub->get_subcommands({})) nested->fallthrough();
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  if (!cli.action) return kExitUsage;
  try {
    return cli.action();
  } catch (const CLI::ParseError& e) {  // option checks that need the other options
    std::cerr << "poolctl: " << e.what() << "\n";
    return kExitUsage;
  }
}
