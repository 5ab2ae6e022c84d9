#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include <sandpool/config/config.hpp>
#include <sandpool/pool/pool.hpp>

namespace {

using sandpool::Config;
using sandpool::PoolConfig;
using sandpool::ServiceConfig;
using sandpool::ShutdownUnfinished;
using sandpool::StoreSync;
using namespace std::chrono_literals;

constexpr const char* kMinimalPool = "pools:\n  - name: a\n    plugin: a.so\n";

Config parse_ok(const std::string& yaml) {
  auto c = sandpool::parse_config(yaml, "t.yaml");
  INFO(c.status().to_string());
  REQUIRE(c);
  return std::move(c).value();
}

// The whole error text (every problem, one per line).
std::string errors_of(const std::string& yaml) {
  auto c = sandpool::parse_config(yaml, "t.yaml");
  REQUIRE_FALSE(c);
  CHECK(c.status().code() == sandpool::Code::kInvalidArgument);
  return c.status().message();
}

}  // namespace

TEST_CASE("the shipped config files parse") {
  auto name = GENERATE("poold.yaml", "production.yaml");
  auto c = sandpool::load_config(std::string(SANDPOOL_SOURCE_DIR) + "/configs/" + name);
  INFO(c.status().to_string());
  REQUIRE(c);
  CHECK_FALSE(c->pools.empty());
}

TEST_CASE("the development config keeps everything under ./var and uses the example plugins") {
  auto c = sandpool::load_config(std::string(SANDPOOL_SOURCE_DIR) + "/configs/poold.yaml");
  REQUIRE(c);
  CHECK(c->service.state_dir == "./var");
  CHECK(c->service.socket_path == "./var/poold.sock");
  CHECK(c->service.http.host == "127.0.0.1");
  CHECK(c->service.http.port == 0);
  CHECK(c->warnings.empty());
  CHECK(c->service.log_format == sandpool::LogFormat::kText);
  for (const PoolConfig& pool : c->pools) {
    INFO(pool.name);
    // build/plugins/lib<name>.so, built from plugins/<name>.c or plugins/<name>/
    CHECK(pool.plugin_path == "build/plugins/lib" + pool.name + ".so");
    const std::string source = std::string(SANDPOOL_SOURCE_DIR) + "/plugins/" + pool.name;
    CHECK((std::filesystem::exists(source + ".c") ||
           std::filesystem::exists(source + "/CMakeLists.txt")));
  }
}

TEST_CASE("the production example sets the service up for a system install") {
  auto c = sandpool::load_config(std::string(SANDPOOL_SOURCE_DIR) + "/configs/production.yaml");
  REQUIRE(c);
  const sandpool::ServiceConfig& s = c->service;
  CHECK(s.socket_path == "/run/sandpool/poold.sock");
  CHECK(s.socket_mode == 0660);
  CHECK(s.socket_group == "sandpool");
  CHECK(s.state_dir == "/var/lib/sandpool");
  CHECK(s.log_format == sandpool::LogFormat::kJson);
  REQUIRE(s.allow.size() == 3);
  CHECK((!s.allow[0].is_group && s.allow[0].name == "deploy" && !s.allow[0].id));
  CHECK(s.allow[0].rights == sandpool::Rights::kAdmin);
  CHECK((s.allow[1].is_group && s.allow[1].name == "monitoring"));
  CHECK(s.allow[1].rights == sandpool::Rights::kRead);
  CHECK((!s.allow[2].is_group && s.allow[2].id == 1001u && s.allow[2].name.empty()));
  const PoolConfig& p = c->pools.at(0);
  CHECK(p.name == "thumbnail");
  CHECK(p.plugin_path == "/usr/local/lib/sandpool/plugins/libthumbnail.so");
  CHECK(p.plugin_config_json ==
        R"({"format":"jpeg","height":256,"max_height":16384,"max_pixels":40000000,)"
        R"("max_width":16384,"quality":85,"width":256})");
  CHECK(p.sandbox.limits.address_space == (1ull << 30));
  CHECK(p.queue_ttl == 10min);
}

TEST_CASE("service.http takes the listener and its token files") {
  const Config c = parse_ok(
      "service:\n  http:\n    listen: \"[::1]:8080\"\n    read_token_file: /etc/r\n"
      "    admin_token_file: a\n" +
      std::string(kMinimalPool));
  CHECK(c.service.http.host == "::1");
  CHECK(c.service.http.port == 8080);
  CHECK(c.service.http.read_token_file == "/etc/r");
  CHECK(c.service.http.admin_token_file == "a");
  CHECK(c.warnings.empty());
}

