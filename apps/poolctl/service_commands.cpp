// The request/reply commands: each connects, makes one call and prints its reply.
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>

#include "commands.hpp"
#include "op_call.hpp"
#include "output.hpp"

namespace sandpool::poolctl {
namespace {

using nlohmann::json;

// Connects, runs `op` and prints its reply (JSON as is, or `human` for people).
int run_call(const Cli& cli, const std::string& what,
             const std::function<Result<json>(Client&)>& op,
             const std::function<void(const json&)>& human) {
  auto client = connect(cli);
  if (!client) return kExitUnreachable;
  auto reply = op(*client);
  if (!reply) return fail(what, reply.status());
  if (cli.json) {
    print_json(std::cout, *reply);
  } else {
    human(*reply);
  }
  return kExitOk;
}

// A human rendering that says what was done, then any fields the service sent back.
std::function<void(const json&)> done_line(std::string text) {
  return [text = std::move(text)](const json& body) {
    std::cout << text << "\n";
    if (body.is_object() && !body.empty()) print_human(std::cout, body, wall_now_ms(), 2);
  };
}

// "KILL", "SIGKILL", "kill" or "9" -> 9; throws CLI::ValidationError otherwise.
int parse_signal(const std::string& text) {
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) {
    const int n = std::atoi(text.c_str());
    if (n > 0 && n < NSIG && std::to_string(n) == text) return n;
    throw CLI::ValidationError("--signal", "no signal number " + text);
  }
  std::string name;
  for (char c : text) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
  for (int s = 1; s < NSIG; ++s) {
    const char* abbrev = sigabbrev_np(s);
    if (abbrev != nullptr && name == abbrev) return s;
  }
  throw CLI::ValidationError("--signal", "no signal named " + text);
}

// What `workers` and `stats` show without --wide: the columns a person reads at a glance,
// about 100 characters a row. --wide shows every field the service sends: these first, then
// the others in name order (the worker's `slot` just after `pool`, its long `isolation`
// string after the default columns).
const std::vector<std::string> kWorkerColumns = {"pool",      "pid",         "state",  "tasks_done",
                                                 "in_flight", "rss_bytes",   "cpu_ms", "uptime_ms",
                                                 "restarts",  "last_beat_ms"};
const std::vector<std::string> kStatsColumns = {
    "name",      "state",         "workers",        "queued",        "in_flight",
    "completed", "dead_lettered", "latency_p50_ms", "latency_p99_ms"};

// One line per pool under the table: its worker target, bounds, and why the target is what it
// is ("pool img: target 3 (1..8, autoscale): autoscale up: queue wait 240 ms > ...").
void print_worker_targets(const json& reply) {
  for (const json& p : reply.value("pools", json::array())) {
    std::cout << "pool " << p.value("pool", std::string()) << ": target "
              << p.value("target_workers", 0) << " (" << p.value("min", 0) << ".."
              << p.value("max", 0) << (p.value("autoscale", false) ? ", autoscale" : "")
              << "): " << p.value("reason", std::string()) << "\n";
  }
}

void print_workers(const json& reply, bool wide) {
  const json rows = reply.value("workers", json::array());
  if (rows.empty()) {
    std::cout << "no workers\n";
  } else if (!wide) {
    print_object_table(std::cout, rows, kWorkerColumns, wall_now_ms(), Columns::kOnlyPreferred);
  } else {
    std::vector<std::string> columns = kWorkerColumns;
    columns.insert(columns.begin() + 1, "slot");
    columns.push_back("isolation");
    print_object_table(std::cout, rows, columns, wall_now_ms());
  }
  print_worker_targets(reply);
}

void print_stats(const json& reply, bool wide) {
  const json rows = reply.value("pools", json::array());
  if (rows.empty()) {
    std::cout << "no pools\n";
    return;
  }
  print_object_table(std::cout, rows, kStatsColumns, wall_now_ms(),
                     wide ? Columns::kAll : Columns::kOnlyPreferred);
}

void print_task(const TaskReply& t) {
  const std::int64_t now = wall_now_ms();
  const json body = ops::encode(t.account);
  json head = json::object();
  for (const char* k :
       {"id", "type", "pool", "tenant", "state", "not_before_ms", "reason", "error", "attempts"}) {
    if (body.contains(k) && !(body[k].is_string() && body[k].get<std::string>().empty()))
      head[k] = body[k];
  }
  print_human(std::cout, head, now);
  const json history = body.value("history", json::array());
  if (history.is_array() && !history.empty()) {
    std::cout << "\nhistory:\n";
    print_object_table(std::cout, history,
                       {"number", "outcome", "worker_pid", "started_ms", "ended_ms", "error"}, now);
    for (const json& a : history) {
      if (!a.is_object() || !a.contains("backtrace") || !a["backtrace"].is_string()) continue;
      std::cout << "\nbacktrace of attempt " << a.value("number", 0) << ":\n";
      std::string line;
      for (char c : a["backtrace"].get<std::string>() + "\n") {
        if (c != '\n') {
          line += c;
        } else if (!line.empty()) {
          std::cout << "  " << line << "\n";
          line.clear();
        }
      }
    }
  }
  if (!t.result.empty()) std::cout << "\nresult:\n" << t.result << "\n";
  if (t.account.result_withheld) {
    std::cout << "\nresult: withheld (needs admin rights)\n";
  }
}

}  // namespace

