// plan_launch() and its parts as tables: every spawner/cgroup/namespace/user combination
// from facts written by hand, no process and no probe.
#include <algorithm>
#include <catch2/catch.hpp>

#include "core/plan_launch.hpp"

namespace sandpool::core {
namespace {

using sandbox::CgroupMode;
using sandbox::Namespace;
using sandbox::NamespaceSet;
using supervision::CgroupVersion;

NamespaceSet set_of(std::initializer_list<Namespace> members) {
  NamespaceSet s;
  for (Namespace ns : members) s.add(ns);
  return s;
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

PoolOptions base_options() {
  PoolOptions o;
  o.name = "p";
  o.plugin_path = "plugins/libecho.so";
  o.user = "";
  return o;
}

HostFacts base_facts() {
  HostFacts f;
  f.manager_pid = 4242;
  f.worker_path = "/usr/libexec/sandpool/sandpool-worker";
  f.plugin_path = "/srv/plugins/libecho.so";
  return f;
}

const Status kDenied = Status::error(Code::kPermissionDenied, "mode 0666");
const sandbox::RunAs kSandboxUser{998, 997, {}};
const sandbox::RunAs kGivenRunAs{1000, 1000, {}};

}  // namespace

TEST_CASE("who the workers become, for every root, user and plugin combination") {
  struct Row {
    const char* what;
    bool root;
    std::string user;
    std::optional<sandbox::RunAs> policy_run_as;
    Status permissions, user_error, readable;
    std::optional<sandbox::RunAs> resolved;
    // expected
    Code code;  // kOk: planned
    std::optional<sandbox::RunAs> run_as;
    const char* message;
  };
  const Status unknown = Status::error(Code::kNotFound, "no user 'sandbox'");
  const Row row = GENERATE_COPY(values<Row>({
      {"not root: nothing checked",
       false,
       "sandbox",
       {},
       kDenied,
       unknown,
       kDenied,
       {},
       Code::kOk,
       {},
       ""},
      {"not root, run_as given: kept",
       false,
       "",
       kGivenRunAs,
       {},
       {},
       {},
       {},
       Code::kOk,
       kGivenRunAs,
       ""},
      {"root, no user: stays root", true, "", {}, {}, {}, {}, {}, Code::kOk, {}, ""},
      {"root, user resolved",
       true,
       "sandbox",
       {},
       {},
       {},
       {},
       kSandboxUser,
       Code::kOk,
       kSandboxUser,
       ""},
      {"root, run_as given: the user is not resolved",
       true,
       "sandbox",
       kGivenRunAs,
       {},
       {},
       {},
       {},
       Code::kOk,
       kGivenRunAs,
       ""},
      {"root, writable plugin: refused as the plugin's fault",
       true,
       "",
       {},
       kDenied,
       {},
       {},
       {},
       Code::kPlugin,
       {},
       "mode 0666"},
      {"root, unknown user: refused",
       true,
       "sandbox",
       {},
       {},
       unknown,
       {},
       {},
       Code::kNotFound,
       {},
       "no user 'sandbox'"},
      {"root, plugin unreadable by the user: refused naming the plugin",
       true,
       "sandbox",
       {},
       {},
       {},
       kDenied,
       kSandboxUser,
       Code::kPlugin,
       {},
       "plugin /srv/plugins/libecho.so: mode 0666"},
  }));
  SECTION(row.what) {
    PoolOptions o = base_options();
    o.user = row.user;
    o.sandbox.run_as = row.policy_run_as;
    HostFacts f = base_facts();
    f.privileges = {row.root, row.permissions, row.resolved, row.user_error, row.readable};
    auto plan = plan_launch(o, f);
    if (row.code == Code::kOk) {
      REQUIRE(plan);
      CHECK(plan->spec.args.policy.run_as == row.run_as);
    } else {
      REQUIRE_FALSE(plan);
      CHECK(plan.status().code() == row.code);
      CHECK(plan.status().message() == row.message);
    }
  }
}

TEST_CASE("the pool makes a clone3 spawner only for namespaces and only without its own") {
  PoolOptions o = base_options();
  CHECK_FALSE(wants_clone3_spawner(o));  // no namespaces: the vfork spawner
  o.sandbox.namespaces.wanted = set_of({Namespace::kPid});
  CHECK(wants_clone3_spawner(o));
  o.spawner = make_process_spawner();
  CHECK_FALSE(wants_clone3_spawner(o));  // the caller's spawner, whatever it asks for
}

TEST_CASE("the clone3 spawner maps the workers' user unless the policy maps one") {
  PoolOptions o = base_options();
  o.sandbox.namespaces.wanted = set_of({Namespace::kUser, Namespace::kPid});
  Clone3SpawnerOptions so = clone3_spawner_options(o, std::nullopt);
  CHECK_FALSE(so.namespaces.run_as_uid);
  CHECK(so.namespaces.wanted == o.sandbox.namespaces.wanted);
  CHECK(so.log_name == "p");
  so = clone3_spawner_options(o, kSandboxUser);
  CHECK(so.namespaces.run_as_uid == 998u);
  CHECK(so.namespaces.run_as_gid == 997u);
  o.sandbox.namespaces.run_as_uid = 5;
  o.sandbox.namespaces.run_as_gid = 6;
  so = clone3_spawner_options(o, kSandboxUser);
  CHECK(so.namespaces.run_as_uid == 5u);
  CHECK(so.namespaces.run_as_gid == 6u);
}

TEST_CASE("the namespaces in effect open their own paths and name the isolation") {
  struct Row {
    const char* what;
    NamespaceSet in_effect;
    std::uint64_t tmpfs;
    bool proc, etc, tmp;
    const char* prefix;
  };
  const Row row = GENERATE(values<Row>({
      {"none", {}, 1 << 20, false, false, false, ""},
      {"pid alone: no view, nothing opened", set_of({Namespace::kPid}), 1 << 20, false, false,
       false, "ns:pid+"},
      {"mount alone: the view's /etc and /tmp", set_of({Namespace::kMount}), 1 << 20, false, true,
       true, "ns:mnt+"},
      {"pid and mount: its own /proc too", set_of({Namespace::kPid, Namespace::kMount}), 1 << 20,
       true, true, true, "ns:pid,mnt+"},
      {"mount without a tmpfs: /tmp stays closed", set_of({Namespace::kMount}), 0, false, true,
       false, "ns:mnt+"},
      {"user, pid, net, mount",
       set_of({Namespace::kUser, Namespace::kPid, Namespace::kNet, Namespace::kMount}), 1 << 20,
       true, true, true, "ns:user,pid,net,mnt+"},
  }));
  SECTION(row.what) {
    PoolOptions o = base_options();
    o.sandbox.namespaces.wanted = row.in_effect;
    o.sandbox.namespaces.tmpfs_size = row.tmpfs;
    HostFacts f = base_facts();
    f.namespaces = row.in_effect;
    f.etc_files = {"/etc/passwd", "/etc/hosts"};
    auto plan = plan_launch(o, f);
    REQUIRE(plan);
    const auto& ro = plan->spec.args.policy.readonly_paths;
    CHECK(has(ro, "/proc") == row.proc);
    CHECK(has(ro, "/etc/passwd") == row.etc);
    CHECK(has(ro, "/etc/hosts") == row.etc);
    CHECK(has(plan->spec.args.policy.writable_paths, "/tmp") == row.tmp);
    CHECK(plan->manager_prefix == row.prefix);
    CHECK(plan->isolation == std::string(row.prefix) + "rlimits+seccomp:strict");
  }
}

TEST_CASE("per-worker cgroups for every mode, with and without a tree") {
  struct Row {
    const char* what;
    CgroupMode mode;
    std::optional<CgroupVersion> tree;
    double cpu_quota;
    // expected
    Code code;
    const char* layers;
    std::size_t warnings;
  };
  const Row row = GENERATE(values<Row>({
      {"off", CgroupMode::kOff, {}, 0, Code::kOk, "", 0},
      {"off, a tree on the host: not used", CgroupMode::kOff, CgroupVersion::kV2, 0, Code::kOk, "",
       0},
      {"off with a CPU quota: refused", CgroupMode::kOff, {}, 0.5, Code::kInvalidArgument, "", 0},
      {"auto, v2", CgroupMode::kAuto, CgroupVersion::kV2, 0.5, Code::kOk, "+cgroup:v2", 0},
      {"auto, v1", CgroupMode::kAuto, CgroupVersion::kV1, 0, Code::kOk, "+cgroup:v1", 0},
      {"auto, none: rlimits only, said once", CgroupMode::kAuto, {}, 0, Code::kOk, "", 1},
      {"auto, none, a CPU quota: said too", CgroupMode::kAuto, {}, 0.5, Code::kOk, "", 2},
      {"required, v2", CgroupMode::kRequired, CgroupVersion::kV2, 0, Code::kOk, "+cgroup:v2", 0},
      {"required, none: refused", CgroupMode::kRequired, {}, 0, Code::kNotFound, "", 0},
  }));
  SECTION(row.what) {
    PoolOptions o = base_options();
    o.sandbox.cgroup = row.mode;
    o.sandbox.cpu_quota = row.cpu_quota;
    o.sandbox.limits.address_space = 1u << 30;
    o.sandbox.limits.processes = 64;
    HostFacts f = base_facts();
    f.cgroup_version = row.tree;
    if (!row.tree) f.cgroups_error = Status::error(Code::kNotFound, "no cgroup2 mount");
    auto plan = plan_launch(o, f);
    if (row.code != Code::kOk) {
      REQUIRE_FALSE(plan);
      CHECK(plan.status().code() == row.code);
      return;
    }
    REQUIRE(plan);
    const bool cgroups = row.mode != CgroupMode::kOff && row.tree;
    CHECK(plan->manager_layers == row.layers);
    CHECK(plan->isolation == std::string("rlimits+seccomp:strict") + row.layers);
    CHECK(plan->warnings.size() == row.warnings);
    const auto& limits = plan->spec.args.policy.limits;
    const auto& cg = plan->spec.cgroup_limits;
    // The cgroup's limits replace RLIMIT_AS and RLIMIT_NPROC; without one the rlimits stay.
    CHECK(limits.address_space == (cgroups ? 0u : 1u << 30));
    CHECK(limits.processes == (cgroups ? 0u : 64u));
    CHECK(cg.memory_bytes == (cgroups ? 1u << 30 : 0u));
    CHECK(cg.pids == (cgroups ? 64u : 0u));
    CHECK(cg.cpus == (cgroups ? row.cpu_quota : 0.0));
    CHECK(plan->spec.pool_name == (cgroups ? "p" : ""));
  }
}

TEST_CASE("a plan carries the options and the facts into the launch spec") {
  PoolOptions o = base_options();
  o.heartbeat_interval = std::chrono::milliseconds(300);
  o.init_timeout = std::chrono::milliseconds(7000);
  o.max_payload = 1000;
  o.max_result = 5000;
  o.ring_bytes = 65536;
  o.plugin_config_json = R"({"k":1})";
  auto plan = plan_launch(o, base_facts());
  REQUIRE(plan);
  const supervision::LaunchSpec& s = plan->spec;
  CHECK(s.worker_path == "/usr/libexec/sandpool/sandpool-worker");
  CHECK(s.args.plugin_path == "/srv/plugins/libecho.so");
  CHECK(s.args.parent_pid == 4242);
  CHECK(s.args.heartbeat_ms == 300u);
  CHECK(s.args.init_timeout_ms == 7000u);
  CHECK(s.args.max_result == 5000u);
  CHECK(s.args.plugin_config_json == R"({"k":1})");
  CHECK(s.args.policy.limits.cpu_seconds == worker_cpu_seconds(o));
  CHECK(s.region.task_ring_bytes == 65536u);
  CHECK(s.region.result_ring_bytes == 65536u);
  CHECK(s.region.max_message == 5000u + 4096u);
  CHECK(plan->warnings.empty());
}

TEST_CASE("limits set to 0 are named in one warning") {
  PoolOptions o = base_options();
  o.sandbox.limits.address_space = 0;
  o.sandbox.limits.file_size = 0;
  auto plan = plan_launch(o, base_facts());
  REQUIRE(plan);
  REQUIRE(plan->warnings.size() == 1);
  CHECK(plan->warnings[0] == "limits set to 0, none applied: limits.memory, limits.file_size");
}

TEST_CASE("every combination of user, namespaces and cgroups plans or fails for its reason") {
  const bool root = GENERATE(false, true);
  const bool user_known = GENERATE(false, true);
  const int ns = GENERATE(0, 1, 2);  // none, pid+mount, user+pid+mount
  const CgroupMode mode = GENERATE(CgroupMode::kOff, CgroupMode::kAuto, CgroupMode::kRequired);
  const bool tree = GENERATE(false, true);
  const double quota = GENERATE(0.0, 0.5);
  PoolOptions o = base_options();
  o.user = "sandbox";
  o.sandbox.cgroup = mode;
  o.sandbox.cpu_quota = quota;
  const NamespaceSet sets[] = {{},
                               set_of({Namespace::kPid, Namespace::kMount}),
                               set_of({Namespace::kUser, Namespace::kPid, Namespace::kMount})};
  o.sandbox.namespaces.wanted = sets[ns];
  HostFacts f = base_facts();
  f.privileges.root = root;
  if (user_known) {
    f.privileges.user = kSandboxUser;
  } else {
    f.privileges.user_error = Status::error(Code::kNotFound, "no user 'sandbox'");
  }
  f.namespaces = sets[ns];
  if (tree) {
    f.cgroup_version = CgroupVersion::kV2;
  } else {
    f.cgroups_error = Status::error(Code::kNotFound, "no cgroup2 mount");
  }
  auto plan = plan_launch(o, f);
  INFO("root " << root << " user " << user_known << " ns " << ns << " mode "
               << sandbox::cgroup_mode_name(mode) << " tree " << tree << " quota " << quota);
  const bool refused = (root && !user_known) || (mode == CgroupMode::kOff && quota > 0) ||
                       (mode == CgroupMode::kRequired && !tree);
  REQUIRE(static_cast<bool>(plan) == !refused);
  if (refused) return;
  const bool cgroups = mode != CgroupMode::kOff && tree;
  CHECK(plan->spec.args.policy.run_as == (root ? std::optional(kSandboxUser) : std::nullopt));
  CHECK(plan->manager_prefix.empty() == (ns == 0));
  CHECK(plan->manager_layers == (cgroups ? "+cgroup:v2" : ""));
  CHECK((plan->spec.cgroup_limits.cpus > 0) == (cgroups && quota > 0));
  CHECK(has(plan->spec.args.policy.readonly_paths, "/proc") == (ns != 0));
}

}  // namespace sandpool::core