TEST_CASE("service.metrics.listen still sets the listener, with a warning naming its place") {
  const Config c =
      parse_ok("service:\n  metrics:\n    listen: 127.0.0.1:7000\n" + std::string(kMinimalPool));
  CHECK(c.service.http.port == 7000);
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0].find("t.yaml:3:13: service.metrics.listen: deprecated: write "
                           "service.http.listen") == 0);
  SECTION("service.http.listen wins when both are given") {
    const Config both = parse_ok(
        "service:\n  metrics:\n    listen: 127.0.0.1:7000\n  http:\n    listen: "
        "127.0.0.1:7001\n" +
        std::string(kMinimalPool));
    CHECK(both.service.http.port == 7001);
    REQUIRE(both.warnings.size() == 1);
    CHECK(both.warnings[0].find("ignored") != std::string::npos);
  }
}

TEST_CASE("a config that sets nothing gets the documented defaults") {
  const Config c = parse_ok(kMinimalPool);
  const sandpool::ServiceConfig defaults;
  CHECK(c.service.socket_path == "/run/sandpool/poold.sock");
  CHECK(c.service.socket_mode == defaults.socket_mode);
  CHECK(c.service.state_dir == "/var/lib/sandpool");
  CHECK(c.service.http.port == 9464);
  CHECK(c.service.http.read_token_file.empty());
  CHECK(c.service.http.admin_token_file.empty());
  CHECK(c.service.log_level == sandpool::LogLevel::kInfo);
  CHECK(c.service.shutdown_timeout == 30s);
  CHECK(c.service.task_records_max == 100000);
  CHECK(c.service.task_records_max_age == 1h);
  REQUIRE(c.pools.size() == 1);
  const PoolConfig& p = c.pools[0];
  CHECK(p.plugin_config_json == "{}");
  CHECK(p.task_types.empty());
  CHECK(p.worker_bounds.min == 1);
  CHECK(p.worker_bounds.max == 64);
  CHECK(p.workers == 2);
  CHECK_FALSE(p.queue_ttl);
}

TEST_CASE("the control plane's limits default as documented and each is a service.control key") {
  const Config defaults = parse_ok(kMinimalPool);
  CHECK(defaults.service.max_connections == 64);
  CHECK(defaults.service.admin_reserved_connections == 8);
  CHECK(defaults.service.connections_per_uid == 16);
  CHECK(defaults.service.streams_per_connection == 4);
  CHECK(defaults.service.streams_per_uid == 16);
  CHECK(defaults.service.idle_timeout == 60s);
  // Unless given, an eighth of connections.max is kept for admins.
  CHECK(parse_ok("service: {connections: {max: 16}}\n").service.admin_reserved_connections == 2);
  const Config set = parse_ok(
      "service:\n  control:\n    admin_reserved_connections: 3\n    connections_per_uid: 5\n"
      "    streams_per_connection: 2\n    streams_per_uid: 7\n    idle_timeout: 90s\n");
  CHECK(set.service.admin_reserved_connections == 3);
  CHECK(set.service.connections_per_uid == 5);
  CHECK(set.service.streams_per_connection == 2);
  CHECK(set.service.streams_per_uid == 7);
  CHECK(set.service.idle_timeout == 90s);
  CHECK(parse_ok("service: {control: {idle_timeout: 0}}\n").service.idle_timeout == 0s);
}

TEST_CASE("a pool's defaults are the PoolOptions defaults") {
  const sandpool::PoolOptions o = sandpool::to_pool_options(parse_ok(kMinimalPool).pools[0]);
  const sandpool::PoolOptions d;
  CHECK(o.workers == d.workers);
  CHECK(o.concurrency == d.concurrency);
  CHECK(o.dispatch == d.dispatch);
  CHECK(o.queue_capacity == d.queue_capacity);
  CHECK(o.queue_ttl == d.queue_ttl);
  CHECK(o.timeout == d.timeout);
  CHECK(o.max_timeout == d.max_timeout);
  CHECK(o.max_timeout == 24h);
  CHECK(o.retries == d.retries);
  CHECK(o.cancel_grace == d.cancel_grace);
  CHECK(o.retry.base == d.retry.base);
  CHECK(o.retry.multiplier == d.retry.multiplier);
  CHECK(o.retry.max == d.retry.max);
  CHECK(o.retry.retry_sandbox_violation == d.retry.retry_sandbox_violation);
  CHECK(o.max_payload == d.max_payload);
  CHECK(o.max_result == d.max_result);
  CHECK(o.cpu_time == d.cpu_time);
  CHECK(o.heartbeat_interval == d.heartbeat_interval);
  CHECK(o.missed_heartbeats == d.missed_heartbeats);
  CHECK(o.init_timeout == d.init_timeout);
  CHECK(o.max_restarts == d.max_restarts);
  CHECK(o.restart_window == d.restart_window);
  CHECK(o.crash_backoff_base == d.crash_backoff_base);
  CHECK(o.crash_backoff_max == d.crash_backoff_max);
  CHECK(o.stable_after == d.stable_after);
  CHECK(o.max_init_failures == d.max_init_failures);
  CHECK(o.recycle_max_tasks == d.recycle_max_tasks);
  CHECK(o.recycle_max_rss == d.recycle_max_rss);
  CHECK(o.recycle_max_age == d.recycle_max_age);
  CHECK(o.sandbox.profile == d.sandbox.profile);
  CHECK(o.sandbox.limits.address_space == d.sandbox.limits.address_space);
  CHECK(o.sandbox.limits.open_files == d.sandbox.limits.open_files);
  CHECK(o.sandbox.limits.processes == d.sandbox.limits.processes);
  CHECK(o.sandbox.limits.file_size == d.sandbox.limits.file_size);
  CHECK(o.sandbox.cgroup == d.sandbox.cgroup);
  CHECK(o.sandbox.cpu_quota == d.sandbox.cpu_quota);
  CHECK(o.user == d.user);
  CHECK(o.user == "nobody");
  CHECK(o.sandbox.readonly_paths.empty());
  CHECK(o.sandbox.require.empty());
  CHECK_FALSE(o.sandbox.write_xor_execute.has_value());  // strict's default: on
  CHECK(o.sandbox.init == sandpool::sandbox::InitAccess{});
}

