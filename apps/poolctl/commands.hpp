// poolctl's subcommands, grouped by concern. Each add_* registers its subcommands on `app`;
// a chosen subcommand's callback stores what to run in cli.action (main() runs it).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_context.hpp"

namespace sandpool::poolctl {

// status, workers, stats, task, cancel, scale, strategy, drain, resume, restart,
// kill-worker, reload, shutdown.
void add_service_commands(CLI::App& app, Cli& cli);
void add_submit_command(CLI::App& app, Cli& cli);
void add_wait_command(CLI::App& app, Cli& cli);  // wait_command.cpp
void add_batch_command(CLI::App& app, Cli& cli);
void add_dlq_commands(CLI::App& app, Cli& cli);
void add_events_command(CLI::App& app, Cli& cli);
void add_top_command(CLI::App& app, Cli& cli);

// dlq import FILE (dlq_import_command.cpp): through the service, or into the store in
// state_dir when it is not empty. Returns the exit code.
int run_dlq_import(const Cli& cli, const std::string& file, const std::string& state_dir);

// A task account as JSON: the service's reply body plus "result" (the result bytes).
nlohmann::json task_json(const TaskReply& task);
// A waited task's outcome (submit --wait, wait): with --json its account, else a completed
// task's result bytes or `task ID STATE (REASON): ERROR`. Returns kExitOk iff completed.
int print_outcome(const Cli& cli, const TaskReply& task);

}  // namespace sandpool::poolctl
