#include <cerrno>
#include <fstream>
#include <map>
#include <sstream>

#include <sandpool/config/config.hpp>

#include "config/config_sections.hpp"
#include "config/yaml_reader.hpp"

namespace sandpool {
namespace {

using config::ConfigErrors;
using config::MapReader;
using config::PoolMarks;

// Pool names are unique and no task type is served by two pools (routing is by type).
void check_across_pools(const std::vector<PoolConfig>& pools, const std::vector<PoolMarks>& marks,
                        ConfigErrors& errors) {
  std::map<std::string, std::size_t> names;
  std::map<std::string, std::size_t> types;
  for (std::size_t i = 0; i < pools.size(); ++i) {
    const std::string path = "pools[" + std::to_string(i) + "]";
    const PoolConfig& pool = pools[i];
    if (!pool.name.empty()) {
      auto [it, fresh] = names.emplace(pool.name, i);
      if (!fresh) {
        errors.add(marks[i].name, path + ".name",
                   "pool name \"" + pool.name + "\" is already used by pools[" +
                       std::to_string(it->second) + "]");
      }
    }
    for (std::size_t t = 0; t < pool.task_types.size(); ++t) {
      auto [it, fresh] = types.emplace(pool.task_types[t], i);
      if (fresh) continue;
      const std::string where = path + ".task_types[" + std::to_string(t) + "]";
      errors.add(marks[i].task_types[t], where,
                 "task type \"" + pool.task_types[t] + "\" is already served by " +
                     (it->second == i ? std::string("this pool")
                                      : "pool \"" + pools[it->second].name + "\" (pools[" +
                                            std::to_string(it->second) + "])"));
    }
  }
}

// Reads the whole document (a mapping) into *config.
void read_config(const YAML::Node& root, ConfigErrors& errors, Config* config) {
  MapReader top(errors, root, "");
  config::read_service(top.section("service"), &config->service, &config->warnings);
  std::vector<PoolMarks> marks;
  if (const YAML::Node* pools = top.value("pools")) {
    if (pools->IsSequence()) {
      config->pools.resize(pools->size());
      marks.resize(pools->size());
      for (std::size_t i = 0; i < pools->size(); ++i) {
        config::read_pool(errors, (*pools)[i], "pools[" + std::to_string(i) + "]",
                          &config->pools[i], &marks[i]);
      }
    } else if (!pools->IsNull()) {
      top.fail("pools", "expected a list of pools, got " + config::describe(*pools));
    }
  }
  config::read_schedules(errors, top.value("schedules"), &config->schedules);
  top.finish();
  check_across_pools(config->pools, marks, errors);
  for (std::size_t i = 0; i < config->pools.size(); ++i) {
    if (marks[i].backend && config->service.redis.address.empty()) {
      errors.add(*marks[i].backend, "pools[" + std::to_string(i) + "].backend",
                 "redis needs service.redis.address (the server the cluster's nodes share)");
    }
  }
}

}  // namespace

Result<Config> parse_config(std::string_view yaml_text, std::string_view source_name) {
  ConfigErrors errors{std::string(source_name)};
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    errors.add(e.mark, "", "YAML syntax error: " + e.msg);
    return errors.status();
  }
  if (!root.IsMap()) {
    // An empty document has no position of its own: 1:1.
    errors.add(root.IsNull() ? YAML::Mark() : root.Mark(), "",
               "expected a mapping with service: and pools:, got " +
                   (root.IsNull() ? std::string("an empty document") : config::describe(root)));
    return errors.status();
  }

  Config config;
  try {
    read_config(root, errors, &config);
  } catch (const YAML::Exception& e) {  // not expected from the accessors used; never escape
    errors.add(e.mark, "", std::string("cannot read the document: ") + e.what());
  }
  if (Status s = errors.status(); !s) return s;
  return config;
}

Result<Config> load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return err == ENOENT ? Status::error(Code::kNotFound, path + ": no such file")
                         : Status::from_errno(err, "open " + path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::from_errno(errno, "read " + path);
  return parse_config(text.str(), path);
}

}  // namespace sandpool