TEST_CASE("every pool key maps onto its PoolOptions field") {
  const Config c = parse_ok(R"(
pools:
  - name: full
    plugin: lib/full.so
    plugin_config: {k: v}
    task_types: [t1, t2]
    workers: {min: 2, max: 9, initial: 3}
    concurrency: 5
    queue: {capacity: 77, ttl: 90s}
    dispatch: affinity
    limits: {memory: 64MiB, cpu_time: 1500ms, open_files: 32, processes: 4, file_size: 1MiB,
             max_payload: 2MiB, max_result: 3MiB, cpu_quota: 1.5}
    sandbox: {profile: relaxed, allow_syscalls: [getrandom], keep_env: [TZ], cgroup: required,
              user: 4001, readonly_paths: [/srv/models], require: [landlock, net],
              write_xor_execute: true,
              init: {read_paths: [/usr/lib/python3.11], write_paths: [/var/log/p.log],
                     network: true}}
    health: {heartbeat_interval: 100ms, missed_heartbeats: 5, init_timeout: 2s}
    task_defaults: {timeout: 7s, max_timeout: 1h, retries: 6, cancel_grace: 300ms}
    retry: {base: 20ms, multiplier: 1.5, max: 4s, retry_sandbox_violation: true}
    restart: {max_restarts: 4, within: 2m, backoff_base: 50ms, backoff_max: 5s,
              stable_after: 3s, max_init_failures: 7}
    recycle: {max_tasks: 1000, max_rss: 256MiB, max_age: 6h}
)");
  const PoolConfig& p = c.pools.at(0);
  CHECK(p.worker_bounds.min == 2);
  CHECK(p.worker_bounds.max == 9);
  const sandpool::PoolOptions o = sandpool::to_pool_options(p);
  CHECK(o.name == "full");
  CHECK(o.plugin_path == "lib/full.so");  // relative paths stay as written
  CHECK(o.plugin_config_json == R"({"k":"v"})");
  CHECK(o.task_types == std::vector<std::string>{"t1", "t2"});
  CHECK(o.workers == 3);
  CHECK(o.concurrency == 5);
  CHECK(o.queue_capacity == 77);
  CHECK(o.queue_ttl == 90s);
  CHECK(o.max_timeout == 1h);
  CHECK(o.dispatch == sandpool::DispatchStrategy::kAffinity);
  CHECK(o.sandbox.limits.address_space == (64u << 20));
  CHECK(o.cpu_time == 1500ms);
  CHECK(o.sandbox.limits.open_files == 32);
  CHECK(o.sandbox.limits.processes == 4);
  CHECK(o.sandbox.limits.file_size == (1u << 20));
  CHECK(o.max_payload == (2u << 20));
  CHECK(o.max_result == (3u << 20));
  CHECK(o.sandbox.profile == sandpool::sandbox::SeccompProfile::kRelaxed);
  CHECK(o.sandbox.allow_syscalls == std::vector<std::string>{"getrandom"});
  CHECK(o.sandbox.keep_env == std::vector<std::string>{"TZ"});
  CHECK(o.sandbox.cgroup == sandpool::sandbox::CgroupMode::kRequired);
  CHECK(o.sandbox.cpu_quota == 1.5);
  CHECK(o.user == "4001");
  CHECK(o.sandbox.readonly_paths == std::vector<std::string>{"/srv/models"});
  CHECK(o.sandbox.require == std::vector<std::string>{"landlock", "net"});
  CHECK(o.sandbox.write_xor_execute == true);
  CHECK(o.sandbox.init.read_paths == std::vector<std::string>{"/usr/lib/python3.11"});
  CHECK(o.sandbox.init.write_paths == std::vector<std::string>{"/var/log/p.log"});
  CHECK(o.sandbox.init.network);
  CHECK(o.sandbox.namespaces.required.describe() == "net");
  CHECK(o.heartbeat_interval == 100ms);
  CHECK(o.missed_heartbeats == 5);
  CHECK(o.init_timeout == 2s);
  CHECK(o.timeout == 7s);
  CHECK(o.retries == 6);
  CHECK(o.cancel_grace == 300ms);
  CHECK(o.retry.base == 20ms);
  CHECK(o.retry.multiplier == 1.5);
  CHECK(o.retry.max == 4s);
  CHECK(o.retry.retry_sandbox_violation);
  CHECK(o.max_restarts == 4);
  CHECK(o.restart_window == 2min);
  CHECK(o.crash_backoff_base == 50ms);
  CHECK(o.crash_backoff_max == 5s);
  CHECK(o.stable_after == 3s);
  CHECK(o.max_init_failures == 7);
  CHECK(o.recycle_max_tasks == 1000);
  CHECK(o.recycle_max_rss == (256u << 20));
  CHECK(o.recycle_max_age == std::chrono::hours(6));
}

