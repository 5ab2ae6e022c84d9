#include <catch2/catch.hpp>

#include <stdlib.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <sandpool/sandbox/worker_args.hpp>

using namespace sandpool::sandbox;

namespace {

auto fields(const WorkerArgs& a) {
  const ResourceLimits& l = a.policy.limits;
  return std::tie(a.plugin_path, a.channel_fd, a.doorbell_fd, a.plugin_fd, a.plugin_dir_fd,
                  a.heartbeat_ms, a.max_result, a.init_timeout_ms, a.parent_pid, a.gate_fd,
                  a.manager_pidfd, a.policy.profile, a.policy.allow_syscalls, l.address_space,
                  l.cpu_seconds, l.open_files, l.processes, l.file_size, a.policy.keep_env,
                  a.policy.run_as, a.policy.readonly_paths, a.policy.require,
                  a.policy.write_xor_execute, a.policy.init);
}

sandpool::Result<WorkerArgs> parse(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"sandpool-worker"};
  for (const std::string& s : args) argv.push_back(s.c_str());
  return parse_worker_argv(static_cast<int>(argv.size()), argv.data());
}

WorkerArgs base_args() {
  WorkerArgs a;
  a.plugin_path = "/opt/plugins/libecho.so";
  return a;
}

}  // namespace

TEST_CASE("every field of WorkerArgs survives to_argv and parse_worker_argv") {
  using Change = std::function<void(WorkerArgs&)>;
  const auto change = GENERATE(
      Change([](WorkerArgs&) {}),
      Change([](WorkerArgs& a) { a.plugin_path = "/path with spaces/-lib.so"; }),
      Change([](WorkerArgs& a) { a.channel_fd = 17; }),
      Change([](WorkerArgs& a) { a.doorbell_fd = 1000; }),
      Change([](WorkerArgs& a) { a.plugin_fd = 12; }),
      Change([](WorkerArgs& a) { a.plugin_dir_fd = 13; }),
      Change([](WorkerArgs& a) { a.heartbeat_ms = 1; }),
      Change([](WorkerArgs& a) { a.max_result = 0; }),
      Change([](WorkerArgs& a) { a.max_result = UINT64_MAX; }),
      Change([](WorkerArgs& a) { a.init_timeout_ms = 1; }),
      Change([](WorkerArgs& a) { a.parent_pid = 4242; }),
      Change([](WorkerArgs& a) { a.gate_fd = 5; }),
      Change([](WorkerArgs& a) { a.manager_pidfd = 8; }),
      Change([](WorkerArgs& a) { a.policy.profile = SeccompProfile::kRelaxed; }),
      Change([](WorkerArgs& a) { a.policy.profile = SeccompProfile::kOff; }),
      Change([](WorkerArgs& a) { a.policy.allow_syscalls = {"socket"}; }),
      Change([](WorkerArgs& a) {
        a.policy.allow_syscalls = {"socket", "connect", "socket"};
      }),
      Change([](WorkerArgs& a) { a.policy.limits.address_space = 1ull << 40; }),
      Change([](WorkerArgs& a) { a.policy.limits.cpu_seconds = 3600; }),
      Change([](WorkerArgs& a) { a.policy.limits.open_files = 0; }),
      Change([](WorkerArgs& a) { a.policy.limits.processes = 7; }),
      Change([](WorkerArgs& a) { a.policy.limits.file_size = 1; }), Change([](WorkerArgs& a) {
        a.policy.keep_env = {"LANG", "TZ"};
      }),
      Change([](WorkerArgs& a) {
        a.policy.run_as = RunAs{65534, 65534, {}};
      }),
      Change([](WorkerArgs& a) {
        a.policy.run_as = RunAs{0, 0, {}};
      }),
      Change([](WorkerArgs& a) {
        a.policy.run_as = RunAs{1000, 100, {100, 27, 4294967294u}};
      }),
      Change([](WorkerArgs& a) {
        a.policy.readonly_paths = {"/srv/models", "/etc/ssl/certs"};
      }),
      Change([](WorkerArgs& a) {
        a.policy.require = {"landlock", "net"};
      }),
      Change([](WorkerArgs& a) { a.policy.write_xor_execute = false; }),
      Change([](WorkerArgs& a) { a.policy.write_xor_execute = true; }), Change([](WorkerArgs& a) {
        a.policy.init.read_paths = {"/usr/lib/python3.11", "/srv/tasks"};
        a.policy.init.write_paths = {"/var/log/plugin.log"};
      }),
      Change([](WorkerArgs& a) { a.policy.init.network = true; }));
  WorkerArgs in = base_args();
  change(in);
  const std::vector<std::string> argv = to_argv(in);
  sandpool::Result<WorkerArgs> out = parse(argv);
  INFO(out.status().to_string());
  REQUIRE(out.is_ok());
  CHECK(fields(*out) == fields(in));
}

