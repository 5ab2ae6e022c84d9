// Shared helpers for the process-level tests: where the built plugins and executables
// are, and a PoolOptions that uses them.
#pragma once

#include <chrono>
#include <string>

#include <sandpool/pool.hpp>

namespace sandpool::testing {

// The built example plugin lib<name>.so.
inline std::string plugin(const std::string& name) {
  return std::string(SANDPOOL_PLUGIN_DIR) + "/lib" + name + ".so";
}

// A pool of `workers` workers on plugin `name`, quick to retry, with the test build's
// worker host.
inline PoolOptions pool_options(const std::string& name, std::uint32_t workers = 2) {
  PoolOptions o;
  o.name = "test-" + name;
  o.plugin_path = plugin(name);
  o.worker_path = SANDPOOL_WORKER_PATH;
  o.workers = workers;
  o.retry.base = std::chrono::milliseconds(1);
  o.retry.max = std::chrono::milliseconds(20);
  return o;
}

// Generous bound for waits in tests: a loaded 2-core VM under a sanitizer is slow.
inline constexpr std::chrono::seconds kPatience{60};

}  // namespace sandpool::testing