TEST_CASE("dispatch takes least_rss and by_key, spelt with _ or -") {
  using sandpool::DispatchStrategy;
  auto [name, strategy] = GENERATE(std::pair{"least_rss", DispatchStrategy::kLeastRss},
                                   std::pair{"least-rss", DispatchStrategy::kLeastRss},
                                   std::pair{"by_key", DispatchStrategy::kByKey},
                                   std::pair{"by-key", DispatchStrategy::kByKey});
  const Config c = parse_ok(std::string(kMinimalPool) + "    dispatch: " + name + "\n");
  CHECK(sandpool::to_pool_options(c.pools.at(0)).dispatch == strategy);
}

TEST_CASE("configs compare equal until a key changes") {
  const std::string base = std::string(kMinimalPool) + "    retry: {base: 1s}\n";
  CHECK(parse_ok(base) == parse_ok(base));
  CHECK_FALSE(parse_ok(base) == parse_ok(base + "    limits: {memory: 2GiB}\n"));
  CHECK_FALSE(parse_ok(base).pools[0] ==
              parse_ok(std::string(kMinimalPool) + "    retry: {base: 2s}\n").pools[0]);
  CHECK_FALSE(parse_ok(base).service ==
              parse_ok(base + "service: {journal: off, log: {format: json}}\n").service);
}

TEST_CASE("service.journal is on by default, a scalar on|off, or a mapping") {
  const std::string base(kMinimalPool);
  const ServiceConfig d = parse_ok(base).service;
  CHECK(d.journal.enabled);
  CHECK(d.journal.sync == StoreSync::kFull);
  CHECK(d.journal.group_commit == 2ms);
  CHECK(d.shutdown_unfinished == ShutdownUnfinished::kKeep);
  CHECK_FALSE(parse_ok(base + "service: {journal: off}\n").service.journal.enabled);
  CHECK(parse_ok(base + "service: {journal: on}\n").service.journal.enabled);
  const ServiceConfig m =
      parse_ok(base +
               "service:\n  journal: {enabled: true, sync: normal, group_commit: 0s}\n"
               "  shutdown_unfinished: dead_letter\n")
          .service;
  CHECK(m.journal.enabled);
  CHECK(m.journal.sync == StoreSync::kNormal);
  CHECK(m.journal.group_commit == 0ms);
  CHECK(m.shutdown_unfinished == ShutdownUnfinished::kDeadLetter);
  // Off, nothing to keep: dead_letter is what happens anyway and may be said.
  CHECK(parse_ok(base + "service: {journal: {enabled: false}, shutdown_unfinished: dead_letter}\n")
            .service.shutdown_unfinished == ShutdownUnfinished::kDeadLetter);
}

