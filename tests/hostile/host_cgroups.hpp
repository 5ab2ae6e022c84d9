// The host's cgroups as the hostile suite sees them: every hierarchy mounted (each v1
// controller's, named ones like name=systemd, and the unified cgroup2 one), read from
// /proc/self/mountinfo and /proc/<pid>/cgroup on its own, not through the manager's layout
// detection, so the checks look wherever the manager might have left something, not only
// where it means to put it.
//
// The manager names its cgroups (docs/security.md, "cgroups") <own>/sandpool-<its pid>/
// <pool>-<n> in each hierarchy it uses, <own> being its own cgroup there; on a v2 host it may
// have moved itself into the leaf <own>/sandpool-manager first.
//
// Free functions over the live system; thread-safe as far as /proc is.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace sandpool::hostile {

// The directory of `pid`'s cgroup in the hierarchy of v1 `controller` ("pids", "memory"), or
// in the unified one when `controller` is empty; "" when there is none (not mounted, not
// visible from here, or the process is gone).
std::string cgroup_dir_of(pid_t pid, const std::string& controller);

// The directories this process's worker cgroups go under (sandpool-<getpid()>) that exist,
// in any hierarchy: after the last pool of the process has closed, every one is a stray.
std::vector<std::string> worker_cgroup_roots_left();

// Everything under `dir` (itself included) with the pids each cgroup still lists, one line
// per cgroup: what a stray-cgroup failure shows.
std::string describe_cgroups(const std::string& dir);

// Kills what `dir` and its sub-cgroups hold and removes them, deepest first, as well as it
// can: so one failing case does not spoil the next in the same run. Best effort.
void remove_cgroups(const std::string& dir);

// The number after `key ` in a flat-keyed cgroup file (pids.events "max 3"), or the number a
// single-valued file holds when `key` is empty (pids.current); -1 when unreadable.
long long cgroup_value(const std::string& file, const std::string& key = "");

}  // namespace sandpool::hostile
