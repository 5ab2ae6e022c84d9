// Steps 5 and 7: build the libseccomp filters from the tables (seccomp_profiles.cpp) and the
// pool's additions, and load them: the init layer before the plugin, the allow-list last.
// Also syscall_name() for the manager's reports.
#include <sandpool/sandbox/lockdown.hpp>
#include <sandpool/sandbox/worker_args.hpp>

#include <seccomp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include "seccomp_profiles.hpp"

namespace sandpool::sandbox {
namespace {

using detail::ArgMatch;
using detail::RuleAction;
using detail::SyscallRule;

// libseccomp returns negative errno values.
Status seccomp_error(int rc, std::string_view call) { return Status::from_errno(-rc, call); }

struct ContextDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using FilterContext = std::unique_ptr<void, ContextDeleter>;

// Syscalls whose pool-level allowance is expanded per signal so that SIGSYS stays guarded.
bool is_sigaction(std::string_view name) { return name == "rt_sigaction" || name == "sigaction"; }

bool allowed_by_pool(const SandboxPolicy& policy, std::string_view name) {
  return std::find(policy.allow_syscalls.begin(), policy.allow_syscalls.end(), name) !=
         policy.allow_syscalls.end();
}

// Returns the rules of `policy`: guards, the profile's allow-list, then the pool's additions,
// and last write-xor-execute's rules in place of mmap's and mprotect's when it is on.
// A pool addition replaces the built-in rules for that name (allowing statx means statx,
// not ENOSYS), except for the sigaction calls: those become one rule per signal but SIGSYS.
std::vector<SyscallRule> rules_for(const SandboxPolicy& policy) {
  std::vector<SyscallRule> rules(detail::guard_rules().begin(), detail::guard_rules().end());
  rules.insert(rules.end(), detail::strict_rules().begin(), detail::strict_rules().end());
  if (policy.profile == SeccompProfile::kRelaxed) {
    rules.insert(rules.end(), detail::relaxed_extra_rules().begin(),
                 detail::relaxed_extra_rules().end());
  }
  for (const std::string& name : policy.allow_syscalls) {
    if (is_sigaction(name)) {
      for (int sig = 1; sig < NSIG; ++sig) {
        if (sig == SIGSYS) continue;
        rules.push_back({.name = name.c_str(),
                         .match = ArgMatch::kMaskedEq,
                         .index = 0,
                         .mask = 0xffffffffu,
                         .value = static_cast<std::uint64_t>(sig)});
      }
      continue;
    }
    std::erase_if(rules, [&](const SyscallRule& r) { return name == r.name; });
    rules.push_back({.name = name.c_str()});
  }
  if (denies_write_execute(policy)) {
    // mmap and mprotect are in every profile; pkey_mprotect only when the pool allowed it
    // (otherwise it traps, PROT_EXEC or not).
    const bool pkey = allowed_by_pool(policy, "pkey_mprotect");
    std::erase_if(rules, [&](const SyscallRule& r) {
      return std::string_view(r.name) == "mmap" || std::string_view(r.name) == "mprotect" ||
             (pkey && std::string_view(r.name) == "pkey_mprotect");
    });
    for (const SyscallRule& r : detail::write_xor_execute_rules()) {
      if (pkey || std::string_view(r.name) != "pkey_mprotect") rules.push_back(r);
    }
  }
  return rules;
}

// Checks every pool-level name before anything is loaded.
Status check_allow_list(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR) {
      return Status::invalid("allow_syscalls: unknown syscall '" + name + "'");
    }
    if (nr < 0) {
      return Status::invalid("allow_syscalls: '" + name +
                             "' is not a syscall on this architecture");
    }
  }
  return Status::ok();
}

std::uint32_t action_of(RuleAction a) {
  switch (a) {
    case RuleAction::kAllow:
      return SCMP_ACT_ALLOW;
    case RuleAction::kFailEnosys:
      return SCMP_ACT_ERRNO(ENOSYS);
    case RuleAction::kFailEperm:
      return SCMP_ACT_ERRNO(EPERM);
    case RuleAction::kKillProcess:
      return SCMP_ACT_KILL_PROCESS;
  }
  return SCMP_ACT_KILL_PROCESS;
}