TEST_CASE("service.redis names the cluster's server and a pool may use it with backend redis") {
  const std::string pool = "pools:\n  - name: a\n    plugin: a.so\n    backend: redis\n";
  const Config c = parse_ok(
      "service:\n  node: n1\n  redis: {address: \"unix:/run/redis/redis.sock\", db: 2, prefix: "
      "\"sp:\", password_file: /etc/sandpool/redis.pass, dead_letters: 5, finished: 7, "
      "finished_max_age: 10m, finished_max_bytes: 2MiB, heartbeat: 250ms}\n" +
      pool);
  CHECK(c.service.node == "n1");
  CHECK(c.service.redis.address == "unix:/run/redis/redis.sock");
  CHECK(c.service.redis.db == 2);
  CHECK(c.service.redis.prefix == "sp:");
  CHECK(c.service.redis.password_file == "/etc/sandpool/redis.pass");
  CHECK(c.service.redis.dead_letters == 5);
  CHECK(c.service.redis.finished == 7);
  CHECK(c.service.redis.finished_max_age == 10min);
  CHECK(c.service.redis.finished_max_bytes == 2u << 20);
  CHECK(c.service.redis.heartbeat == 250ms);
  CHECK(c.pools[0].backend == PoolConfig::Backend::kRedis);
  CHECK(parse_ok(kMinimalPool).pools[0].backend == PoolConfig::Backend::kLocal);
  CHECK(parse_ok("service: {redis: {address: \"redis.example:6380\"}}\n" + pool)
            .service.redis.address == "redis.example:6380");
  // A Redis pool needs the server; the error points at the pool's backend.
  CHECK_THAT(errors_of(pool),
             Catch::Contains("t.yaml:4:14: pools[0].backend: redis needs service.redis.address"));
  CHECK_THAT(errors_of("service: {redis: {address: \"unix:relative.sock\"}}\n" + pool),
             Catch::Contains("expected unix:/absolute/path or host:port"));
  CHECK_THAT(errors_of(std::string(kMinimalPool) + "    backend: memcached\n"),
             Catch::Contains("one of local, redis"));
  CHECK_THAT(errors_of("service: {node: \"two words\"}\n" + std::string(kMinimalPool)),
             Catch::Contains("service.node: expected a name without white space"));
}

TEST_CASE("sizes and durations take human units") {
  auto [text, bytes] = GENERATE(table<const char*, std::uint64_t>(
      {{"0", 0}, {"16MiB", 16u << 20}, {"1.5GiB", 3ull << 29}, {"100MB", 100000000}}));
  const Config c = parse_ok(std::string(kMinimalPool) + "    limits: {memory: " + text +
                            "}\n    task_defaults: {timeout: 2m}\n    queue: {ttl: 250ms}\n");
  CHECK(c.pools[0].sandbox.limits.address_space == bytes);
  CHECK(c.pools[0].timeout == 2min);
  CHECK(c.pools[0].queue_ttl == 250ms);
}

TEST_CASE("plugin_config reaches the plugin as JSON typed as YAML 1.2 reads it") {
  auto [yaml, json] = GENERATE(table<const char*, const char*>({
      {"{}", "{}"},
      {"", "{}"},
      {"{n: 42, neg: -7, f: 2.5, e: 1e3, big: 18446744073709551615}",
       R"({"big":18446744073709551615,"e":1000.0,"f":2.5,"n":42,"neg":-7})"},
      {R"({s: "42", t: true, no: false, nil: ~, empty: , word: yes, inf: .inf})",
       R"({"empty":null,"inf":".inf","nil":null,"no":false,"s":"42","t":true,"word":"yes"})"},
      {"{list: [1, [a, {b: c}]], nested: {deep: {x: 0x1F}}}",
       R"({"list":[1,["a",{"b":"c"}]],"nested":{"deep":{"x":"0x1F"}}})"},
      {"{a: &anchor [1, 2], b: *anchor}", R"({"a":[1,2],"b":[1,2]})"},
  }));
  const Config c = parse_ok(std::string(kMinimalPool) + "    plugin_config: " + yaml + "\n");
  CHECK(c.pools[0].plugin_config_json == json);
}

