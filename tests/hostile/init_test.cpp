// Hostile plugins that never get as far as a task: an init that hangs, an init that crashes,
// a .so the loader must refuse. The pool reports the plugin's failure at creation, the
// sibling pool keeps serving, no worker is left behind.
#include <catch2/catch.hpp>

#include "hostile_world.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::hostile::hostile_options;
using sandpool::hostile::hostile_plugin;
using sandpool::hostile::HostileWorld;
using sandpool::hostile::worker_host_plugin;

TEST_CASE("an init that hangs is stopped by init_timeout and reported") {
  HostileWorld world;
  PoolOptions o = hostile_options();
  o.plugin_config_json = "{\"init_hang\": true}";
  o.init_timeout = 300ms;
  auto p = world.try_start(o);
  REQUIRE_FALSE(p);
  INFO(p.status().to_string());
  CHECK(p.status().code() == Code::kPlugin);
  CHECK(p.status().message().find("init") != std::string::npos);
  world.require_pools_serve();
  world.close_and_check_clean();
}

TEST_CASE("an init that crashes is reported with its signal") {
  HostileWorld world;
  PoolOptions o = hostile_options();
  o.plugin_config_json = "{\"init_crash\": true}";
  auto p = world.try_start(o);
  REQUIRE_FALSE(p);
  INFO(p.status().to_string());
  CHECK(p.status().code() == Code::kPlugin);
  CHECK(p.status().message().find("SIGSEGV") != std::string::npos);
  world.require_pools_serve();
  world.close_and_check_clean();
}

TEST_CASE("a .so with a missing symbol is refused at load, naming the symbol") {
  const auto [plugin, symbol] = GENERATE(table<std::string, std::string>({
      // An undefined reference: dlopen(RTLD_NOW) refuses it before any plugin code runs.
      {hostile_plugin("missing_symbol"), "sp_hostile_no_such_function"},
      // A required entry point missing (worker_host's own loader test plugin).
      {worker_host_plugin("missing_handle"), "sp_plugin_handle"},
  }));
  HostileWorld world;
  auto p = world.try_start(hostile_options(plugin));
  REQUIRE_FALSE(p);
  INFO(p.status().to_string());
  CHECK(p.status().code() == Code::kPlugin);
  CHECK(p.status().message().find(symbol) != std::string::npos);
  world.require_pools_serve();
  world.close_and_check_clean();
}