Status add_rule(void* ctx, const SyscallRule& rule) {
  const int nr = seccomp_syscall_resolve_name(rule.name);
  if (nr == __NR_SCMP_ERROR) {
    return Status::error(Code::kInternal,
                         std::string("seccomp table names unknown syscall '") + rule.name + "'");
  }
  // Our own tables name syscalls of several architectures (sigaction, open): a name that
  // is not a syscall here (a negative pseudo number) has nothing to filter. The pool's
  // names were checked already.
  if (nr < 0) return Status::ok();
  const std::uint32_t action = action_of(rule.action);
  const std::string call = std::string("seccomp_rule_add(") + rule.name + ")";
  int rc = 0;
  switch (rule.match) {
    case ArgMatch::kAny:
      rc = seccomp_rule_add(ctx, action, nr, 0);
      break;
    case ArgMatch::kMaskedEq:
      rc = seccomp_rule_add(ctx, action, nr, 1,
                            scmp_arg_cmp{rule.index, SCMP_CMP_MASKED_EQ, rule.mask, rule.value});
      break;
    case ArgMatch::kOwnPid:
      rc = seccomp_rule_add(ctx, action, nr, 1,
                            scmp_arg_cmp{rule.index, SCMP_CMP_MASKED_EQ, 0xffffffffu,
                                         static_cast<std::uint32_t>(::getpid())});
      break;
  }
  return rc < 0 ? seccomp_error(rc, call) : Status::ok();
}

}  // namespace

std::vector<std::string> init_layer_exemptions(const SandboxPolicy& policy) {
  std::vector<std::string> names;
  if (policy.profile == SeccompProfile::kOff) return names;
  for (const SyscallRule& rule : detail::init_layer_rules()) {
    if (allowed_by_pool(policy, rule.name)) names.emplace_back(rule.name);
  }
  if (!policy.init.network) {
    for (const SyscallRule& rule : detail::init_no_network_rules()) {
      if (allowed_by_pool(policy, rule.name)) names.emplace_back(rule.name);
    }
  }
  return names;
}

Status install_init_seccomp(const SandboxPolicy& policy) {
  if (policy.profile == SeccompProfile::kOff) return Status::ok();
  FilterContext ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return Status::error(Code::kSystem, "seccomp_init: failed");
  int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc < 0) return seccomp_error(rc, "seccomp_attr_set(SCMP_FLTATR_ACT_BADARCH)");
  // One thread now (no plugin code has run); TSYNC makes that an assertion, not a hope.
  rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_TSYNC, 1);
  if (rc < 0) return seccomp_error(rc, "seccomp_attr_set(SCMP_FLTATR_CTL_TSYNC)");
  for (const SyscallRule& rule : detail::init_layer_rules()) {
    if (allowed_by_pool(policy, rule.name)) continue;  // the pool allows it after init too
    SP_RETURN_IF_ERROR(add_rule(ctx.get(), rule));
  }
  if (!policy.init.network) {
    for (const SyscallRule& rule : detail::init_no_network_rules()) {
      if (allowed_by_pool(policy, rule.name)) continue;
      SP_RETURN_IF_ERROR(add_rule(ctx.get(), rule));
    }
  }
  rc = seccomp_load(ctx.get());
  if (rc < 0) return seccomp_error(rc, "seccomp_load(init layer)");
  return Status::ok();
}

Status install_seccomp(const SandboxPolicy& policy) {
  SP_RETURN_IF_ERROR(check_allow_list(policy.allow_syscalls));
  if (policy.profile == SeccompProfile::kOff) return Status::ok();

  FilterContext ctx(seccomp_init(SCMP_ACT_TRAP));
  if (!ctx) return Status::error(Code::kSystem, "seccomp_init: failed");
  // A syscall made through another ABI (int 0x80, x32) would bypass the table: kill.
  int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc < 0) return seccomp_error(rc, "seccomp_attr_set(SCMP_FLTATR_ACT_BADARCH)");
  // The plugin's init may have started threads; a filter on this thread alone would leave
  // them unfiltered. TSYNC is harmless when there is only one thread.
  rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_TSYNC, 1);
  if (rc < 0) return seccomp_error(rc, "seccomp_attr_set(SCMP_FLTATR_CTL_TSYNC)");

  for (const SyscallRule& rule : rules_for(policy)) SP_RETURN_IF_ERROR(add_rule(ctx.get(), rule));
  rc = seccomp_load(ctx.get());
  if (rc < 0) return seccomp_error(rc, "seccomp_load");
  return Status::ok();
}

std::string syscall_name(int nr) {
  // The resolver returns a malloc'ed copy, or NULL when the number is unknown.
  std::unique_ptr<char, decltype(&std::free)> name(
      seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr), &std::free);
  if (!name) return "syscall_" + std::to_string(nr);
  return name.get();
}

}  // namespace sandpool::sandbox
