// The Landlock sweep (landlock_threads.hpp): each thread the plugin's init left running is
// signalled and restricts itself in the handler, since before Linux 7.0 the kernel has no
// way to restrict another thread.
#include "landlock_threads.hpp"

#include <dirent.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <sandpool/base/posix_call.hpp>

namespace sandpool::sandbox::detail {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxThreads = 4096;  // more than any sane init leaves; more: refused
constexpr int kRounds = 8;                 // of threads started by threads during the sweep
constexpr milliseconds kSlice{50};         // how often a silent thread is checked for exit
constexpr milliseconds kSettle{250};       // for the swept threads to be asleep again

// A slot's state; negative: -errno of the thread's landlock_restrict_self.
enum SlotState : int { kPending = 0, kRestricted = 1, kGone = 2 };

// What the handler reads and writes. Set up before any signal is sent; a signal handler has
// no other way to reach its context. Lock-free atomics only.
struct Slot {
  std::atomic<pid_t> tid{0};  // as gettid() says: what the handler matches
  std::atomic<int> state{kPending};
  pid_t proc_id = 0;  // its name under /proc/self/task; the main thread's only
};
Slot g_slots[kMaxThreads];
std::atomic<std::size_t> g_used{0};
std::atomic<int> g_ruleset_fd{-1};
std::atomic<std::uint32_t> g_answers{0};  // a futex word: each answer bumps it and wakes

long futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t value, const timespec* t) {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op, value, t, nullptr, 0);
}

// Async-signal-safe: atomics, gettid, landlock_restrict_self, futex.
void on_sweep(int) {
  const int saved_errno = errno;
  const auto tid = static_cast<pid_t>(::syscall(SYS_gettid));
  const std::size_t used = g_used.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < used; ++i) {
    Slot& slot = g_slots[i];
    if (slot.tid.load(std::memory_order_relaxed) != tid) continue;
    // Once only: a second restriction would stack a second Landlock domain.
    if (slot.state.load(std::memory_order_relaxed) == kPending) {
      const long rc =
          ::syscall(SYS_landlock_restrict_self, g_ruleset_fd.load(std::memory_order_relaxed), 0u);
      slot.state.store(rc == 0 ? kRestricted : -errno, std::memory_order_release);
      g_answers.fetch_add(1, std::memory_order_release);
      futex(&g_answers, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
    }
    break;
  }
  errno = saved_errno;
}

Slot* find_slot(pid_t tid) {
  const std::size_t used = g_used.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < used; ++i) {
    if (g_slots[i].tid.load(std::memory_order_relaxed) == tid) return &g_slots[i];
  }
  return nullptr;
}

bool thread_exists(pid_t proc_id) {
  const std::string path = "/proc/self/task/" + std::to_string(proc_id);
  return ::access(path.c_str(), F_OK) == 0;
}

// Whether the thread is running or runnable ('R' in /proc/self/task/<id>/stat); false once
// it sleeps, stopped, or is gone.
bool thread_runs(pid_t proc_id) {
  const std::string path = "/proc/self/task/" + std::to_string(proc_id) + "/stat";
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return false;
  char stat[512];
  const std::size_t n = std::fread(stat, 1, sizeof stat - 1, f);
  std::fclose(f);
  stat[n] = '\0';
  const char* close_paren = std::strrchr(stat, ')');
  return close_paren != nullptr && close_paren[1] == ' ' && close_paren[2] == 'R';
}

// A signal with SA_RESTART makes the kernel restart the call it interrupted once the handler
// returns, which may be after the answer the sweep waits for: a thread of the plugin that
// was parked in read() would enter read() again after the seccomp filter went on, which
// strict refuses (a call entered before the filter is let finish). So the sweep waits, at
// most kSettle in all, until each thread it signalled sleeps again (or is gone): a thread
// that computes meanwhile only costs the wait.
void settle(milliseconds patience) {
  const Clock::time_point deadline = Clock::now() + patience;
  const std::size_t used = g_used.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < used; ++i) {
    const Slot& slot = g_slots[i];
    if (slot.state.load(std::memory_order_acquire) != kRestricted) continue;
    while (thread_runs(slot.proc_id) && Clock::now() < deadline) {
      const timespec ms{0, 1000000};
      ::nanosleep(&ms, nullptr);
    }
  }
}

// The calling thread's name under /proc/self/task (/proc/thread-self links to
// "<pid>/task/<tid>" in /proc's own pid namespace); gettid() where that link is missing.
pid_t own_proc_id() {
  char link[64];
  const ssize_t n = ::readlink("/proc/thread-self", link, sizeof link - 1);
  if (n > 0) {
    link[n] = '\0';
    if (const char* task = std::strstr(link, "/task/")) return std::atoi(task + 6);
  }
  return static_cast<pid_t>(::syscall(SYS_gettid));
}

// The id tgkill takes for the thread /proc/self/task names `proc_id`: the last NSpid field
// of its status (the innermost pid namespace, this process's); `proc_id` itself on a kernel
// without NSpid (before 4.1) or when the thread is gone.
pid_t local_tid(pid_t proc_id) {
  const std::string path = "/proc/self/task/" + std::to_string(proc_id) + "/status";
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return proc_id;
  pid_t local = proc_id;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "NSpid:", 6) != 0) continue;
    const char* at = line + 6;
    char* end = nullptr;
    for (long v = std::strtol(at, &end, 10); end != at; v = std::strtol(at, &end, 10)) {
      local = static_cast<pid_t>(v);
      at = end;
    }
    break;
  }
  std::fclose(f);
  return local;
}

std::string describe_threads(const std::vector<pid_t>& tids) {
  std::string out = tids.size() == 1 ? "thread " : "threads ";
  for (std::size_t i = 0; i < tids.size(); ++i) out += (i ? ", " : "") + std::to_string(tids[i]);
  return out;
}

