#include <sandpool/ipc/diagnostics.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>

namespace sandpool::ipc {

int backtrace_signal() { return SIGRTMIN + 4; }

void request_backtrace(DiagnosticArea& area) {
  // Handlers of the previous request may still be writing (a slow thread past its grace);
  // their bytes can land in the new text, which is why the reader trusts nothing in it.
  area.backtrace_expected.store(0, std::memory_order_relaxed);
  area.backtrace_answered.store(0, std::memory_order_relaxed);
  area.backtrace_used.store(0, std::memory_order_relaxed);
  std::memset(area.backtrace, 0, kBacktraceBytes);
  std::uint32_t next = area.backtrace_request.load(std::memory_order_relaxed) + 1;
  if (next == 0) next = 1;  // 0 means "never asked"
  area.backtrace_request.store(next, std::memory_order_release);
}

void expect_backtraces(DiagnosticArea& area, std::uint32_t threads) {
  area.backtrace_expected.store(threads, std::memory_order_release);
}

std::optional<std::string> take_backtrace(const DiagnosticArea& area, BacktraceRead read) {
  const std::uint32_t expected = area.backtrace_expected.load(std::memory_order_acquire);
  const std::uint32_t answered = area.backtrace_answered.load(std::memory_order_acquire);
  const bool complete = expected > 0 && answered >= expected;
  if (!complete && read == BacktraceRead::kComplete) return std::nullopt;
  // The length is read once and bounded; the bytes are copied once, then only the copy is
  // looked at (the worker may still be scribbling on the region).
  const std::size_t used = area.backtrace_used.load(std::memory_order_relaxed);
  const std::size_t len = std::min<std::size_t>(used, kBacktraceBytes);
  std::string text;
  text.reserve(len);
  const volatile char* src = area.backtrace;
  for (std::size_t i = 0; i < len; ++i) {
    const char c = src[i];
    if (c == '\0') continue;
    text.push_back(c == '\n' || (c >= 0x20 && c <= 0x7e) ? c : '?');
  }
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (text.empty()) return std::nullopt;
  if (used > kBacktraceBytes) text += "\n(truncated: the threads wrote more than fits)";
  if (!complete) {
    text += "\n(" + std::to_string(answered) + " of " + std::to_string(expected) +
            " signalled threads answered)";
  }
  return text;
}

std::uint32_t backtrace_generation(const DiagnosticArea& area) {
  return area.backtrace_request.load(std::memory_order_acquire);
}

void answer_backtrace(DiagnosticArea& area, const char* text, std::size_t len) {
  const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(len, kBacktraceBytes));
  const std::uint32_t at = area.backtrace_used.fetch_add(n, std::memory_order_relaxed);
  if (at < kBacktraceBytes) {
    const std::size_t room = kBacktraceBytes - at;
    std::memcpy(area.backtrace + at, text, std::min<std::size_t>(n, room));
  }
  area.backtrace_answered.fetch_add(1, std::memory_order_release);
}

}  // namespace sandpool::ipc
