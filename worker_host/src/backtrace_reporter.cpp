#include "backtrace_reporter.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <sandpool/base/signal_handler.hpp>
#include <sandpool/ipc/diagnostics.hpp>

namespace sandpool::worker {
namespace {

constexpr int kMaxFrames = 64;
// One thread's section, on the interrupted thread's stack: 64 frames of ~60 bytes.
constexpr std::size_t kSectionBytes = 4096;

// Set before the handler is installed; a signal handler has no other way to its context.
ipc::DiagnosticArea* g_area = nullptr;
int g_doorbell_fd = -1;
// name_loaded_object's pair, in fixed buffers the handler only reads; g_named is set last.
char g_loaded_as[64];
char g_shown_as[256];
std::atomic<bool> g_named{false};

// Appends to a bounded buffer, dropping what does not fit (no snprintf: not signal-safe).
class LineWriter {
 public:
  LineWriter(char* buf, std::size_t cap) : buf_(buf), cap_(cap) {}
  void text(const char* s) {
    while (*s != '\0') put(*s++);
  }
  void hex(std::uintptr_t v) {
    text("0x");
    char digits[16];
    int n = 0;
    do {
      digits[n++] = "0123456789abcdef"[v & 15];
      v >>= 4;
    } while (v != 0);
    while (n > 0) put(digits[--n]);
  }
  void decimal(unsigned v) {
    char digits[10];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0) put(digits[--n]);
  }
  void put(char c) {
    if (len_ < cap_) buf_[len_++] = c;
  }
  std::size_t size() const { return len_; }

 private:
  char* buf_;
  std::size_t cap_;
  std::size_t len_ = 0;
};

const char* base_name(const char* path) {
  if (g_named.load(std::memory_order_acquire) && std::strcmp(path, g_loaded_as) == 0) {
    path = g_shown_as;
  }
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

void write_frame(LineWriter& out, unsigned index, void* addr) {
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  out.put('#');
  out.decimal(index);
  out.put(' ');
  Dl_info info{};
  if (::dladdr(addr, &info) != 0 && info.dli_sname != nullptr && info.dli_saddr != nullptr) {
    out.text(info.dli_sname);
    out.text("+");
    out.hex(a - reinterpret_cast<std::uintptr_t>(info.dli_saddr));
    if (info.dli_fname != nullptr) {
      out.text(" (");
      out.text(base_name(info.dli_fname));
      out.put(')');
    }
  } else if (info.dli_fname != nullptr && info.dli_fbase != nullptr) {
    out.hex(a);
    out.text(" (");
    out.text(base_name(info.dli_fname));
    out.put('+');
    out.hex(a - reinterpret_cast<std::uintptr_t>(info.dli_fbase));
    out.put(')');
  } else {
    out.hex(a);
  }
  out.put('\n');
}

const void* interrupted_pc(void* context) {
  const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  return reinterpret_cast<const void*>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return reinterpret_cast<const void*>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return nullptr;
#endif
}

// The generation this thread last answered: a thread answers each request once. Static TLS
// of the executable (local-exec), so reading it in a handler is a plain load.
thread_local std::uint32_t t_answered = 0;

void on_backtrace_request(int, siginfo_t*, void* context) {
  ipc::DiagnosticArea* area = g_area;
  if (area == nullptr) return;
  // Only an open request is answered, once per thread: a plugin raising the signal with no
  // request open, or a second signal to the same thread, changes nothing.
  const std::uint32_t generation = ipc::backtrace_generation(*area);
  if (generation == 0 || generation == t_answered) return;
  t_answered = generation;
  const int saved_errno = errno;
  char section[kSectionBytes];
  const std::size_t n = write_thread_backtrace(section, sizeof section, interrupted_pc(context));
  ipc::answer_backtrace(*area, section, n);
  const char bell = 1;  // one byte, as ipc::DoorbellRinger::ring writes
  [[maybe_unused]] ssize_t ignored = ::write(g_doorbell_fd, &bell, 1);
  errno = saved_errno;
}

}  // namespace

std::size_t write_thread_backtrace(char* out, std::size_t capacity, const void* pc) {
  void* frames[kMaxFrames];
  const int n = ::backtrace(frames, kMaxFrames);
  // Frames up to the interrupted one are this handler, the unwinder and the kernel's signal
  // trampoline. When the pc is not among them (no unwind info), everything is kept.
  int first = 0;
  if (pc != nullptr) {
    for (int i = 0; i < n; ++i) {
      if (frames[i] == pc) {
        first = i;
        break;
      }
    }
  }
  LineWriter text(out, capacity);
  const auto tid = static_cast<unsigned>(::syscall(SYS_gettid));
  text.text("thread ");
  text.decimal(tid);
  if (tid == static_cast<unsigned>(::getpid())) text.text(" (task thread)");
  text.put('\n');
  for (int i = first; i < n; ++i) write_frame(text, static_cast<unsigned>(i - first), frames[i]);
  return text.size();
}

void name_loaded_object(const char* loaded_as, const char* shown_as) {
  g_named.store(false, std::memory_order_release);
  std::snprintf(g_loaded_as, sizeof g_loaded_as, "%s", loaded_as);
  std::snprintf(g_shown_as, sizeof g_shown_as, "%s", shown_as);
  g_named.store(true, std::memory_order_release);
}

Status install_backtrace_reporter(ipc::DiagnosticArea* area, int doorbell_fd) {
  // The first backtrace() loads libgcc_s (dlopen: files, mmap, locks); do it here, outside
  // any handler and before seccomp, so the handler only ever takes the warm path.
  void* warm[2];
  if (::backtrace(warm, 2) <= 0)
    return Status::error(Code::kInternal, "backtrace() found no frames");
  g_area = area;
  g_doorbell_fd = doorbell_fd;
  return install_unblocked_handler(ipc::backtrace_signal(), on_backtrace_request, SA_RESTART,
                                   "backtrace signal");
}

}  // namespace sandpool::worker