TEST_CASE("each kind of mistake names the key path and its line and column") {
  auto [yaml, error] = GENERATE(table<std::string, std::string>({
      // unknown keys, at every level
      {"service: {}\npool: []\n",
       "t.yaml:2:1: pool: unknown key (expected one of: service, pools, schedules)"},
      {"service:\n  sockett: {}\n",
       "t.yaml:2:3: service.sockett: unknown key (expected one of: socket, allow, state_dir, "
       "http, metrics, log, shutdown_timeout, connections, control, journal, "
       "shutdown_unfinished, redis, node, task_records)"},
      {std::string(kMinimalPool) + "    limits: {memroy: 1GiB}\n",
       "t.yaml:4:14: pools[0].limits.memroy: unknown key (expected one of: memory, cpu_time, "
       "cpu_quota, open_files, processes, file_size, max_payload, max_result)"},
      {std::string(kMinimalPool) + "    sandbox: {cgroup: yes}\n",
       "t.yaml:4:23: pools[0].sandbox.cgroup: expected one of off, auto, required, got \"yes\""},
      {std::string(kMinimalPool) + "    limits: {cpu_quota: 0.001}\n",
       "t.yaml:4:25: pools[0].limits.cpu_quota: expected 0 (no quota) or at least 0.01 (CPUs), "
       "got \"0.001\""},
      {"service:\n  state_dir: a\n  state_dir: b\n",
       "t.yaml:3:3: service.state_dir: duplicate key"},
      // wrong types
      {std::string(kMinimalPool) + "    concurrency: [1, 2]\n",
       "t.yaml:4:18: pools[0].concurrency: expected an integer from 1 to 4294967295, got a list"},
      {std::string(kMinimalPool) + "    limits: 5\n",
       "t.yaml:4:13: pools[0].limits: expected a mapping, got \"5\""},
      {"pools:\n  - name: a\n    plugin:\n",
       "t.yaml:3:5: pools[0].plugin: expected a non-empty string, got nothing"},
      {std::string(kMinimalPool) + "    dispatch: fastest\n",
       "t.yaml:4:15: pools[0].dispatch: expected one of round-robin, least-loaded, random, "
       "affinity, least-rss, least_rss, by-key, by_key, got \"fastest\""},
      {std::string(kMinimalPool) + "    plugin_config: [1]\n",
       "t.yaml:4:20: pools[0].plugin_config: expected a mapping, got a list"},
      // bad units
      {std::string(kMinimalPool) + "    limits:\n      memory: 256XB\n",
       "t.yaml:5:15: pools[0].limits.memory: expected a size like 256MiB, got \"256XB\""},
      {std::string(kMinimalPool) + "    task_defaults: {timeout: 30}\n",
       "t.yaml:4:30: pools[0].task_defaults.timeout: expected a duration of at least 1ms, "
       "like 30s, got \"30\""},
      // negative and zero
      {std::string(kMinimalPool) + "    task_defaults: {retries: -1}\n",
       "t.yaml:4:30: pools[0].task_defaults.retries: expected an integer from 0 to 4294967295, "
       "got \"-1\""},
      {std::string(kMinimalPool) + "    concurrency: 0\n",
       "t.yaml:4:18: pools[0].concurrency: expected an integer from 1 to 4294967295, got \"0\""},
      {std::string(kMinimalPool) + "    limits: {memory: 1MiB}\n",
       "t.yaml:4:22: pools[0].limits.memory: expected 0 (no limit) or at least 16MiB (the worker "
       "host needs that much address space to start), got \"1MiB\""},
      {std::string(kMinimalPool) + "    sandbox: {readonly_paths: [rel/x]}\n",
       "t.yaml:4:31: pools[0].sandbox.readonly_paths: expected absolute paths, got \"rel/x\""},
      {std::string(kMinimalPool) + "    sandbox: {init: {read_paths: [rel/x]}}\n",
       "t.yaml:4:34: pools[0].sandbox.init.read_paths: expected absolute paths, got \"rel/x\""},
      {std::string(kMinimalPool) + "    sandbox: {write_xor_execute: maybe}\n",
       "t.yaml:4:34: pools[0].sandbox.write_xor_execute: expected one of true, false, got "
       "\"maybe\""},
      // impossible combinations
      {std::string(kMinimalPool) + "    workers: {min: 5, max: 2}\n",
       "t.yaml:4:20: pools[0].workers.min: min (5) is greater than max (2)"},
      {std::string(kMinimalPool) + "    workers: {min: 0, autoscale: {cooldown: 1s}}\n",
       "t.yaml:4:20: pools[0].workers.min: 0 needs the pool's task_types (a pool learns its "
       "types from its first worker otherwise, and this one may have none)"},
      {std::string(kMinimalPool) + "    workers: {autoscale: {scale_up_step: 0}}\n",
       "t.yaml:4:42: pools[0].workers.autoscale.scale_up_step: expected an integer from 1 to "
       "4294967295, got \"0\""},
      {std::string(kMinimalPool) + "    workers: {autoscale: {target_wait: 1s}}\n",
       "t.yaml:4:27: pools[0].workers.autoscale.target_wait: unknown key (expected one of: "
       "target_queue_wait, scale_up_step, cooldown, idle_timeout)"},
      {std::string(kMinimalPool) + "    task_defaults: {timeout: 2m, max_timeout: 1m}\n",
       "t.yaml:4:47: pools[0].task_defaults.max_timeout: max_timeout (60000ms) is less than "
       "timeout (120000ms)"},
      {std::string(kMinimalPool) + "    workers: {max: 4, initial: 9}\n",
       "t.yaml:4:32: pools[0].workers.initial: 9 is outside [min, max] = [1, 4]"},
      {std::string(kMinimalPool) + "    retry: {base: 2s, max: 1s}\n",
       "t.yaml:4:28: pools[0].retry.max: max (1000ms) is less than base (2000ms)"},
      {std::string(kMinimalPool) + "    restart: {backoff_base: 2s, backoff_max: 1s}\n",
       "t.yaml:4:46: pools[0].restart.backoff_max: backoff_max (1000ms) is less than "
       "backoff_base (2000ms)"},
      // a value that did not parse is not compared with another (no second, confusing error)
      {std::string(kMinimalPool) + "    retry: {base: soon, max: 10ms}\n",
       "t.yaml:4:19: pools[0].retry.base: expected a duration like 250ms or 30s, got \"soon\""},
      // pools
      {"pools:\n  - name: a\n",
       "t.yaml:2:5: pools[0].plugin: required: the path of the plugin .so"},
      {"pools:\n  - name: Bad Name\n    plugin: a.so\n",
       "t.yaml:2:11: pools[0].name: expected a name of a-z, 0-9, _ and -, got \"Bad Name\""},
      {"pools:\n  - name: a\n    plugin: a.so\n  - name: a\n    plugin: b.so\n",
       "t.yaml:4:11: pools[1].name: pool name \"a\" is already used by pools[0]"},
      {"pools:\n  - name: a\n    plugin: a.so\n    task_types: [x, y]\n"
       "  - name: b\n    plugin: b.so\n    task_types: [y]\n",
       "t.yaml:7:18: pools[1].task_types[0]: task type \"y\" is already served by pool \"a\" "
       "(pools[0])"},
      // service
      {"service:\n  journal: maybe\n",
       "t.yaml:2:12: service.journal: expected on, off or a mapping {enabled, sync, "
       "group_commit}, got \"maybe\""},
      {"service:\n  journal: {sync: always}\n",
       "t.yaml:2:19: service.journal.sync: expected one of normal, full, got \"always\""},
      {"service:\n  journal: {group_commit: 2s}\n",
       "t.yaml:2:27: service.journal.group_commit: expected at most 1s (every submit may wait "
       "this long for its commit), got \"2s\""},
      {"service:\n  journal: off\n  shutdown_unfinished: keep\n",
       "t.yaml:3:24: service.shutdown_unfinished: keep needs the journal (service.journal is "
       "off): without it what is left at a shutdown can only be dead-lettered; use dead_letter"},
      {"service: {socket: {mode: \"0999\"}}\n",
       "t.yaml:1:26: service.socket.mode: expected an octal mode like \"0660\", got \"0999\""},
      {"service:\n  http:\n    listen: localhost\n",
       "t.yaml:3:13: service.http.listen: expected HOST:PORT like 127.0.0.1:9464 (port 0: "
       "any free port), got \"localhost\""},
      {"service:\n  metrics:\n    listen: localhost\n",
       "t.yaml:3:13: service.metrics.listen: expected HOST:PORT like 127.0.0.1:9464 (port 0: "
       "any free port), got \"localhost\""},
      {"service:\n  allow:\n    - {user: a, group: b, rights: read}\n",
       "t.yaml:3:7: service.allow[0]: expected exactly one of user: or group: (a name or a "
       "number)"},
      {"service:\n  allow:\n    - {user: a, rights: root}\n",
       "t.yaml:3:25: service.allow[0].rights: expected one of read, admin, got \"root\""},
      {"service:\n  control: {streams_per_uid: 0}\n",
       "t.yaml:2:30: service.control.streams_per_uid: expected an integer from 1 to 4294967295, "
       "got \"0\""},
      {"service:\n  control: {idle_timeout: 60}\n",
       "t.yaml:2:27: service.control.idle_timeout: expected a duration like 250ms or 30s, got "
       "\"60\""},
      {"service:\n  connections: {max: 4}\n  control: {admin_reserved_connections: 4}\n",
       "t.yaml:3:41: service.control.admin_reserved_connections: expected fewer than "
       "connections.max (4), got 4: peers without admin rights would get no connection"},
      {"service:\n  control: {stream_per_uid: 3}\n",
       "t.yaml:2:13: service.control.stream_per_uid: unknown key (expected one of: "
       "admin_reserved_connections, connections_per_uid, streams_per_connection, "
       "streams_per_uid, idle_timeout)"},
      // the document itself
      {"", "t.yaml:1:1: expected a mapping with service: and pools:, got an empty document"},
      {std::string(kMinimalPool) + "    plugin_config: &loop {a: *loop}\n",
       "t.yaml:4:20: pools[0].plugin_config: nested deeper than 64 levels (an alias that "
       "contains itself?)"},
  }));
  INFO(yaml);
  CHECK(errors_of(yaml) == error);
}

