// What a pool's launch plan depends on about the host, probed once by the caller so that
// plan_launch() is a pure function: whether the manager is root, what the plugin's
// permissions and the workers' user resolve to, the namespaces the clone3 spawner gives,
// the per-worker cgroup tree, and which of the view's /etc files exist.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/pool/pool_options.hpp>
#include <sandpool/sandbox/namespaces.hpp>
#include <sandpool/sandbox/privileges.hpp>

#include "supervision/worker_cgroups.hpp"

namespace sandpool::core {

// Privilege resolution (design.md step 4), probed only as root and only as far as the first
// failure, in the order resolve_privileges() checks them.
struct PrivilegeFacts {
  bool root = false;  // geteuid() == 0
  // sandbox::check_plugin_permissions on the plugin (root only).
  Status plugin_permissions;
  // `user` resolved (root, a user named, no policy.run_as given), or why it did not.
  std::optional<sandbox::RunAs> user;
  Status user_error;
  // sandbox::check_readable_by: the resolved user can read the plugin.
  Status plugin_readable;
};

struct HostFacts {
  std::int32_t manager_pid = 0;  // the workers' parent (WorkerArgs::parent_pid)
  std::string worker_path;       // the worker host, located (locate_worker)
  std::string plugin_path;       // PoolOptions::plugin_path made absolute
  PrivilegeFacts privileges;
  // The namespaces every worker gets: the clone3 spawner's (Clone3Spawner::in_effect);
  // empty when the pool has none.
  sandbox::NamespaceSet namespaces;
  // Per-worker cgroups (probed when sandbox.cgroup is not off): the tree and its version,
  // or no version and why not. The version is a field of its own so that a plan is tested
  // without a tree.
  std::optional<supervision::CgroupVersion> cgroup_version;
  std::shared_ptr<supervision::CgroupTree> cgroups;
  Status cgroups_error;
  // Which of the glibc files a mount namespace's view shows of /etc exist here.
  std::vector<std::string> etc_files;
};

// The /etc files a mount namespace's view binds when they exist (supervision/mount_plan).
inline constexpr const char* kViewEtcFiles[] = {"/etc/passwd",        "/etc/group",
                                                "/etc/nsswitch.conf", "/etc/hosts",
                                                "/etc/localtime",     "/etc/ld.so.cache"};

// Probes the privilege facts for a plugin (absolute path), a sandbox policy and a user:
// nothing unless root; stops at the first check that fails.
PrivilegeFacts probe_privileges(const std::string& plugin_path,
                                const sandbox::SandboxPolicy& policy, const std::string& user);

// Opens the system's per-worker cgroup tree into facts->cgroups, or records why it is
// unavailable in facts->cgroups_error.
void probe_cgroups(HostFacts* facts);

// The members of kViewEtcFiles that exist on this host.
std::vector<std::string> existing_view_etc_files();

}  // namespace sandpool::core
