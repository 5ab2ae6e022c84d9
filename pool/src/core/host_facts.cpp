#include "core/host_facts.hpp"

#include <unistd.h>

#include <filesystem>

namespace sandpool::core {

PrivilegeFacts probe_privileges(const std::string& plugin_path,
                                const sandbox::SandboxPolicy& policy, const std::string& user) {
  PrivilegeFacts f;
  f.root = ::geteuid() == 0;
  if (!f.root) return f;
  f.plugin_permissions = sandbox::check_plugin_permissions(plugin_path);
  if (!f.plugin_permissions || policy.run_as || user.empty()) return f;
  Result<sandbox::RunAs> who = sandbox::resolve_run_as(user);
  if (!who) {
    f.user_error = who.status();
    return f;
  }
  f.plugin_readable = sandbox::check_readable_by(plugin_path, *who, user);
  f.user = std::move(who).value();
  return f;
}

void probe_cgroups(HostFacts* facts) {
  auto tree = supervision::CgroupTree::system();
  if (tree) {
    facts->cgroups = std::move(tree).value();
    facts->cgroup_version = facts->cgroups->version();
  } else {
    facts->cgroups_error = tree.status();
  }
}

std::vector<std::string> existing_view_etc_files() {
  std::vector<std::string> out;
  for (const char* f : kViewEtcFiles) {
    std::error_code ec;
    if (std::filesystem::exists(f, ec)) out.emplace_back(f);
  }
  return out;
}

}  // namespace sandpool::core