TEST_CASE("a YAML syntax error carries its line and column") {
  // yaml-cpp notices the unclosed flow mapping at the ':' of the next key.
  CHECK(errors_of("service:\n  log: {level: info\npools: []\n") ==
        "t.yaml:3:6: YAML syntax error: end of map flow not found");
  CHECK(errors_of("service:\n\tlog: 1\n") == "t.yaml:2:5: YAML syntax error: illegal map value");
}

TEST_CASE("workers.autoscale: its keys, min 0 with task_types, and initial at min") {
  Config c = parse_ok(R"(pools:
  - name: a
    plugin: a.so
    task_types: [resize]
    workers:
      min: 0
      max: 6
      autoscale: {target_queue_wait: 80ms, scale_up_step: 2, cooldown: 3s, idle_timeout: 45s}
  - name: b
    plugin: b.so
    workers: {min: 2, max: 5, autoscale: {}}
  - name: c
    plugin: c.so
)");
  const sandpool::PoolOptions a = sandpool::to_pool_options(c.pools.at(0));
  CHECK(a.autoscale.enabled);
  CHECK(a.autoscale.target_queue_wait == 80ms);
  CHECK(a.autoscale.scale_up_step == 2);
  CHECK(a.autoscale.cooldown == 3s);
  CHECK(a.autoscale.idle_timeout == 45s);
  CHECK(a.worker_bounds == sandpool::WorkerBounds{0, 6});
  CHECK(a.workers == 0);  // an autoscaled pool starts at min
  CHECK(sandpool::check_worker_count(a));
  const sandpool::PoolOptions b = sandpool::to_pool_options(c.pools.at(1));
  CHECK(b.autoscale == sandpool::AutoscalePolicy{true, 100ms, 1, 2000ms, 30000ms});
  CHECK(b.workers == 2);
  CHECK_FALSE(c.pools.at(2).autoscale.enabled);
  CHECK(c.pools.at(2).workers == 2);
}

