// What the dead-letter integration tests share: a state directory of their own, a real
// store in it, and a pool of the `configurable` test plugin that fails every task (or none)
// into that store.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include <sandpool/pool/pool_options.hpp>
#include <sandpool/store/dead_letters.hpp>

#include "test_support.hpp"

namespace sandpool::testing {

// A fresh directory under /tmp, removed with everything in it.
struct StateDir {
  StateDir() {
    char tmpl[] = "/tmp/sandpool-dlq-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~StateDir() { std::filesystem::remove_all(path); }
  StateDir(const StateDir&) = delete;
  StateDir& operator=(const StateDir&) = delete;
  std::string path;
};

// A store in `dir` (the test fails if it cannot open).
inline std::shared_ptr<DeadLetterStore> open_store(const std::string& dir,
                                                   DeadLetterStoreOptions o = {}) {
  o.state_dir = dir;
  auto s = DeadLetterStore::open(o);
  if (!s) FAIL("DeadLetterStore::open: " << s.status().to_string());
  return std::shared_ptr<DeadLetterStore>(std::move(s).value());
}

// A pool `name` of the configurable plugin with `workers` workers: every task fails for good
// (`fail`) or completes, dead letters going to `store` (null: kept in memory only).
inline PoolOptions configurable(const std::string& name, bool fail,
                                std::shared_ptr<DeadLetterStore> store, std::uint32_t workers = 1) {
  PoolOptions o = pool_options("echo", workers);
  o.name = name;
  o.plugin_path = SANDPOOL_TEST_PLUGIN_DIR "/libconfigurable.so";
  o.plugin_config_json = fail ? R"({"fail": true})" : "{}";
  o.dead_letter_store = std::move(store);
  return o;
}

}  // namespace sandpool::testing
