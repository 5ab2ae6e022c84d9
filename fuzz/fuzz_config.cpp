// libFuzzer target: arbitrary bytes as poold's YAML config. The parser must return a result
// for anything (never crash, hang or throw), and what it accepts must keep the promises of
// <sandpool/config/config.hpp>: worker bounds ordered, plugin_config valid JSON within its bounds,
// unique pool names, and a mapping to PoolOptions; schedules valid and uniquely named.
//
// Seeds: tests/fuzz/config/ (the shipped configs and a few edge cases), read-only.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>
#include <sandpool/config/config.hpp>

namespace {

// A property the code under test must keep; crashes so libFuzzer saves the input.
void require(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = sandpool::parse_config(text, "fuzz.yaml");
  if (!config) {
    require(config.status().code() == sandpool::Code::kInvalidArgument);
    require(config.status().message().rfind("fuzz.yaml", 0) == 0);
    return 0;
  }
  std::set<std::string> names;
  for (const sandpool::PoolConfig& pool : config->pools) {
    require(!pool.name.empty() && !pool.plugin_path.empty());
    require(names.insert(pool.name).second);
    require(pool.worker_bounds.min <= pool.workers);
    require(pool.workers <= pool.worker_bounds.max);
    require(pool.plugin_config_json.size() <= 64 * 1024);
    require(nlohmann::json::accept(pool.plugin_config_json));
    const sandpool::PoolOptions options = sandpool::to_pool_options(pool);
    require(options.workers == pool.workers);
  }
  // Accepted schedules are ones the Scheduler runs, under unique names.
  std::set<std::string> schedules;
  for (const sandpool::ScheduleSpec& schedule : config->schedules) {
    require(sandpool::validate_schedule(schedule).is_ok());
    require(schedules.insert(schedule.name).second);
  }
  return 0;
}