json task_json(const TaskReply& t) {
  json j = ops::encode(t.account);
  if (!t.result.empty()) j["result"] = t.result;
  return j;
}

namespace {

// tasks: the tasks poold holds, filtered.
void add_tasks_command(CLI::App& app, Cli& cli) {
  auto query = std::make_shared<ops::TaskListArgs>();
  auto* tasks = app.add_subcommand("tasks", "the tasks poold holds, newest first, filtered");
  tasks->add_option("--pool", query->pool, "only this pool's");
  tasks->add_option("--type", query->type, "only this type");
  tasks->add_option("--state", query->state, "only this state (queued, running, completed, ...)");
  tasks->add_option("--key", query->key, "only this affinity key");
  auto tenant = std::make_shared<std::string>();
  auto* tenant_opt =
      tasks->add_option("--tenant", *tenant, "only this tenant's (\"\": the default tenant's)");
  tasks->add_option("--limit", query->limit, "at most this many (1..1000)")->capture_default_str();
  tasks->callback([&cli, query, tenant, tenant_opt] {
    if (tenant_opt->count() > 0) query->tenant = *tenant;
    cli.action = [&cli, query] {
      return run_call(
          cli, "tasks", [query](Client& c) { return json_call<ops::TaskList>(c, *query); },
          [](const json& b) {
            if (b["tasks"].empty()) {
              std::cout << "no tasks\n";
              return;
            }
            print_object_table(std::cout, b["tasks"],
                               {"id", "pool", "tenant", "type", "state", "reason", "not_before_ms",
                                "attempts", "key", "submitted_ms", "error"},
                               wall_now_ms());
            if (b.value("truncated", false)) std::cout << "(more match: raise --limit)\n";
          });
    };
  });
}

// status, version, workers, stats, task, tasks, cancel.
void add_task_and_read_commands(CLI::App& app, Cli& cli) {
  app.add_subcommand("status", "the service: pid, start time, pools")->callback([&cli] {
    cli.action = [&cli] {
      return run_call(
          cli, "status", [](Client& c) { return json_call<ops::ServerStatus>(c, {}); },
          [](const json& b) { print_human(std::cout, b, wall_now_ms()); });
    };
  });

  app.add_subcommand("version", "poold's release and protocol version")->callback([&cli] {
    cli.action = [&cli] {
      return run_call(
          cli, "version", [](Client& c) { return json_call<ops::Version>(c, {}); },
          [](const json& b) {
            std::cout << "poold " << b.value("version", std::string()) << " (protocol "
                      << b.value("protocol", 0) << ")\n";
          });
    };
  });

  auto pool = std::make_shared<std::string>();
  auto wide = std::make_shared<bool>(false);
  auto* workers = app.add_subcommand("workers", "the workers of every pool, or of POOL");
  workers->add_option("POOL", *pool, "pool name");
  workers->add_flag("--wide,-w", *wide, "every column, the whole isolation string included");
  workers->callback([&cli, pool, wide] {
    cli.action = [&cli, pool, wide] {
      return run_call(
          cli, "workers", [pool](Client& c) { return json_call<ops::Workers>(c, {*pool}); },
          [wide](const json& b) { print_workers(b, *wide); });
    };
  });

  auto* stats = app.add_subcommand("stats", "counters and latencies per pool");
  stats->add_option("POOL", *pool, "pool name");
  stats->add_flag("--wide,-w", *wide, "every counter and latency, not only the main ones");
  stats->callback([&cli, pool, wide] {
    cli.action = [&cli, pool, wide] {
      return run_call(
          cli, "stats", [pool](Client& c) { return json_call<ops::Stats>(c, {*pool}); },
          [wide](const json& b) { print_stats(b, *wide); });
    };
  });

  auto id = std::make_shared<std::uint64_t>(0);
  auto* task = app.add_subcommand("task", "a task's state, attempts and history");
  task->add_option("ID", *id, "task id")->required();
  task->callback([&cli, id] {
    cli.action = [&cli, id] {
      auto client = connect(cli);
      if (!client) return static_cast<int>(kExitUnreachable);
      auto t = client->task(*id);
      if (!t) return fail("task " + std::to_string(*id), t.status());
      cli.json ? print_json(std::cout, task_json(*t)) : print_task(*t);
      return static_cast<int>(kExitOk);
    };
  });

  add_tasks_command(app, cli);

  auto* cancel = app.add_subcommand("cancel", "cancel a queued or running task");
  cancel->add_option("ID", *id, "task id")->required();
  cancel->callback([&cli, id] {
    cli.action = [&cli, id] {
      return run_call(
          cli, "cancel", [id](Client& c) { return json_call<ops::Cancel>(c, {*id}); },
          done_line("task " + std::to_string(*id) + ": cancel requested"));
    };
  });
}

// kill-worker: a signal to one worker of `pool` (the pool commands' shared POOL).
void add_kill_worker_command(CLI::App& app, Cli& cli, const std::shared_ptr<std::string>& pool) {
  auto pid = std::make_shared<std::int32_t>(0);
  auto signal = std::make_shared<std::string>("KILL");
  auto* kill = app.add_subcommand("kill-worker", "send a signal to one worker (fault injection)");
  kill->add_option("POOL", *pool, "pool name")->required();
  kill->add_option("PID", *pid, "worker pid")->required();
  kill->add_option("--signal", *signal, "name (KILL, SIGTERM) or number; default KILL");
  kill->callback([&cli, pool, pid, signal] {
    const int signo = parse_signal(*signal);
    cli.action = [&cli, pool, pid, signo] {
      return run_call(
          cli, "kill-worker",
          [&](Client& c) {
            return json_call<ops::KillWorker>(c, {*pool, *pid, signo});
          },
          done_line(*pool + ": sent SIG" + sigabbrev_np(signo) + " to worker " +
                    std::to_string(*pid)));
    };
  });
}

// scale, strategy, drain, resume, restart, kill-worker.
void add_pool_commands(CLI::App& app, Cli& cli) {
  auto pool = std::make_shared<std::string>();
  auto count = std::make_shared<std::uint32_t>(0);
  auto* scale = app.add_subcommand("scale", "set a pool's worker count");
  scale->add_option("POOL", *pool, "pool name")->required();
  scale->add_option("N", *count, "workers")->required();
  scale->callback([&cli, pool, count] {
    cli.action = [&cli, pool, count] {
      return run_call(
          cli, "scale",
          [&](Client& c) {
            return json_call<ops::Scale>(c, {*pool, *count});
          },
          done_line(*pool + ": scaling to " + std::to_string(*count) + " workers"));
    };
  });

  auto name = std::make_shared<std::string>();
  auto* strategy = app.add_subcommand("strategy", "set a pool's dispatch strategy");
  strategy->add_option("POOL", *pool, "pool name")->required();
  strategy->add_option("NAME", *name, "round-robin, least-loaded, random, affinity")->required();
  strategy->callback([&cli, pool, name] {
    cli.action = [&cli, pool, name] {
      return run_call(
          cli, "strategy",
          [&](Client& c) {
            return json_call<ops::Strategy>(c, {*pool, *name});
          },
          done_line(*pool + ": dispatch strategy " + *name));
    };
  });

  for (const char* verb : {"drain", "resume"}) {
    const bool is_drain = std::string(verb) == "drain";
    auto* sub = app.add_subcommand(verb, is_drain ? "stop taking tasks, finish the queued ones"
                                                  : "take tasks again after a drain");
    sub->add_option("POOL", *pool, "pool name")->required();
    sub->callback([&cli, pool, is_drain] {
      cli.action = [&cli, pool, is_drain] {
        return run_call(
            cli, is_drain ? "drain" : "resume",
            [&](Client& c) {
              return is_drain ? json_call<ops::Drain>(c, {*pool})
                              : json_call<ops::Resume>(c, {*pool});
            },
            done_line(*pool + (is_drain ? ": draining" : ": resumed")));
      };
    });
  }

  auto rolling = std::make_shared<bool>(false);
  auto* restart = app.add_subcommand("restart", "restart a pool's workers");
  restart->add_option("POOL", *pool, "pool name")->required();
  restart->add_flag("--rolling", *rolling, "one worker at a time, the pool keeps serving");
  restart->callback([&cli, pool, rolling] {
    cli.action = [&cli, pool, rolling] {
      return run_call(
          cli, "restart",
          [&](Client& c) {
            return json_call<ops::Restart>(c, {*pool, *rolling});
          },
          done_line(*pool + (*rolling ? ": rolling restart" : ": restart") + " begun"));
    };
  });

  add_kill_worker_command(app, cli, pool);
}

// reload, shutdown.
void add_admin_commands(CLI::App& app, Cli& cli) {
  app.add_subcommand("reload", "re-read the configuration file")->callback([&cli] {
    cli.action = [&cli] {
      return run_call(
          cli, "reload", [](Client& c) { return json_call<ops::Reload>(c, {}); },
          done_line("configuration reloaded"));
    };
  });

  auto timeout = std::make_shared<std::string>();
  auto* shutdown = app.add_subcommand("shutdown", "stop the service (in-flight tasks finish)");
  shutdown->add_option("--timeout", *timeout, "how long in-flight tasks may take (30s, 500ms)");
  shutdown->callback([&cli, timeout] {
    std::optional<std::chrono::milliseconds> t;
    if (!timeout->empty()) t = duration_arg("--timeout", *timeout);
    cli.action = [&cli, t] {
      return run_call(
          cli, "shutdown", [t](Client& c) { return json_call<ops::Shutdown>(c, {t}); },
          done_line("shutdown begun"));
    };
  });
}

}  // namespace

