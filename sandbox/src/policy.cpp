#include <sandpool/sandbox/policy.hpp>

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

std::optional<SeccompProfile> parse_profile(std::string_view name) {
  for (SeccompProfile p :
       {SeccompProfile::kStrict, SeccompProfile::kRelaxed, SeccompProfile::kOff}) {
    if (profile_name(p) == name) return p;
  }
  return std::nullopt;
}

std::string describe_isolation(const SandboxPolicy& policy, NamespaceSet namespaces) {
  std::string out;
  if (!namespaces.empty()) out = "ns:" + namespaces.describe() + "+";
  return out + "rlimits+seccomp:" + std::string(profile_name(policy.profile));
}

}  // namespace sandpool::sandbox
