// The seccomp allow-lists as data: one row per rule, by syscall name. seccomp_filter.cpp
// turns them into a libseccomp filter. Private to sp_sandbox (and its tests).
#pragma once

#include <cstdint>
#include <span>

namespace sandpool::sandbox::detail {

enum class RuleAction : std::uint8_t {
  kAllow,
  kFailEnosys,   // the call fails with ENOSYS, so libc falls back to an older call
  kFailEperm,    // the call fails with EPERM (the init layer: refused, not reported)
  kKillProcess,  // no report, no handler: the process dies of SIGSYS at once
};

enum class ArgMatch : std::uint8_t {
  kAny,       // the syscall matches whatever its arguments
  kMaskedEq,  // (arg[index] & mask) == value
  kOwnPid,    // arg[index] == this process's pid (resolved when the filter is built)
};

// Argument checks stay simple EQ / MASKED_EQ, one per rule: libseccomp 2.5.4 mis-merges
// some combinations of 64-bit comparisons. Arguments that are C ints are compared on their
// low 32 bits only (mask 0xffffffff), because the upper half of the register is not
// guaranteed to be zero.
struct SyscallRule {
  const char* name;
  RuleAction action = RuleAction::kAllow;
  ArgMatch match = ArgMatch::kAny;
  unsigned index = 0;
  std::uint64_t mask = 0;
  std::uint64_t value = 0;
};

// Rules in every filtered profile: what guards the reporter and the libc fallbacks.
std::span<const SyscallRule> guard_rules();
// The task loop and a plain single-threaded plugin.
std::span<const SyscallRule> strict_rules();
// What the relaxed profile adds to strict: read-only file access and threads.
std::span<const SyscallRule> relaxed_extra_rules();
// Write-xor-execute (SandboxPolicy::write_xor_execute): replaces the allow-list's rules for
// these calls. Each is allowed without PROT_EXEC and refused (EPERM) with it.
std::span<const SyscallRule> write_xor_execute_rules();
// The init layer (install_init_seccomp): everything is allowed but creating processes,
// exec and ptrace. Its rules are the refusals; the default action is to allow.
std::span<const SyscallRule> init_layer_rules();
// What the init layer adds unless SandboxPolicy::init.network: socket and io_uring_setup
// fail with EPERM.
std::span<const SyscallRule> init_no_network_rules();

}  // namespace sandpool::sandbox::detail
