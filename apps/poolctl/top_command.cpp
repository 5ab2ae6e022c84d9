// top: a live view of the pools (rates, latencies, queue) and their workers. On a terminal
// it redraws in place with ANSI escapes; otherwise it prints plain snapshots.
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "commands.hpp"
#include "op_call.hpp"
#include "output.hpp"

namespace sandpool::poolctl {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct TopArgs {
  std::uint64_t iterations = 0;  // 0: forever on a terminal, 1 otherwise
  std::string interval = "1s";
  std::string pool;
};

// The stats reply's pools as an array of objects with "name" (an object keyed by name is
// accepted too).
json pools_of(const json& stats) {
  const json p = stats.value("pools", json::array());
  if (!p.is_object()) return p;
  json out = json::array();
  for (const auto& [name, v] : p.items()) {
    json row = v;
    row["name"] = name;
    out.push_back(std::move(row));
  }
  return out;
}

std::string pool_name(const json& p) { return p.value("name", p.value("pool", std::string("?"))); }

// One snapshot's pool rows: counters from the service, rates from the previous snapshot.
json pool_rows(const json& pools, std::map<std::string, json>& previous, double seconds) {
  json rows = json::array();
  for (const json& p : pools) {
    const std::string name = pool_name(p);
    json row{{"pool", name}};
    for (const char* k : {"state", "workers", "queued", "in_flight"}) {
      if (p.contains(k)) row[k] = p[k];
    }
    for (const char* k : {"completed", "dead_lettered"}) {
      const auto it = previous.find(name);
      if (seconds > 0 && it != previous.end() && p.contains(k) && it->second.contains(k)) {
        row[std::string(k) + "_per_s"] =
            (p[k].get<double>() - it->second[k].get<double>()) / seconds;
      } else {
        row[std::string(k) + "_per_s"] = nullptr;
      }
    }
    const json lat = p.value("latency_ms", json::object());
    for (const char* q : {"p50", "p90", "p99"}) {
      row[std::string(q) + "_ms"] = lat.is_object() && lat.contains(q) ? lat[q] : json(nullptr);
    }
    previous[name] = p;
    rows.push_back(std::move(row));
  }
  return rows;
}

int run_top(const Cli& cli, const TopArgs& a, std::chrono::milliseconds interval) {
  auto client = connect(cli);
  if (!client) return kExitUnreachable;
  const bool live = !cli.json && ::isatty(STDOUT_FILENO) == 1;
  const std::uint64_t iterations = a.iterations != 0 ? a.iterations : (live ? 0 : 1);
  std::map<std::string, json> previous;
  auto last = Clock::now();
  for (std::uint64_t i = 0; iterations == 0 || i < iterations; ++i) {
    if (i > 0) std::this_thread::sleep_for(interval);
    auto stats = json_call<ops::Stats>(*client, {a.pool});
    if (!stats) return fail("stats", stats.status());
    auto workers = json_call<ops::Workers>(*client, {a.pool});
    if (!workers) return fail("workers", workers.status());
    const auto now = Clock::now();
    const double seconds = i == 0 ? 0 : std::chrono::duration<double>(now - last).count();
    last = now;
    json rows = pool_rows(pools_of(*stats), previous, seconds);
    const json worker_rows = workers->value("workers", json::array());
    if (cli.json) {
      print_json(std::cout,
                 json{{"time_ms", wall_now_ms()}, {"pools", rows}, {"workers", worker_rows}});
      std::cout.flush();
      continue;
    }
    if (live) std::cout << "\x1b[H\x1b[2J";  // home, clear screen
    if (i > 0 && !live) std::cout << "\n";
    std::cout << "poolctl top  " << resolve_socket(cli) << "  every "
              << human_duration_ms(static_cast<double>(interval.count())) << "\n\n";
    print_object_table(std::cout, rows, {"pool", "state", "workers", "queued", "in_flight"},
                       wall_now_ms());
    std::cout << "\n";
    if (worker_rows.empty()) {
      std::cout << "no workers\n";
    } else {
      print_object_table(std::cout, worker_rows,
                         {"pool", "pid", "state", "tasks_done", "in_flight", "rss_bytes", "cpu_ms",
                          "uptime_ms", "last_beat_ms"},
                         wall_now_ms());
    }
    std::cout.flush();
  }
  return kExitOk;
}

}  // namespace

void add_top_command(CLI::App& app, Cli& cli) {
  auto a = std::make_shared<TopArgs>();
  auto* sub = app.add_subcommand("top", "live view of pools and workers");
  sub->add_option("--iterations,-n", a->iterations,
                  "snapshots to take (default: until interrupted on a terminal, else 1)");
  sub->add_option("--interval,-d", a->interval, "time between snapshots (default 1s)");
  sub->add_option("--pool", a->pool, "only this pool");
  sub->callback([&cli, a] {
    const auto interval = duration_arg("--interval", a->interval);
    cli.action = [&cli, a, interval] { return run_top(cli, *a, interval); };
  });
}

}  // namespace sandpool::poolctl
