// How a pool's workers are launched, decided from its options and the host's facts by pure
// functions (no syscalls), so that every spawner/cgroup/namespace/user combination is
// unit-tested without a process (tests/manager/plan_launch_test.cpp). The pool plans once
// at start and again on a reconfigure (PoolLoop::reconfigure), each time from facts probed
// once (host_facts.hpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/pool/pool_options.hpp>
#include <sandpool/pool/spawner.hpp>

#include "core/host_facts.hpp"
#include "supervision/worker_process.hpp"

namespace sandpool::core {

struct LaunchPlan {
  supervision::LaunchSpec spec;  // what every worker is started with
  // The isolation as configured (sandbox::describe_isolation, plus "+cgroup:v2").
  std::string isolation;
  // The layers the manager sets up around what each worker reports of its own
  // (ReadyMsg::isolation): the namespaces before ("ns:user,pid+"), the cgroup after
  // ("+cgroup:v1"); empty when there are none.
  std::string manager_prefix;
  std::string manager_layers;
  // For the pool's log, once at start: what is configured but not applied.
  std::vector<std::string> warnings;
};

// Step 4 of design.md as a decision: who the workers become. Returns the policy's own run_as
// when it names one, the resolved `user` as root, nothing when not root or no user is named;
// the privilege facts' failure otherwise (a plugin other users could replace, or one the
// user cannot read, as Code::kPlugin).
Result<std::optional<sandbox::RunAs>> resolve_privileges(const PoolOptions& opts,
                                                         const HostFacts& facts);

// Returns true iff the pool makes its own clone3 spawner: namespaces are wanted and no
// PoolOptions::spawner is given (without namespaces the vfork spawner is faster).
bool wants_clone3_spawner(const PoolOptions& opts);

// The clone3 spawner's options: the namespace policy, with the workers' user mapped into the
// user namespace unless the policy maps one itself.
Clone3SpawnerOptions clone3_spawner_options(const PoolOptions& opts,
                                            const std::optional<sandbox::RunAs>& run_as);

// The launch plan. Fails when the privilege facts refuse (resolve_privileges), when
// sandbox.cgroup is required and the facts have no cgroup tree, and when limits.cpu_quota is
// set with sandbox.cgroup off.
Result<LaunchPlan> plan_launch(const PoolOptions& opts, const HostFacts& facts);

}  // namespace sandpool::core