TEST_CASE("every problem in a file is reported in file order") {
  const std::string e = errors_of(R"(service:
  log: {level: loud}
pools:
  - name: a
    plugin: a.so
    workers: {min: 0}
    extra: 1
)");
  CHECK(e ==
        "t.yaml:2:16: service.log.level: expected one of trace, debug, info, warn, error, "
        "critical, off, got \"loud\"\n"
        "t.yaml:6:20: pools[0].workers.min: 0 starts workers on demand, which needs "
        "workers.autoscale\n"
        "t.yaml:7:5: pools[0].extra: unknown key (expected one of: name, plugin, plugin_config, "
        "task_types, backend, workers, concurrency, queue, tenants, rate_limits, "
        "concurrency_per_type, "
        "dispatch, limits, sandbox, health, "
        "task_defaults, retry, restart, recycle)");
}

TEST_CASE("a file that cannot be read is not_found and named") {
  auto c = sandpool::load_config("/nonexistent/poold.yaml");
  REQUIRE_FALSE(c);
  CHECK(c.status().code() == sandpool::Code::kNotFound);
  CHECK(c.status().message().find("/nonexistent/poold.yaml") != std::string::npos);
}

TEST_CASE("sandbox namespaces: all by default, narrowed, required, extra paths and /tmp") {
  using sandpool::sandbox::NamespaceSet;
  const sandpool::PoolOptions d = sandpool::to_pool_options(parse_ok(kMinimalPool).pools[0]);
  CHECK(d.sandbox.namespaces.wanted == NamespaceSet::all());
  CHECK(d.sandbox.namespaces.required.empty());
  CHECK(d.sandbox.namespaces.tmpfs_size == 0);

  const sandpool::PoolOptions o = sandpool::to_pool_options(parse_ok(std::string(kMinimalPool) + R"(
    sandbox:
      namespaces: [user, pid, net, mnt]
      require: [net, pid]
      readonly_paths: [/opt/models]
      tmpfs_size: 16MiB
)")
                                                                .pools[0]);
  CHECK(o.sandbox.namespaces.wanted.describe() == "user,pid,net,mnt");
  CHECK(o.sandbox.namespaces.required.describe() == "pid,net");
  CHECK(o.sandbox.namespaces.readonly_paths == std::vector<std::string>{"/opt/models"});
  CHECK(o.sandbox.namespaces.tmpfs_size == (16u << 20));

  const sandpool::PoolOptions none = sandpool::to_pool_options(
      parse_ok(std::string(kMinimalPool) + "    sandbox: {namespaces: []}\n").pools[0]);
  CHECK(none.sandbox.namespaces.wanted.empty());
}

TEST_CASE("bad sandbox namespace keys are named with their line") {
  auto [yaml, error] = GENERATE(table<std::string, std::string>({
      {std::string(kMinimalPool) + "    sandbox: {namespaces: [net, cgroup]}\n",
       "t.yaml:4:27: pools[0].sandbox.namespaces: unknown namespace 'cgroup' (expected user, "
       "pid, net, ipc, uts, mount)"},
      {std::string(kMinimalPool) + "    sandbox: {namespaces: [user], require: [net, pid]}\n",
       "t.yaml:4:44: pools[0].sandbox.require: requires pid, net but sandbox.namespaces leaves "
       "them out"},
      {std::string(kMinimalPool) + "    sandbox: {readonly_paths: [opt/models]}\n",
       "t.yaml:4:31: pools[0].sandbox.readonly_paths: expected absolute paths, got \"opt/models\""},
  }));
  INFO(yaml);
  CHECK(errors_of(yaml) == error);
}
