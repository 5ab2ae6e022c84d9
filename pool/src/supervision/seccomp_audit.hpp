// The kernel's own record of a seccomp kill (issue 41): when the filter kills a worker
// (SECCOMP_RET_KILL_PROCESS: a change to SIGSYS's handling, a call of another
// architecture), the kernel logs an audit record, type 1326, naming the pid, the signal,
// the architecture and the syscall number. Without auditd it reaches the kernel log
// (/dev/kmsg), which root (or CAP_SYSLOG) may read; with auditd it goes to auditd's log
// instead, and a trap on a thread that blocked SIGSYS is logged only when the filter asks
// (SECCOMP_FILTER_FLAG_LOG). So the record names the call when it is there, and the
// caller says why the name is unknown when it is not.
//
// Not thread-safe state: none; each lookup opens its own fd.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandpool::supervision {

struct SeccompRecord {
  std::int32_t pid = 0;
  int syscall = -1;
  std::uint32_t arch = 0;  // AUDIT_ARCH_*
  int signal = 0;
  std::uint64_t time_us = 0;  // the kernel log's timestamp (monotonic, microseconds)
};

// Returns the record iff `line` is one /dev/kmsg record ("PRI,SEQ,TIME,FLAGS;MESSAGE") of a
// seccomp audit event (type=1326) with pid, sig, arch and syscall fields.
std::optional<SeccompRecord> parse_seccomp_record(std::string_view line);

struct AuditLookup {
  std::optional<int> syscall;  // the native-architecture syscall the record names
  std::string note;            // why there is none (or which architecture it was)
};

// Looks through the kernel log at `kmsg_path` for the newest seccomp record of `pid` with
// signal SIGSYS not older than `not_before_us` (CLOCK_MONOTONIC microseconds: the worker's
// start, so a record of an earlier process with the same pid is not taken). The kernel
// writes the record from its audit thread, shortly after the kill: waits for it up to
// `patience_ms` (polling the log, no sleep). Never fails: what went wrong is in `note`.
AuditLookup find_seccomp_record(std::int32_t pid, std::uint64_t not_before_us, int patience_ms = 50,
                                const std::string& kmsg_path = "/dev/kmsg");

}  // namespace sandpool::supervision