TEST_CASE("a flag's value may also be given inline after '='") {
  auto out = parse({"--plugin=/x=y.so", "--heartbeat-ms=40"});
  REQUIRE(out.is_ok());
  CHECK(out->plugin_path == "/x=y.so");
  CHECK(out->heartbeat_ms == 40u);
}

TEST_CASE("the plugin config never reaches the command line, which anyone can read") {
  WorkerArgs in = base_args();
  in.plugin_config_json = R"({"api_key": "s3cr3t-in-config"})";
  for (const std::string& arg : to_argv(in)) CHECK(arg.find("s3cr3t") == std::string::npos);
  // It travels in the shared region instead, so a parsed command line has the default.
  auto out = parse(to_argv(in));
  REQUIRE(out.is_ok());
  CHECK(out->plugin_config_json == "{}");
  CHECK_FALSE(parse({"--plugin", "/x.so", "--config-json", "{}"}).is_ok());
}

TEST_CASE("two launches differ when their plugin configs do, though their command lines match") {
  WorkerArgs a = base_args(), b = base_args();
  CHECK(same_launch(a, b));
  b.plugin_config_json = R"({"model": "v2"})";
  CHECK(to_argv(a) == to_argv(b));
  CHECK_FALSE(same_launch(a, b));
  b = base_args();
  b.heartbeat_ms = a.heartbeat_ms + 1;
  CHECK_FALSE(same_launch(a, b));
}

TEST_CASE("the worker's environment is keep_env's variables of the manager's, and nothing else") {
  ::setenv("SP_TEST_KEPT", "kept value", 1);
  ::setenv("SP_TEST_SECRET", "manager secret", 1);
  ::unsetenv("SP_TEST_UNSET");
  SandboxPolicy policy;
  CHECK(worker_environment(policy).empty());  // keep_env empty: an empty environment
  policy.keep_env = {"SP_TEST_UNSET", "SP_TEST_KEPT"};
  CHECK(worker_environment(policy) == std::vector<std::string>{"SP_TEST_KEPT=kept value"});
  ::unsetenv("SP_TEST_KEPT");
  ::unsetenv("SP_TEST_SECRET");
}

TEST_CASE("only --plugin is required, the rest keeps the contract's defaults") {
  auto out = parse({"--plugin", "/x.so"});
  REQUIRE(out.is_ok());
  WorkerArgs expected;
  expected.plugin_path = "/x.so";
  CHECK(fields(*out) == fields(expected));
}