// schedule list, show, pause, resume, run-now, add, remove (docs/schedules.md).
namespace {

// schedule add: a schedule as one entry of the YAML's `schedules:`, kept in the state dir.
void add_schedule_add_command(CLI::App& schedule, Cli& cli) {
  struct AddOptions {
    ops::ScheduleAddArgs args;
    std::int32_t priority = 0;
    std::uint32_t retries = 0;
    std::int64_t start_s = 0, end_s = 0;
    std::string timeout;
    std::map<std::string, CLI::Option*> given;
  };
  auto o = std::make_shared<AddOptions>();
  auto* add = schedule.add_subcommand(
      "add", "add a schedule at run time (kept across restarts; not a name the YAML declares)");
  add->add_option("NAME", o->args.name, "schedule name")->required();
  auto* cron = add->add_option("--cron", o->args.cron, "cron expression or macro");
  auto* every = add->add_option("--every", o->args.every, "an interval (30s, 1h30m)");
  cron->excludes(every);
  add->add_option("--type", o->args.type, "the task's type")->required();
  add->add_option("--pool", o->args.pool, "the pool (default: by type)");
  add->add_option("--payload", o->args.payload, "the task's payload (text)");
  add->add_option("--zone", o->args.zone,
                  "UTC (default), local, or a tz database name (Europe/Berlin)");
  o->given["priority"] = add->add_option("--priority", o->priority, "as submit's");
  o->given["timeout"] = add->add_option("--timeout", o->timeout, "the task's timeout (30s)");
  o->given["retries"] = add->add_option("--retries", o->retries, "as submit's");
  add->add_option("--key", o->args.key, "the affinity key");
  add->add_option("--tenant", o->args.tenant, "the tenant");
  o->given["start"] = add->add_option("--start", o->start_s, "no slot before (Unix seconds)");
  o->given["end"] = add->add_option("--end", o->end_s, "no slot after (Unix seconds)");
  add->add_option("--catch-up", o->args.catch_up, "skip (default) or run_once");
  add->add_option("--overlap", o->args.overlap, "allow (default), skip or queue");
  add->add_flag("--paused", o->args.paused, "added paused");
  add->callback([&cli, o] {
    ops::ScheduleAddArgs a = o->args;
    if (o->given["priority"]->count() != 0) a.priority = o->priority;
    if (o->given["timeout"]->count() != 0) a.timeout = duration_arg("--timeout", o->timeout);
    if (o->given["retries"]->count() != 0) a.retries = o->retries;
    if (o->given["start"]->count() != 0) a.start_s = o->start_s;
    if (o->given["end"]->count() != 0) a.end_s = o->end_s;
    cli.action = [&cli, a] {
      return run_call(
          cli, "schedule add", [&](Client& c) { return json_call<ops::ScheduleAdd>(c, a); },
          [](const json& body) { print_human(std::cout, body, wall_now_ms(), 0); });
    };
  });
}

}  // namespace

