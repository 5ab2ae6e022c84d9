// sandpool-bench: the raw IPC baselines, W1-W4, spawn-to-ready, the service (poold and
// poolctl through the socket), poold's HTTP listener under attack and the soak, one figure per line
// (`GROUP METRIC VALUE UNIT`) or as JSON. docs/performance.md explains every figure.
#include <algorithm>
#include <cctype>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "bench.hpp"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

const char* const kGroups[] = {
    "raw",       "W1",      "W2",     "W3",      "W4",           "spawn",        "sandbox",
    "service",   "journal", "soak",   "plugins", "cluster",      "fairness",     "dispatch",
    "autoscale", "http",    "memory", "curves",  "cluster-soak", "cluster-wait", "cluster-w2"};

// Parses "W1,w2,raw" into canonical group names; an unknown name is an error.
bool parse_only(const std::string& list, std::set<std::string>* out, std::string* bad) {
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto same = [&](const char* g) {
      return std::equal(item.begin(), item.end(), g, g + std::char_traits<char>::length(g),
                        [](char a, char b) { return std::tolower(a) == std::tolower(b); });
    };
    auto it = std::find_if(std::begin(kGroups), std::end(kGroups), same);
    if (it == std::end(kGroups)) {
      *bad = item;
      return false;
    }
    out->insert(*it);
  }
  return true;
}

