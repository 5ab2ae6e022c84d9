#include "core/plan_launch.hpp"

#include <algorithm>

namespace sandpool::core {
namespace {

// A failed plugin check is the plugin's fault (Code::kPlugin), named as the check names it.
Status as_plugin_error(const Status& s, const std::string& prefix) {
  return Status::error(s.code() == Code::kPermissionDenied ? Code::kPlugin : s.code(),
                       prefix + s.message());
}

// What the namespaces made the worker's own stays open under Landlock (step 6): the /proc
// of its pid namespace shows only itself, the view's /etc files are the host's own, and
// the view's tmpfs /tmp is private and empty.
void open_namespace_paths(const PoolOptions& opts, const HostFacts& facts,
                          sandbox::SandboxPolicy* policy) {
  using sandbox::Namespace;
  const bool mount = facts.namespaces.has(Namespace::kMount);
  if (facts.namespaces.has(Namespace::kPid) && mount) policy->readonly_paths.push_back("/proc");
  if (!mount) return;
  for (const std::string& f : facts.etc_files) policy->readonly_paths.push_back(f);
  if (opts.sandbox.namespaces.tmpfs_size > 0) policy->writable_paths.push_back("/tmp");
}

// Per-worker cgroups: the tree and its limits, or the warnings of going without.
Status plan_cgroups(const PoolOptions& opts, const HostFacts& facts, LaunchPlan* plan) {
  using sandbox::CgroupMode;
  if (opts.sandbox.cgroup == CgroupMode::kOff) {
    if (opts.sandbox.cpu_quota > 0) {
      return Status::invalid("limits.cpu_quota needs per-worker cgroups (sandbox.cgroup)");
    }
    return Status::ok();
  }
  if (!facts.cgroup_version) {
    const Status why = facts.cgroups_error
                           ? Status::error(Code::kNotFound, "no cgroup tree was probed")
                           : facts.cgroups_error;
    if (opts.sandbox.cgroup == CgroupMode::kRequired) {
      return why.with_context("sandbox.cgroup is required, but per-worker cgroups are unavailable");
    }
    plan->warnings.push_back("per-worker cgroups unavailable: " + why.message() +
                             "; workers are limited by rlimits only (sandbox.cgroup: auto)");
    if (opts.sandbox.cpu_quota > 0) {
      plan->warnings.emplace_back("limits.cpu_quota is not enforced without a cgroup");
    }
    return Status::ok();
  }
  supervision::LaunchSpec& spec = plan->spec;
  spec.cgroups = facts.cgroups;
  spec.pool_name = opts.name;
  spec.cgroup_limits.memory_bytes = opts.sandbox.limits.address_space;
  spec.cgroup_limits.pids = opts.sandbox.limits.processes;
  spec.cgroup_limits.cpus = opts.sandbox.cpu_quota;
  // The cgroup's memory limit replaces RLIMIT_AS, which breaks runtimes that reserve large
  // address ranges (JITs, Go, ASan) without using them.
  spec.args.policy.limits.address_space = 0;
  // pids.max replaces RLIMIT_NPROC, which counts every task of the worker's user on the
  // host: every worker of every pool running as sandbox.user would share one budget, and a
  // fork bomb in one would stop the others' threads.
  spec.args.policy.limits.processes = 0;
  plan->manager_layers = "+cgroup:" + std::string(supervision::to_string(*facts.cgroup_version));
  return Status::ok();
}

}  // namespace

Result<std::optional<sandbox::RunAs>> resolve_privileges(const PoolOptions& opts,
                                                         const HostFacts& facts) {
  const PrivilegeFacts& p = facts.privileges;
  if (!p.root) return opts.sandbox.run_as;
  if (!p.plugin_permissions) return as_plugin_error(p.plugin_permissions, "");
  if (opts.sandbox.run_as || opts.user.empty()) return opts.sandbox.run_as;
  if (!p.user_error) return p.user_error;
  if (!p.plugin_readable) {
    return as_plugin_error(p.plugin_readable, "plugin " + facts.plugin_path + ": ");
  }
  if (!p.user) return Status::error(Code::kInternal, "user '" + opts.user + "' not probed");
  return p.user;
}

bool wants_clone3_spawner(const PoolOptions& opts) {
  return !opts.spawner && !opts.sandbox.namespaces.wanted.empty();
}

Clone3SpawnerOptions clone3_spawner_options(const PoolOptions& opts,
                                            const std::optional<sandbox::RunAs>& run_as) {
  Clone3SpawnerOptions so;
  so.namespaces = opts.sandbox.namespaces;
  if (run_as && !so.namespaces.run_as_uid) {
    so.namespaces.run_as_uid = run_as->uid;
    so.namespaces.run_as_gid = run_as->gid;
  }
  // What init may read must be in the view too (Landlock takes it away after init).
  so.view_paths = opts.sandbox.init.read_paths;
  so.logger = opts.logger;
  so.log_name = opts.name;
  return so;
}

Result<LaunchPlan> plan_launch(const PoolOptions& opts, const HostFacts& facts) {
  auto run_as = resolve_privileges(opts, facts);
  if (!run_as) return run_as.status();
  LaunchPlan plan;
  supervision::LaunchSpec& spec = plan.spec;
  spec.worker_path = facts.worker_path;
  sandbox::WorkerArgs& args = spec.args;
  args.plugin_path = facts.plugin_path;
  args.heartbeat_ms = static_cast<std::uint32_t>(opts.heartbeat_interval.count());
  args.max_result = opts.max_result;
  args.init_timeout_ms = static_cast<std::uint32_t>(opts.init_timeout.count());
  args.plugin_config_json = opts.plugin_config_json;
  args.parent_pid = facts.manager_pid;
  args.policy = opts.sandbox;
  args.policy.limits.cpu_seconds = worker_cpu_seconds(opts);
  args.policy.run_as = std::move(run_as).value();
  open_namespace_paths(opts, facts, &args.policy);
  spec.region.task_ring_bytes = opts.ring_bytes;
  spec.region.result_ring_bytes = opts.ring_bytes;
  spec.region.max_message = std::max(opts.max_payload, opts.max_result) + 4096;
  plan.isolation = sandbox::describe_isolation(opts.sandbox, facts.namespaces);
  if (!facts.namespaces.empty()) plan.manager_prefix = "ns:" + facts.namespaces.describe() + "+";
  SP_RETURN_IF_ERROR(plan_cgroups(opts, facts, &plan));
  plan.isolation += plan.manager_layers;
  if (const auto off = sandbox::unlimited_resources(opts.sandbox.limits); !off.empty()) {
    std::string names;
    for (const std::string& n : off) names += (names.empty() ? "limits." : ", limits.") + n;
    plan.warnings.push_back("limits set to 0, none applied: " + names);
  }
  return plan;
}

}  // namespace sandpool::core
