// PoolOptions in its four parts (identity, worker spec, live values, wiring) and the YAML
// reader writing into them: a field outside the parts does not compile, and a configured
// pool reaches PoolOptions part by part, whole.
#include <catch2/catch.hpp>

#include <cstddef>
#include <type_traits>

#include <sandpool/config/config.hpp>
#include <sandpool/pool/pool_options.hpp>

namespace {

using sandpool::LiveOptions;
using sandpool::PoolIdentity;
using sandpool::PoolOptions;
using sandpool::PoolWiring;
using sandpool::WorkerSpec;
using namespace std::chrono_literals;

// Converts to anything: T{AnyPart{}, ...} compiles iff T is an aggregate with at least that
// many elements (each base class counts as one, then each member).
struct AnyPart {
  template <class T>
  operator T() const;  // never defined: unevaluated only
};

template <class T, class... Parts>
consteval std::size_t aggregate_elements() {
  if constexpr (requires { T{Parts{}..., AnyPart{}}; }) {
    return aggregate_elements<T, Parts..., AnyPart>();
  } else {
    return sizeof...(Parts);
  }
}

// A field added to PoolOptions itself, rather than to one of its parts, fails here: decide
// what a reconfigure does with it and put it into that part (docs/architecture.md, "How a
// pool option flows, and how to add one").
static_assert(std::is_aggregate_v<PoolOptions>);
static_assert(aggregate_elements<PoolOptions>() == 4,
              "PoolOptions is PoolIdentity, WorkerSpec, LiveOptions and PoolWiring, nothing else");
static_assert(std::is_base_of_v<PoolIdentity, PoolOptions> &&
              std::is_base_of_v<WorkerSpec, PoolOptions> &&
              std::is_base_of_v<LiveOptions, PoolOptions> &&
              std::is_base_of_v<PoolWiring, PoolOptions>);
// The parts a reconfigure compares or takes are plain values; the YAML fills exactly those.
static_assert(std::equality_comparable<PoolIdentity> && std::equality_comparable<WorkerSpec> &&
              std::equality_comparable<LiveOptions>);
static_assert(std::is_base_of_v<PoolIdentity, sandpool::PoolConfig> &&
              std::is_base_of_v<WorkerSpec, sandpool::PoolConfig> &&
              std::is_base_of_v<LiveOptions, sandpool::PoolConfig> &&
              !std::is_base_of_v<PoolWiring, sandpool::PoolConfig>);

sandpool::PoolConfig parse_pool(const std::string& yaml) {
  auto c = sandpool::parse_config(yaml, "t.yaml");
  INFO(c.status().to_string());
  REQUIRE(c);
  REQUIRE(c->pools.size() == 1);
  return c->pools[0];
}

constexpr const char* kFullPool = R"(
pools:
  - name: full
    plugin: lib/full.so
    task_types: [t1]
    workers: {min: 2, max: 9, initial: 3}
    queue: {capacity: 77, ttl: 90s}
    limits: {memory: 64MiB, cpu_time: 1500ms, max_payload: 2MiB}
    sandbox: {profile: relaxed, namespaces: [user, net], readonly_paths: [/srv], tmpfs_size: 1MiB}
    health: {heartbeat_interval: 100ms, missed_heartbeats: 5}
    task_defaults: {timeout: 7s, retries: 6}
    restart: {within: 2m}
    recycle: {max_tasks: 1000}
)";

}  // namespace

TEST_CASE("a field of a part is reached through PoolOptions by its own name") {
  PoolOptions o;
  o.name = "n";
  o.plugin_path = "p.so";
  o.timeout = 5s;
  o.seed = 7;
  CHECK(o.identity().name == "n");
  CHECK(o.worker_spec().plugin_path == "p.so");
  CHECK(o.live().timeout == 5s);
  CHECK(o.wiring().seed == 7);
}

TEST_CASE("a configured pool reaches PoolOptions as its identity, worker spec and live values") {
  const sandpool::PoolConfig pc = parse_pool(kFullPool);
  const PoolOptions o = sandpool::to_pool_options(pc);
  CHECK(o.identity() == static_cast<const PoolIdentity&>(pc));
  CHECK(o.worker_spec() == static_cast<const WorkerSpec&>(pc));
  CHECK(o.live() == static_cast<const LiveOptions&>(pc));
  // What the reader wrote lands in the PoolOptions field itself, not in a copy of it.
  CHECK(o.workers == 3);
  CHECK(o.queue_capacity == 77);
  CHECK(o.sandbox.limits.address_space == (64u << 20));
  CHECK(o.sandbox.namespaces.wanted.describe() == "user,net");
  CHECK(o.sandbox.namespaces.readonly_paths == o.sandbox.readonly_paths);
  CHECK(o.restart_window == 2min);
  // The wiring is the caller's (poold's service): the YAML leaves it at PoolOptions' defaults.
  CHECK(o.worker_path.empty());
  CHECK_FALSE(o.logger);
  CHECK_FALSE(o.on_event);
  CHECK_FALSE(o.dead_letter_store);
  CHECK(o.output_lines_per_second == PoolWiring{}.output_lines_per_second);
}

TEST_CASE("a configured pool's defaults are PoolOptions' own, but for every namespace wanted") {
  const sandpool::PoolConfig pc = parse_pool("pools:\n  - name: a\n    plugin: a.so\n");
  PoolOptions expected;
  expected.name = "a";
  expected.plugin_path = "a.so";
  expected.sandbox.namespaces.wanted = sandpool::sandbox::NamespaceSet::all();
  CHECK(static_cast<const PoolIdentity&>(pc) == expected.identity());
  CHECK(static_cast<const WorkerSpec&>(pc) == expected.worker_spec());
  CHECK(static_cast<const LiveOptions&>(pc) == expected.live());
  CHECK(pc.worker_bounds == sandpool::PoolConfig::WorkerBounds{1, 64});
}

TEST_CASE("configured pools differ when any part or the worker bounds differ") {
  const std::string base = "pools:\n  - name: a\n    plugin: a.so\n";
  const sandpool::PoolConfig pc = parse_pool(base);
  CHECK(pc == parse_pool(base));
  CHECK_FALSE(pc == parse_pool(base + "    task_types: [x]\n"));            // identity
  CHECK_FALSE(pc == parse_pool(base + "    sandbox: {keep_env: [TZ]}\n"));  // worker spec
  CHECK_FALSE(pc == parse_pool(base + "    recycle: {max_rss: 1GiB}\n"));   // live
  CHECK_FALSE(pc == parse_pool(base + "    workers: {max: 3}\n"));          // bounds only
}