TEST_CASE("a malformed command line is refused with an error naming the flag") {
  struct Case {
    std::vector<std::string> argv;
    std::string needle;
  };
  const Case c = GENERATE(
      Case{{"--plugin", "/x.so", "--bogus", "1"}, "unknown flag '--bogus'"},
      Case{{"/x.so"}, "unknown flag '/x.so'"}, Case{{"--plugin"}, "--plugin: missing value"},
      Case{{"--plugin", "/x.so", "--heartbeat-ms"}, "--heartbeat-ms: missing value"},
      Case{{"--plugin", "/x.so", "--heartbeat-ms", "fast"}, "--heartbeat-ms: 'fast' is not"},
      Case{{"--plugin", "/x.so", "--heartbeat-ms", "-5"}, "--heartbeat-ms: '-5' is not"},
      Case{{"--plugin", "/x.so", "--heartbeat-ms", " 5"}, "--heartbeat-ms: ' 5' is not"},
      Case{{"--plugin", "/x.so", "--heartbeat-ms", "5ms"}, "--heartbeat-ms: '5ms' is not"},
      Case{{"--plugin", "/x.so", "--heartbeat-ms", ""}, "--heartbeat-ms: '' is not"},
      Case{{"--plugin", "/x.so", "--heartbeat-ms", "0"}, "--heartbeat-ms: 0 is outside"},
      Case{{"--plugin", "/x.so", "--max-result", "18446744073709551616"},
           "--max-result: 18446744073709551616 is outside"},
      Case{{"--plugin", "/x.so", "--channel-fd", "2"}, "--channel-fd: 2 is outside"},
      Case{{"--plugin", "/x.so", "--doorbell-fd", "4294967296"},
           "--doorbell-fd: 4294967296 is outside"},
      Case{{"--plugin", "/x.so", "--channel-fd", "4"}, "both 4"},
      Case{{"--plugin", "/x.so", "--gate-fd", "3"}, "--channel-fd and --gate-fd are both 3"},
      Case{{"--plugin", "/x.so", "--plugin-fd", "4"}, "--doorbell-fd and --plugin-fd are both 4"},
      Case{{"--plugin", "/x.so", "--plugin-dir-fd", "6"},
           "--plugin-fd and --plugin-dir-fd are both 6"},
      Case{{"--plugin", "/x.so", "--plugin-fd", "2"}, "--plugin-fd: 2 is outside"},
      Case{{"--plugin", "/x.so", "--gate-fd", "1"}, "--gate-fd: 1 is outside"},
      Case{{"--plugin", "/x.so", "--plugin", "/y.so"}, "--plugin: given more than once"},
      Case{{"--plugin", ""}, "--plugin: empty value"},
      Case{{"--heartbeat-ms", "10"}, "missing --plugin"},
      Case{{"--plugin", "/x.so", "--seccomp", "loose"}, "--seccomp: unknown profile 'loose'"},
      Case{{"--plugin", "/x.so", "--config-json", "{}"}, "unknown flag '--config-json'"},
      Case{{"--plugin", "/x.so", "--keep-env", "A=B"}, "--keep-env: 'A=B' is not a variable name"},
      Case{{"--plugin", "/x.so", "--allow-syscall", ""}, "--allow-syscall: empty value"},
      Case{{"--plugin", "/x.so", "--run-as-uid", "65534"}, "--run-as-uid and --run-as-gid go"},
      Case{{"--plugin", "/x.so", "--run-as-group", "5"}, "--run-as-uid and --run-as-gid go"},
      Case{{"--plugin", "/x.so", "--run-as-uid", "4294967295"},
           "--run-as-uid: 4294967295 is outside"},
      Case{{"--plugin", "/x.so", "--readonly-path", ""}, "--readonly-path: empty value"},
      Case{{"--plugin", "/x.so", "--require", ""}, "--require: empty value"});
  auto out = parse(c.argv);
  REQUIRE_FALSE(out.is_ok());
  INFO(out.status().to_string());
  CHECK(out.status().code() == sandpool::Code::kInvalidArgument);
  CHECK(out.status().message().find(c.needle) != std::string::npos);
}

TEST_CASE("the worker's exit codes are distinct and stay in the sysexits range") {
  const std::vector<int> codes{kExitUsage,    kExitChannel,  kExitLoad,
                               kExitInit,     kExitLockdown, kExitViolation,
                               kExitProtocol, kExitMemory,   kExitRegionCorrupt};
  for (std::size_t i = 0; i < codes.size(); ++i) {
    CHECK(codes[i] >= 64);
    CHECK(codes[i] < 126);  // 126+ are the shell's (cannot exec, signals)
    for (std::size_t j = i + 1; j < codes.size(); ++j) CHECK(codes[i] != codes[j]);
  }
}