// Waits until every slot in `asked` has answered or its thread is gone.
Status await_answers(const std::vector<Slot*>& asked, milliseconds patience) {
  const Clock::time_point deadline = Clock::now() + patience;
  for (;;) {
    const std::uint32_t seen = g_answers.load(std::memory_order_acquire);
    std::vector<pid_t> silent;
    for (Slot* slot : asked) {
      if (slot->state.load(std::memory_order_acquire) != kPending) continue;
      if (thread_exists(slot->proc_id)) {
        silent.push_back(slot->tid.load(std::memory_order_relaxed));
      } else {
        slot->state.store(kGone, std::memory_order_relaxed);
      }
    }
    if (silent.empty()) return Status::ok();
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      return Status::error(
          Code::kPlugin, describe_threads(silent) + " of the plugin's init did not restrict " +
                             (silent.size() == 1 ? "itself" : "themselves") + " within " +
                             std::to_string(patience.count()) + " ms (blocking signal " +
                             std::to_string(landlock_sweep_signal()) + ", or stuck in the kernel)");
    }
    const auto wait = std::min<Clock::duration>(deadline - now, kSlice);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
    const timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    futex(&g_answers, FUTEX_WAIT_PRIVATE, seen, &ts);  // woken by an answer, or the slice ends
  }
}

// Takes a slot for each thread not restricted yet: new ones, and a slot whose thread left
// (its tid may be a new thread's now). Returns them, or an error when there are too many.
Result<std::vector<Slot*>> slots_to_ask(const std::vector<ThreadId>& threads) {
  std::vector<Slot*> asked;
  for (const ThreadId& thread : threads) {
    const pid_t tid = thread.tid;
    Slot* slot = find_slot(tid);
    if (slot != nullptr) {
      const int state = slot->state.load(std::memory_order_acquire);
      if (state == kRestricted || state == kPending) continue;
      slot->proc_id = thread.proc_id;
      slot->state.store(kPending, std::memory_order_release);
    } else {
      const std::size_t used = g_used.load(std::memory_order_relaxed);
      if (used == kMaxThreads) {
        return Status::error(Code::kPlugin, "the plugin's init left more than " +
                                                std::to_string(kMaxThreads) + " threads");
      }
      slot = &g_slots[used];
      slot->proc_id = thread.proc_id;
      slot->tid.store(tid, std::memory_order_relaxed);
      slot->state.store(kPending, std::memory_order_relaxed);
      g_used.store(used + 1, std::memory_order_release);  // the handler sees the slot whole
    }
    asked.push_back(slot);
  }
  return asked;
}

Result<int> sweep(milliseconds patience) {
  const pid_t pid = ::getpid();
  const int sig = landlock_sweep_signal();
  int restricted = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::optional<std::vector<ThreadId>> threads = other_threads();
    if (!threads) {
      return Status::error(Code::kSystem, "opendir(/proc/self/task): cannot list threads");
    }
    Result<std::vector<Slot*>> asked = slots_to_ask(*threads);
    if (!asked) return asked.status();
    if (asked->empty()) return restricted;
    for (Slot* slot : *asked) {
      const pid_t tid = slot->tid.load(std::memory_order_relaxed);
      if (::syscall(SYS_tgkill, pid, tid, sig) == 0) continue;
      if (errno != ESRCH) return Status::from_errno(errno, "tgkill(" + std::to_string(tid) + ")");
      slot->state.store(kGone, std::memory_order_relaxed);
    }
    SP_RETURN_IF_ERROR(await_answers(*asked, patience));
    for (Slot* slot : *asked) {
      const int state = slot->state.load(std::memory_order_acquire);
      if (state == kRestricted) ++restricted;
      if (state < 0) {
        return Status::from_errno(-state, "landlock_restrict_self on thread " +
                                              std::to_string(slot->tid.load()) +
                                              " of the plugin's init");
      }
    }
  }
  return Status::error(Code::kPlugin, "the plugin's threads kept starting threads during " +
                                          std::to_string(kRounds) + " rounds of the sweep");
}

}  // namespace

int landlock_sweep_signal() { return SIGRTMIN + 5; }

std::optional<std::vector<ThreadId>> other_threads() {
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return std::nullopt;
  std::vector<ThreadId> threads;
  const pid_t self = own_proc_id();
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const auto proc_id = static_cast<pid_t>(std::atoi(e->d_name));
    if (proc_id != self) threads.push_back({local_tid(proc_id), proc_id});
  }
  ::closedir(dir);
  return threads;
}

Result<int> restrict_sibling_threads(int ruleset_fd, milliseconds patience) {
  for (Slot& slot : g_slots) {
    slot.tid.store(0, std::memory_order_relaxed);
    slot.state.store(kPending, std::memory_order_relaxed);
    slot.proc_id = 0;
  }
  g_used.store(0, std::memory_order_relaxed);
  g_answers.store(0, std::memory_order_relaxed);
  g_ruleset_fd.store(ruleset_fd, std::memory_order_release);
  const int sig = landlock_sweep_signal();
  struct sigaction sa {};
  struct sigaction previous {};
  sa.sa_handler = on_sweep;
  sa.sa_flags = SA_RESTART;  // the plugin's interrupted calls go on
  sigfillset(&sa.sa_mask);
  auto installed = posix_call("sigaction(" + std::to_string(sig) + ")",
                              [&] { return ::sigaction(sig, &sa, &previous); });
  if (!installed) return installed.status();
  Result<int> swept = sweep(patience);
  if (swept) settle(kSettle);
  ::sigaction(sig, &previous, nullptr);  // the plugin's own disposition, if it had one
  return swept;
}

}  // namespace sandpool::sandbox::detail
