#include "supervision/seccomp_audit.hpp"

#include <fcntl.h>
#include <linux/audit.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <ctime>

#include <sandpool/base/unique_fd.hpp>

namespace sandpool::supervision {
namespace {

#if defined(__x86_64__)
constexpr std::uint32_t kNativeArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr std::uint32_t kNativeArch = AUDIT_ARCH_AARCH64;
#else
constexpr std::uint32_t kNativeArch = 0;
#endif

constexpr int kAuditSeccomp = 1326;  // AUDIT_SECCOMP

// Returns the value of " key=" in text (up to the next space), or empty.
std::string_view field(std::string_view text, std::string_view key) {
  std::string needle = " " + std::string(key) + "=";
  const std::size_t at = text.find(needle);
  if (at == std::string_view::npos) return {};
  const std::size_t from = at + needle.size();
  const std::size_t to = text.find(' ', from);
  return text.substr(from, to == std::string_view::npos ? std::string_view::npos : to - from);
}

template <typename T>
bool number(std::string_view s, T* out, int base = 10) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  return ec == std::errc() && end == s.data() + s.size();
}

std::uint64_t monotonic_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000 +
         static_cast<std::uint64_t>(ts.tv_nsec) / 1000;
}

// Reads every record the log holds now from `fd` (opened non-blocking); keeps the newest
// matching one in *found. Returns false iff the log cannot be read (errno set).
bool scan(int fd, std::int32_t pid, std::uint64_t not_before_us,
          std::optional<SeccompRecord>* found) {
  char buf[8192];  // a record is at most about 1 KiB (PRINTK_MESSAGE_MAX)
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE) continue;  // overwritten while we read: the next one follows
      return errno == EAGAIN;
    }
    if (n == 0) return true;
    // /dev/kmsg hands out one record per read (its continuation lines start with a space
    // and parse as nothing); a plain file, as the tests use, several lines at once.
    std::string_view chunk(buf, static_cast<std::size_t>(n));
    while (!chunk.empty()) {
      const std::size_t nl = chunk.find('\n');
      const std::optional<SeccompRecord> r = parse_seccomp_record(chunk.substr(0, nl));
      if (r && r->pid == pid && r->signal == SIGSYS && r->time_us >= not_before_us) *found = r;
      chunk.remove_prefix(nl == std::string_view::npos ? chunk.size() : nl + 1);
    }
  }
}

}  // namespace

std::optional<SeccompRecord> parse_seccomp_record(std::string_view line) {
  const std::size_t semi = line.find(';');
  if (semi == std::string_view::npos) return std::nullopt;
  const std::string_view prefix = line.substr(0, semi);
  std::string_view text = line.substr(semi + 1);
  if (const std::size_t nl = text.find('\n'); nl != std::string_view::npos) {
    text = text.substr(0, nl);
  }
  // "type=1326 audit(...)" follows "audit: " (printk) in the message.
  const std::size_t type_at = text.find("type=");
  int type = 0;
  if (type_at == std::string_view::npos) return std::nullopt;
  const std::string_view type_text =
      text.substr(type_at + 5, text.find(' ', type_at) - type_at - 5);
  if (!number(type_text, &type) || type != kAuditSeccomp) return std::nullopt;
  SeccompRecord r;
  // PRI,SEQ,TIME,...: the timestamp is the third field.
  const std::size_t c1 = prefix.find(',');
  const std::size_t c2 = c1 == std::string_view::npos ? c1 : prefix.find(',', c1 + 1);
  if (c2 == std::string_view::npos) return std::nullopt;
  const std::size_t c3 = prefix.find(',', c2 + 1);
  if (!number(prefix.substr(c2 + 1, c3 == std::string_view::npos ? c3 : c3 - c2 - 1), &r.time_us)) {
    return std::nullopt;
  }
  if (!number(field(text, "pid"), &r.pid) || !number(field(text, "syscall"), &r.syscall) ||
      !number(field(text, "sig"), &r.signal) || !number(field(text, "arch"), &r.arch, 16)) {
    return std::nullopt;
  }
  return r;
}

AuditLookup find_seccomp_record(std::int32_t pid, std::uint64_t not_before_us, int patience_ms,
                                const std::string& kmsg_path) {
  AuditLookup out;
  UniqueFd fd(::open(kmsg_path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    out.note = "the kernel log (" + kmsg_path + ") cannot be read: " + std::strerror(errno);
    return out;
  }
  std::optional<SeccompRecord> found;
  const std::uint64_t until = monotonic_us() + static_cast<std::uint64_t>(patience_ms) * 1000;
  for (;;) {
    if (!scan(fd.get(), pid, not_before_us, &found)) {
      out.note = "the kernel log (" + kmsg_path + ") cannot be read: " + std::strerror(errno);
      return out;
    }
    const std::uint64_t now = monotonic_us();
    if (found || now >= until) break;
    // New records make the fd readable; the wait is bounded by what is left of the patience.
    pollfd p{fd.get(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>((until - now + 999) / 1000));
  }
  if (!found) {
    out.note = "the kernel log (" + kmsg_path + ") holds no seccomp record for pid " +
               std::to_string(pid) +
               " (auditd takes the records when it runs; a trap is logged only when the "
               "filter asks)";
    return out;
  }
  if (found->arch != kNativeArch) {
    char hex[16];
    const auto [end, ec] = std::to_chars(hex, hex + sizeof hex, found->arch, 16);
    out.note = "the kernel's record names syscall " + std::to_string(found->syscall) +
               " of another architecture (audit arch 0x" + std::string(hex, end) + ")";
    return out;
  }
  out.syscall = found->syscall;
  return out;
}

}  // namespace sandpool::supervision