void add_options(CLI::App& app, sandpool::bench::BenchOptions& o, std::string& only) {
  app.add_option(
      "--only", only,
      "comma-separated groups: raw,W1,W2,W3,W4,spawn,sandbox,service,journal,soak,plugins,"
      "cluster,cluster-wait,cluster-w2,fairness,dispatch,autoscale,http,memory,curves,cluster-soak "
      "(default: all but cluster-soak)");
  app.add_option("--plugin", o.plugin, "W1/W2 plugin: a name in the plugin dir or a .so path")
      ->capture_default_str();
  app.add_option("--plugin-dir", o.plugin_dir, "where plugins are (default: ../plugins)");
  app.add_option("--workers", o.workers, "W1/W2 worker processes")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--w1-crash-tasks", o.w1_crash_tasks,
                 "W1 crash run: tasks per run with and without a worker SIGKILL per second "
                 "(0: skip)");
  app.add_option("--tasks", o.tasks, "W1 tasks")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  app.add_option("--payload-size", o.payload_size, "W1/W2/raw echo payload bytes")
      ->check(CLI::Range(0, 16384))
      ->capture_default_str();
  app.add_option("--concurrency", o.concurrency,
                 "W1 tasks per worker ring (default: try 8, 64, 256 and report the best)")
      ->check(CLI::Range(1, 65536));
  app.add_option("--rounds", o.rounds, "W2 round trips and raw futex ping-pongs")
      ->check(CLI::Range(100, 10000000))
      ->capture_default_str();
  app.add_option("--spawns", o.spawns, "spawns per sandbox profile")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--w1-await", o.w1_await,
                 "W1: idle (keep Tickets, Pool::wait_idle), tickets (Ticket::wait on each), "
                 "on_done (no Tickets kept; SubmitOptions::on_done counts)")
      ->check(CLI::IsMember({"idle", "tickets", "on_done"}))
      ->capture_default_str();
  app.add_option("--w2-wait", o.w2_wait, "W2: ticket (Ticket::wait) or poll (spin on done())")
      ->check(CLI::IsMember({"ticket", "poll"}))
      ->capture_default_str();
  app.add_option("--service-tasks", o.service_tasks, "service: tasks in the poolctl batch")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  app.add_option("--status-calls", o.status_calls,
                 "service: status round trips timed while the batch runs (at most)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--journal-crash-runs", o.journal_crash_runs,
                 "journal: kill -9 runs, each on a fresh state dir; fails if any loses a task")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--cluster-tasks", o.cluster_tasks, "cluster: tasks per run")
      ->check(CLI::Range(100, 100000000))
      ->capture_default_str();
  app.add_option("--cluster-soak-tasks", o.cluster_soak_tasks,
                 "cluster-soak: tasks over the 3 poold nodes sharing a Redis pool")
      ->check(CLI::Range(1000, 100000000))
      ->capture_default_str();
  app.add_option("--cluster-soak-kill-every", o.cluster_soak_kill_every_s,
                 "cluster-soak: seconds between two SIGKILLs of a node")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--soak-tasks", o.soak_tasks, "soak: tasks through the chaos pool")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  app.add_option("--soak-deadline", o.soak_deadline_s,
                 "soak: seconds the whole soak may take; past it, open tasks count as lost and "
                 "the run fails")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--soak-seed", o.soak_seed,
                 "soak: seed of the task mix (default: random, printed)");
  app.add_option("--memory-tasks", o.memory_tasks,
                 "memory: tasks queued behind a busy worker, and tasks finished, per run")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  app.add_option("--curves-max-queued", o.curves_max_queued,
                 "curves: the deepest queue (1e3, 1e4, ... up to this); 1e7 needs ~10 GB of RAM")
      ->check(CLI::Range(1000, 100000000))
      ->capture_default_str();
  app.add_option("--curves-max-workers", o.curves_max_workers,
                 "curves: W1/W2 with 2, 8, 32, 128 workers, up to this")
      ->check(CLI::Range(2, 256))
      ->capture_default_str();
  app.add_option("--curves-tasks", o.curves_tasks, "curves: W1 tasks per worker count")
      ->check(CLI::Range(1000, 100000000))
      ->capture_default_str();
  app.add_option("--log-level", o.log_level, "pool log level on stderr")->capture_default_str();
  app.add_flag("--json", o.json, "print the figures as one JSON document");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sandpool::bench;
  BenchOptions o;
  std::string only;
  CLI::App app{
      "sandpool benchmarks: raw ring baselines, W1-W4, spawn-to-ready, sandbox, service, soak.",
      "sandpool-bench"};
  add_options(app, o, only);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return e.get_exit_code() == 0 ? rc : kExitUsage;
  }
  std::set<std::string> groups;
  std::string bad;
  if (!parse_only(only, &groups, &bad)) {
    std::cerr << "sandpool-bench: --only: unknown group '" << bad
              << "' (raw, W1, W2, W3, W4, spawn, sandbox, service, journal, soak, plugins, "
                 "cluster, cluster-wait, cluster-w2, fairness, dispatch, autoscale, http, memory, "
                 "curves, cluster-soak)\n";
    return kExitUsage;
  }
  if (groups.empty()) {
    groups.insert(std::begin(kGroups), std::end(kGroups));
    groups.erase("cluster-soak");  // minutes of three poold nodes and Redis: asked for by name
  }

  Report report(o.json);
  // The ratios need their baselines from this same run: W1 the echo stream, W2 the futex
  // ping-pong. They are measured first, while no pool threads exist (the peers are forked).
  bool ok = true;
  if (groups.count("raw") || groups.count("W2")) ok = ok && run_raw_pingpong(o, report);
  if (groups.count("raw") || groups.count("W1")) ok = ok && run_raw_echo(o, report);
  if (ok && groups.count("W1")) ok = run_w1(o, report);
  if (ok && groups.count("W2")) ok = run_w2(o, report);
  if (ok && groups.count("W3")) ok = run_w3(o, report);
  if (ok && groups.count("W4")) ok = run_w4(o, report);
  if (ok && groups.count("spawn")) ok = run_spawn(o, report);
  if (ok && groups.count("sandbox")) ok = run_sandbox_cost(o, report);
  if (ok && groups.count("dispatch")) ok = run_dispatch_cost(o, report);
  if (ok && groups.count("service")) ok = run_service(o, report);
  if (ok && groups.count("journal")) ok = run_journal(o, report);
  if (ok && groups.count("soak")) ok = run_soak(o, report);
  if (ok && groups.count("plugins")) ok = run_library_plugins(o, report);
  if (ok && groups.count("cluster")) ok = run_cluster(o, report);
  if (ok && groups.count("cluster-wait")) ok = run_cluster_wait(o, report);
  if (ok && groups.count("cluster-w2") && !groups.count("cluster")) ok = run_cluster_w2(o, report);
  if (ok && groups.count("fairness")) ok = run_fairness(o, report);
  if (ok && groups.count("autoscale")) ok = run_autoscale(o, report);
  if (ok && groups.count("http")) ok = run_http(o, report);
  if (ok && groups.count("memory")) ok = run_memory(o, report);
  if (ok && groups.count("curves")) ok = run_curves(o, report);
  if (ok && groups.count("cluster-soak")) ok = run_cluster_soak(o, report);
  report.finish(std::cout);
  return ok ? kExitOk : kExitFailed;
}
