// The schema of poold's YAML, one reader per section. Private to config/src/config; each
// reader records problems in the ConfigErrors behind its MapReader and never throws.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sandpool/config/config.hpp>

#include "config/yaml_reader.hpp"

namespace sandpool::config {

// Fills *out from the `service:` mapping read by `service` (then finished).
// `warnings`: deprecated keys found (Config::warnings).
void read_service(MapReader service, ServiceConfig* out, std::vector<std::string>* warnings);

// Where a pool's cross-pool checked values were written, for errors about them.
struct PoolMarks {
  YAML::Mark name;
  std::optional<YAML::Mark> backend;   // set when `backend: redis`
  std::vector<YAML::Mark> task_types;  // one per entry of PoolConfig::task_types
};

// Fills *out from one entry of `pools:` at `path` ("pools[1]").
void read_pool(ConfigErrors& errors, const YAML::Node& node, const std::string& path,
               PoolConfig* out, PoolMarks* marks);

// Fills *out from `schedules:` (a list; absent or null: none), names unique.
void read_schedules(ConfigErrors& errors, const YAML::Node* node, std::vector<ScheduleSpec>* out);

}  // namespace sandpool::config