void add_schedule_commands(CLI::App& app, Cli& cli) {
  auto* schedule = app.add_subcommand("schedule",
                                      "periodic schedules: list, show, pause, "
                                      "resume, run-now, add, remove");
  schedule->require_subcommand(1);
  auto* list = schedule->add_subcommand("list", "every schedule, its next and last slot");
  list->callback([&cli] {
    cli.action = [&cli] {
      return run_call(
          cli, "schedule list", [](Client& c) { return json_call<ops::ScheduleList>(c, {}); },
          [](const json& body) {
            print_object_table(std::cout, body["schedules"],
                               {"name", "expression", "zone", "paused", "next_s", "last_slot_s",
                                "last_task", "fired", "skipped", "last_outcome"},
                               wall_now_ms());
          });
    };
  });
  auto name = std::make_shared<std::string>();
  auto* show = schedule->add_subcommand("show", "one schedule, every field");
  show->add_option("NAME", *name, "schedule name")->required();
  show->callback([&cli, name] {
    cli.action = [&cli, name] {
      return run_call(
          cli, "schedule show", [&](Client& c) { return json_call<ops::ScheduleShow>(c, {*name}); },
          [](const json& body) { print_human(std::cout, body, wall_now_ms(), 0); });
    };
  });
  for (const char* verb : {"pause", "resume"}) {
    const bool pause = std::string(verb) == "pause";
    auto* sub = schedule->add_subcommand(
        verb, pause ? "stop firing its slots (until resumed, a restart or a reload that "
                      "changes its paused key)"
                    : "fire its slots again, from the next one");
    sub->add_option("NAME", *name, "schedule name")->required();
    sub->callback([&cli, name, pause] {
      cli.action = [&cli, name, pause] {
        return run_call(
            cli, pause ? "schedule pause" : "schedule resume",
            [&](Client& c) {
              return pause ? json_call<ops::SchedulePause>(c, {*name})
                           : json_call<ops::ScheduleResume>(c, {*name});
            },
            done_line("schedule " + *name + (pause ? ": paused" : ": resumed")));
      };
    });
  }
  add_schedule_add_command(*schedule, cli);
  auto* remove = schedule->add_subcommand(
      "remove", "remove a schedule added at run time (a YAML one: edit the YAML, and reload)");
  remove->add_option("NAME", *name, "schedule name")->required();
  remove->callback([&cli, name] {
    cli.action = [&cli, name] {
      return run_call(
          cli, "schedule remove",
          [&](Client& c) { return json_call<ops::ScheduleRemove>(c, {*name}); },
          done_line("schedule " + *name + ": removed"));
    };
  });
  auto* run_now = schedule->add_subcommand("run-now", "submit its task now, outside its slots");
  run_now->add_option("NAME", *name, "schedule name")->required();
  run_now->callback([&cli, name] {
    cli.action = [&cli, name] {
      return run_call(
          cli, "schedule run-now",
          [&](Client& c) { return json_call<ops::ScheduleRunNow>(c, {*name}); },
          [name](const json& body) {
            std::cout << "schedule " << *name << ": task " << body.value("id", 0ull)
                      << " submitted\n";
          });
    };
  });
}

void add_service_commands(CLI::App& app, Cli& cli) {
  add_task_and_read_commands(app, cli);
  add_pool_commands(app, cli);
  add_admin_commands(app, cli);
  add_schedule_commands(app, cli);
}

}  // namespace sandpool::poolctl
