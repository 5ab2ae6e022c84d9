// Runs a piece of test code in a forked child under a seccomp policy, so a filter never
// lands on the test process itself, and reports how the child ended.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <sandpool/sandbox/policy.hpp>

namespace sandpool::sandbox::testing {

struct ChildResult {
  int wait_status = 0;          // as from waitpid
  std::uint32_t violation = 0;  // the reporter's word: syscall number + 1, 0 when none
  std::string stderr_text;      // what the child wrote to stderr

  bool exited_with(int code) const;
  bool killed_by(int signal) const;
  std::string describe() const;  // "exit 69" / "signal 31", then the stderr text
};

// Setup failures in the child exit with these codes, so a test can tell them apart from
// the body's own result.
inline constexpr int kChildSetupFailed = 90;

// Forks; the child runs before_filter() (when given), installs the SIGSYS reporter, sets
// no_new_privs, installs `policy`'s filter and exits with body()'s return value. The parent
// waits at most 30 s (then kills the child and reports the signal).
ChildResult run_sandboxed(const SandboxPolicy& policy, const std::function<int()>& body,
                          const std::function<void()>& before_filter = {});

}  // namespace sandpool::sandbox::testing
