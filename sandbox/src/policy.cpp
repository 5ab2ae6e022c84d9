#include <sandpool/sandbox/policy.hpp>

#include <algorithm>

namespace sandpool::sandbox {

std::string_view profile_name(SeccompProfile p) {
  switch (p) {
    case SeccompProfile::kStrict:
      return "strict";
    case SeccompProfile::kRelaxed:
      return "relaxed";
    case SeccompProfile::kOff:
      return "off";
  }
  return "unknown";
}

std::string_view cgroup_mode_name(CgroupMode m) {
  switch (m) {
    case CgroupMode::kOff:
      return "off";
    case CgroupMode::kAuto:
      return "auto";
    case CgroupMode::kRequired:
      return "required";
  }
  return "unknown";
}

std::optional<SeccompProfile> parse_profile(std::string_view name) {
  for (SeccompProfile p :
       {SeccompProfile::kStrict, SeccompProfile::kRelaxed, SeccompProfile::kOff}) {
    if (profile_name(p) == name) return p;
  }
  return std::nullopt;
}

std::vector<std::string> unlimited_resources(const ResourceLimits& limits) {
  std::vector<std::string> off;
  if (limits.address_space == 0) off.emplace_back("memory");
  if (limits.processes == 0) off.emplace_back("processes");
  if (limits.file_size == 0) off.emplace_back("file_size");
  if (limits.open_files == 0) off.emplace_back("open_files");
  return off;
}

bool denies_write_execute(const SandboxPolicy& policy) {
  if (policy.profile == SeccompProfile::kOff) return false;
  return policy.write_xor_execute.value_or(policy.profile == SeccompProfile::kStrict);
}

bool requires_layer(const SandboxPolicy& policy, std::string_view layer) {
  return std::find(policy.require.begin(), policy.require.end(), layer) != policy.require.end();
}

std::string describe_isolation(const SandboxPolicy& policy, NamespaceSet namespaces) {
  std::string out;
  if (!namespaces.empty()) out = "ns:" + namespaces.describe() + "+";
  return out + "rlimits+seccomp:" + std::string(profile_name(policy.profile));
}

}  // namespace sandpool::sandbox
