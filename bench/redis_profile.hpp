// Where a Redis pool's time in Redis goes, per script (docs/performance.md, "Where Redis's
// time goes"): `INFO commandstats`' deltas over a submit, a read and an end of the same tasks
// done apart, each phase the one script a node or a submitter sends for it (no nodes, no
// workers: nothing else talks to Redis meanwhile).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <sandpool/redis/redis_client.hpp>

namespace sandpool::bench {

// A command's calls and their time in Redis.
struct Calls {
  std::uint64_t calls = 0;
  double us = 0;
};
using CommandStats = std::map<std::string, Calls>;  // by name, lower case: "evalsha", "hset"
// `INFO commandstats`; nullopt on a failure.
std::optional<CommandStats> command_stats(redis::Connection& c);

// The server's CPU time (INFO cpu: used_cpu_user + used_cpu_sys), µs; nullopt on a failure.
// Unlike commandstats' usec, it does not count the time the server was descheduled.
std::optional<double> redis_cpu_us(redis::Connection& c);

// One phase's deltas: every command's (the scripts' own under evalsha), and the server's CPU.
struct ScriptPhase {
  CommandStats commands;
  double cpu_us = 0;
};
struct ScriptPhases {
  ScriptPhase submit, read, finish;
};
// Submits `tasks` echo tasks to a fresh prefix's pool with TaskProducer::submit_many (in
// chunks of 5,000), reads them with TaskConsumer::read, `batch` at a time, and ends them
// with TaskConsumer::end_all, `batch` at a time, each with one attempt as a node encodes it.
// nullopt on a Redis failure.
std::optional<ScriptPhases> profile_scripts(const redis::Endpoint& at, const std::string& prefix,
                                            std::uint64_t tasks, std::size_t batch);

}  // namespace sandpool::bench
