// Per-script time in Redis, phase by phase (redis_profile.hpp).
#include "redis_profile.hpp"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <vector>

#include <sandpool/redis/task_consumer.hpp>
#include <sandpool/redis/task_producer.hpp>
#include <sandpool/redis/task_upkeep.hpp>
#include "redis/redis_feeder_threads.hpp"  // feeder::encode, the attempts a node writes

namespace sandpool::bench {
namespace {

CommandStats stats_minus(const CommandStats& after, const CommandStats& before) {
  CommandStats out;
  for (const auto& [name, a] : after) {
    Calls d = a;
    if (auto b = before.find(name); b != before.end()) {
      d.calls -= b->second.calls;
      d.us -= b->second.us;
    }
    if (d.calls > 0) out[name] = d;
  }
  return out;
}

}  // namespace

std::optional<CommandStats> command_stats(redis::Connection& c) {
  auto stats = c.command({"INFO", "commandstats"});
  if (!stats || stats->is_error()) return std::nullopt;
  CommandStats out;
  std::istringstream lines(stats->str);
  for (std::string line; std::getline(lines, line);) {
    // cmdstat_<name>:calls=N,usec=N,...
    if (line.rfind("cmdstat_", 0) != 0) continue;
    const auto colon = line.find(':');
    const auto calls = line.find("calls=");
    const auto usec = line.find("usec=");
    if (colon == std::string::npos || calls == std::string::npos || usec == std::string::npos) {
      continue;
    }
    Calls& k = out[line.substr(8, colon - 8)];
    k.calls = std::strtoull(line.c_str() + calls + 6, nullptr, 10);
    k.us = std::strtod(line.c_str() + usec + 5, nullptr);
  }
  return out;
}

std::optional<double> redis_cpu_us(redis::Connection& c) {
  auto cpu = c.command({"INFO", "cpu"});
  if (!cpu || cpu->is_error()) return std::nullopt;
  double us = 0;
  std::istringstream lines(cpu->str);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("used_cpu_sys:", 0) == 0 || line.rfind("used_cpu_user:", 0) == 0) {
      us += std::strtod(line.c_str() + line.find(':') + 1, nullptr) * 1e6;
    }
  }
  return us;
}

std::optional<ScriptPhases> profile_scripts(const redis::Endpoint& at, const std::string& prefix,
                                            std::uint64_t tasks, std::size_t batch) {
  constexpr std::uint64_t kProfileSubmitChunk = 5000;
  const std::string consumer = "profiler";
  auto c = redis::Connection::open(at);
  if (!c) return std::nullopt;
  const redis::PoolKeys keys(prefix, "echo");
  if (!redis::TaskUpkeep(keys).ensure_group(*c)) return std::nullopt;
  const redis::TaskProducer producer(keys);
  const redis::TaskConsumer consumer_side(keys);
  ScriptPhases out;
  auto s0 = command_stats(*c);
  auto cpu0 = redis_cpu_us(*c);
  for (std::uint64_t at_task = 0; at_task < tasks; at_task += kProfileSubmitChunk) {
    std::vector<redis::StreamTask> chunk(std::min(kProfileSubmitChunk, tasks - at_task));
    for (redis::StreamTask& t : chunk) {
      t.type = "echo";
      t.payload = std::string(16, 'p');
    }
    auto ids = producer.submit_many(*c, chunk, 1);
    if (!ids) return std::nullopt;
    for (const auto& id : *ids) {
      if (!id) return std::nullopt;
    }
  }
  auto s1 = command_stats(*c);
  auto cpu1 = redis_cpu_us(*c);
  std::vector<redis::StreamEntry> held;
  while (held.size() < tasks) {
    auto got = consumer_side.read(*c, consumer, batch, std::chrono::milliseconds(0));
    if (!got || got->empty()) return std::nullopt;
    std::move(got->begin(), got->end(), std::back_inserter(held));
  }
  auto s2 = command_stats(*c);
  auto cpu2 = redis_cpu_us(*c);
  // One ok attempt, encoded as the feeder writes it (compact: the hash stays a listpack).
  Attempt ok;
  ok.number = 1;
  ok.worker_pid = 4242;
  ok.started_ms = 1765000000000;
  ok.ended_ms = ok.started_ms + 1;
  const std::string attempt = redis::feeder::encode_stored(ok);
  for (std::size_t from = 0; from < held.size(); from += batch) {
    std::vector<redis::TaskConsumer::EndWrite> ends;
    for (std::size_t i = from; i < std::min(held.size(), from + batch); ++i) {
      redis::TaskConsumer::EndWrite e;
      e.entry = &held[i];
      e.attempts = {attempt};
      e.attempts_before = redis::TaskConsumer::attempts_known(held[i]);  // as the feeder
      e.state = "completed";
      e.result = held[i].task.payload;
      e.now_ms = 2;
      ends.push_back(std::move(e));
    }
    auto done = consumer_side.end_all(*c, consumer, ends);
    if (!done) return std::nullopt;
  }
  auto s3 = command_stats(*c);
  auto cpu3 = redis_cpu_us(*c);
  if (!s0 || !s1 || !s2 || !s3 || !cpu0 || !cpu1 || !cpu2 || !cpu3) return std::nullopt;
  out.submit = {stats_minus(*s1, *s0), *cpu1 - *cpu0};
  out.read = {stats_minus(*s2, *s1), *cpu2 - *cpu1};
  out.finish = {stats_minus(*s3, *s2), *cpu3 - *cpu2};
  for (ScriptPhase* phase : {&out.submit, &out.read, &out.finish}) phase->commands.erase("info");
  return out;
}

}  // namespace sandpool::bench
