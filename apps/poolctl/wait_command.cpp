// wait: waits for a task by id (one submitted earlier, by anyone) and prints its outcome as
// submit --wait does.
#include <iostream>
#include <memory>
#include <optional>

#include "commands.hpp"
#include "output.hpp"

namespace sandpool::poolctl {

int print_outcome(const Cli& cli, const TaskReply& t) {
  if (cli.json) {
    print_json(std::cout, task_json(t));
  } else if (t.state == "completed") {
    std::cout << t.result;
    if (!t.result.empty() && t.result.back() != '\n') std::cout << "\n";
  } else {
    std::cout << "task " << t.id << " " << t.state
              << (t.reason.empty() ? "" : " (" + t.reason + ")")
              << (t.error.empty() ? "" : ": " + t.error) << "\n";
  }
  return t.state == "completed" ? kExitOk : kExitFailed;
}

void add_wait_command(CLI::App& app, Cli& cli) {
  auto id = std::make_shared<std::uint64_t>(0);
  auto timeout = std::make_shared<std::string>();
  auto* sub = app.add_subcommand(
      "wait", "wait for a task to end; print its result; exit 1 unless completed");
  sub->add_option("ID", *id, "task id")->required();
  sub->add_option("--wait-timeout", *timeout,
                  "give up waiting after this long (30s, 500ms); the task keeps running");
  sub->callback([&cli, id, timeout] {
    std::optional<std::chrono::milliseconds> limit;
    if (!timeout->empty()) limit = duration_arg("--wait-timeout", *timeout);
    cli.action = [&cli, id, limit] {
      auto client = connect(cli);
      if (!client) return static_cast<int>(kExitUnreachable);
      auto t = client->wait(*id, limit);
      if (!t) return fail("wait " + std::to_string(*id), t.status());
      return print_outcome(cli, *t);
    };
  });
}

}  // namespace sandpool::poolctl
