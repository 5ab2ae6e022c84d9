#include <sandpool/ipc/diagnostics.hpp>

#include <csignal>

namespace sandpool::ipc {

int backtrace_signal() { return SIGRTMIN + 4; }

void request_backtrace(DiagnosticArea& area) {
  area.backtrace_len.store(0, std::memory_order_relaxed);
  area.backtrace_state.store(static_cast<std::uint32_t>(BacktraceState::kRequested),
                             std::memory_order_release);
}

std::optional<std::string> take_backtrace(const DiagnosticArea& area) {
  if (area.backtrace_state.load(std::memory_order_acquire) !=
      static_cast<std::uint32_t>(BacktraceState::kDone)) {
    return std::nullopt;
  }
  // The length is read once and bounded; the bytes are copied once, then only the copy is
  // looked at (the worker may still be scribbling on the region).
  std::size_t len = area.backtrace_len.load(std::memory_order_relaxed);
  if (len > kBacktraceBytes) len = kBacktraceBytes;
  std::string text(len, '\0');
  const volatile char* src = area.backtrace;
  for (std::size_t i = 0; i < len; ++i) text[i] = src[i];
  for (char& c : text) {
    if (c != '\n' && (c < 0x20 || c > 0x7e)) c = '?';
  }
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace sandpool::ipc
