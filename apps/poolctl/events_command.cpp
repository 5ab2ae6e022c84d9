// events: the service's task and worker lifecycle events, one line (or JSON object) each.
#include <ctime>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "op_call.hpp"
#include "output.hpp"

namespace sandpool::poolctl {
namespace {

using nlohmann::json;

// "12:04:05.123" in local time.
std::string clock_text(std::int64_t ms) {
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::localtime_r(&secs, &tm);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

// "<time> <pool> <event> key=value ..." (values with spaces quoted).
std::string event_line(const json& e) {
  const std::int64_t now = wall_now_ms();
  const std::int64_t at = e.contains("time_ms") && e["time_ms"].is_number_integer()
                              ? e["time_ms"].get<std::int64_t>()
                              : now;
  std::string line = clock_text(at) + " " + e.value("pool", std::string("-")) + " " +
                     e.value("event", std::string("event"));
  for (const auto& [k, v] : e.items()) {
    if (k == "time_ms" || k == "pool" || k == "event") continue;
    std::string text = v.is_structured() ? v.dump(-1, ' ', false, json::error_handler_t::replace)
                                         : human_field(k, v, now);
    if (text.find(' ') != std::string::npos) text = "\"" + text + "\"";
    line += " " + k + "=" + text;
  }
  return line;
}

}  // namespace

void add_events_command(CLI::App& app, Cli& cli) {
  auto follow = std::make_shared<bool>(false);
  auto pool = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("events", "task and worker lifecycle events");
  sub->add_flag("-f,--follow", *follow, "keep streaming new events until interrupted");
  sub->add_option("--pool", *pool, "only this pool's events");
  sub->callback([&cli, follow, pool] {
    cli.action = [&cli, follow, pool] {
      auto client = connect(cli);
      if (!client) return static_cast<int>(kExitUnreachable);
      const Status s = client->events(*follow, *pool, [&cli](const ops::PoolEventRecord& r) {
        const json e = ops::encode(r);
        cli.json ? print_json(std::cout, e) : void(std::cout << event_line(e) << "\n");
        std::cout.flush();
        return static_cast<bool>(std::cout);
      });
      if (!s.is_ok()) return fail("events", s);
      return static_cast<int>(kExitOk);
    };
  });
}

}  // namespace sandpool::poolctl
