// Landlock: the access rights requested per ABI (pure), and restrict_filesystem for real in
// forked children (sandboxed_child.hpp runs no seccomp filter for the `off` profile). The
// real-kernel cases skip (ctest's SKIP_RETURN_CODE) only when the kernel itself answers that it
// has no Landlock (host_probe.hpp), and require sandpool's probe to see the same ABI.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include <sandpool/sandbox/lockdown.hpp>

#include "../../sandbox/src/landlock_access.hpp"
#include "../../sandbox/src/landlock_threads.hpp"
#include "host_probe.hpp"
#include "public_dir.hpp"
#include "sandbox/sandboxed_child.hpp"

using namespace sandpool::sandbox;
using namespace sandpool::sandbox::detail;
using sandpool::sandbox::testing::ChildResult;
using sandpool::sandbox::testing::run_sandboxed;
using sandpool::testing::PublicDir;

TEST_CASE("each Landlock ABI handles exactly the rights it defines") {
  struct Case {
    int kernel_abi;
    int used_abi;
    std::uint64_t handled_fs;
    std::uint64_t scoped;
    std::size_t attr_size;
  };
  constexpr std::uint64_t kAbi1 = 0x1fff;  // EXECUTE .. MAKE_SYM
  const Case c = GENERATE(
      Case{1, 1, kAbi1, 0, 8},  // Linux 5.13
      Case{2, 2, kAbi1 | kFsRefer, 0, 8}, Case{3, 3, kAbi1 | kFsRefer | kFsTruncate, 0, 8},
      Case{4, 4, kAbi1 | kFsRefer | kFsTruncate, 0, 16},  // + net, unused
      Case{5, 5, kAbi1 | kFsRefer | kFsTruncate | kFsIoctlDev, 0, 16},
      Case{6, 6, 0xffff, kScopeAbstractUnixSocket | kScopeSignal, 24}, Case{7, 7, 0xffff, 3, 24},
      Case{12, 7, 0xffff, 3, 24});  // a newer kernel, used at ABI 7
  INFO("kernel ABI " << c.kernel_abi);
  const LandlockAccess a = landlock_access_for_abi(c.kernel_abi);
  CHECK(a.abi == c.used_abi);
  CHECK(a.handled_fs == c.handled_fs);
  CHECK(a.scoped == c.scoped);
  CHECK(a.ruleset_attr_size == c.attr_size);
  // Read-only: files may be read, directories read and listed; nothing else.
  CHECK(a.read_file == kFsReadFile);
  CHECK(a.read_dir == (kFsReadFile | kFsReadDir));
  CHECK((a.read_dir & ~a.handled_fs) == 0);
}

TEST_CASE("without Landlock in the kernel no right is requested") {
  const LandlockAccess a = landlock_access_for_abi(0);
  CHECK(a.abi == 0);
  CHECK(a.handled_fs == 0);
}

TEST_CASE("restrict_filesystem leaves the listed paths readable and nothing else") {
  sandpool::testing::require_landlock();
  const LandlockProbe probe = probe_landlock();
  INFO(probe.unavailable);
  REQUIRE(probe.abi == sandpool::testing::landlock_abi());
  PublicDir allowed, other;
  const std::string inside = allowed.write("in.txt", "inside");
  const std::string single = other.write("single.txt", "a file allowed on its own");
  const std::string outside = other.write("out.txt", "outside");
  SandboxPolicy off;
  off.profile = SeccompProfile::kOff;
  ChildResult r = run_sandboxed(off, [&] {
    auto restricted = restrict_filesystem({allowed.path(), single}, false);
    if (!restricted.is_ok() || restricted->abi < 1) return 10;
    if (::open(inside.c_str(), O_RDONLY) < 0) return 1;
    if (::open(single.c_str(), O_RDONLY) < 0) return 2;
    if (::open(outside.c_str(), O_RDONLY) >= 0 || errno != EACCES) return 3;
    if (::open(inside.c_str(), O_WRONLY) >= 0 || errno != EACCES) return 4;
    if (::open((allowed.path() + "/new").c_str(), O_WRONLY | O_CREAT, 0600) >= 0) return 5;
    if (::unlink(inside.c_str()) == 0 || errno != EACCES) return 6;
    if (::open(allowed.path().c_str(), O_RDONLY | O_DIRECTORY) < 0) return 7;  // listing
    return 0;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("a path to allow that does not exist fails, naming it") {
  sandpool::testing::require_landlock();
  REQUIRE(probe_landlock().abi == sandpool::testing::landlock_abi());
  SandboxPolicy off;
  off.profile = SeccompProfile::kOff;
  ChildResult r = run_sandboxed(off, [] {
    auto restricted = restrict_filesystem({"/nonexistent/x"}, false);
    return !restricted.is_ok() && restricted.status().message() ==
                                      "open(/nonexistent/x, O_PATH): No such file or directory"
               ? 0
               : 1;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("a kernel without Landlock is reported, and fatal only when required") {
  // The child makes landlock_create_ruleset answer ENOSYS, as a kernel before 5.13 does.
  SandboxPolicy off;
  off.profile = SeccompProfile::kOff;
  const bool required = GENERATE(false, true);
  ChildResult r = run_sandboxed(off, [required] {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == nullptr ||
        seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(landlock_create_ruleset), 0) != 0 ||
        seccomp_load(ctx) != 0) {
      return 20;
    }
    seccomp_release(ctx);
    if (probe_landlock().abi != 0) return 1;
    auto restricted = restrict_filesystem({"/"}, required);
    if (required) {
      return restricted.status().code() == sandpool::Code::kUnavailable &&
                     restricted.status().message().starts_with(
                         "Landlock is required (sandbox.require) but unavailable: the kernel "
                         "has no Landlock")
                 ? 0
                 : 2;
    }
    return restricted.is_ok() && restricted->abi == 0 &&
                   restricted->unavailable.find("ENOSYS") != std::string::npos
               ? 0
               : 3;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

namespace {

SandboxPolicy no_filter() {
  SandboxPolicy off;
  off.profile = SeccompProfile::kOff;
  return off;
}

bool kernel_restricts_every_thread() {
  return sandpool::testing::landlock_abi() >= kLandlockTsyncAbi;  // the kernel's, probed directly
}

// A thread standing in for one the plugin's init started: it waits for an order, then tries
// to open `path` and reports errno (0: opened). With `deaf`, it blocks every signal first.
class WaitingThread {
 public:
  explicit WaitingThread(bool deaf = false)
      : thread_([this, deaf] {
          if (deaf) {
            sigset_t all;
            sigfillset(&all);
            ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
          }
          started_ = true;
          started_.notify_all();
          go_.wait(false);
          const int fd = ::open(path_.c_str(), O_RDONLY);
          result_ = fd >= 0 ? 0 : errno;
          done_ = true;
          done_.notify_all();
        }) {
    started_.wait(false);
  }
  ~WaitingThread() { thread_.detach(); }  // the forked child exits with it
  // Returns 0 if the thread opened `path`, else its errno.
  int try_open(const std::string& path) {
    path_ = path;
    go_ = true;
    go_.notify_all();
    done_.wait(false);
    return result_;
  }

 private:
  std::atomic<bool> started_{false}, go_{false}, done_{false};
  std::string path_;
  int result_ = -1;
  std::thread thread_;
};

}  // namespace

TEST_CASE("a thread started before restrict_filesystem is restricted with the caller") {
  sandpool::testing::require_landlock();
  PublicDir allowed, other;
  const std::string outside = other.write("out.txt", "outside");
  ChildResult r = run_sandboxed(no_filter(), [&] {
    WaitingThread thread;
    auto restricted = restrict_filesystem({allowed.path()}, false);
    if (!restricted.is_ok()) {
      std::fprintf(stderr, "%s\n", restricted.status().to_string().c_str());
      return 10;
    }
    if (restricted->other_threads != 1) return 1;
    if (restricted->kernel_tsync != kernel_restricts_every_thread()) return 2;
    return thread.try_open(outside) == EACCES ? 0 : 3;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("a thread that blocks the sweep's signal is refused, by its id") {
  sandpool::testing::require_landlock();
  PublicDir allowed;
  ChildResult r = run_sandboxed(no_filter(), [&] {
    WaitingThread deaf(true);
    auto restricted = restrict_filesystem({allowed.path()}, false);
    if (kernel_restricts_every_thread()) return restricted.is_ok() ? 0 : 1;  // no signal then
    if (restricted.is_ok() || restricted.status().code() != sandpool::Code::kPlugin) return 2;
    std::fprintf(stderr, "%s\n", restricted.status().message().c_str());
    const std::string& why = restricted.status().message();
    return why.find("did not restrict itself within 2000 ms (blocking signal " +
                    std::to_string(landlock_sweep_signal())) != std::string::npos
               ? 0
               : 3;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("with Landlock required, a thread init left is refused unless the kernel syncs") {
  sandpool::testing::require_landlock();
  PublicDir allowed, other;
  const std::string outside = other.write("out.txt", "outside");
  ChildResult r = run_sandboxed(no_filter(), [&] {
    WaitingThread thread;
    auto restricted = restrict_filesystem({allowed.path()}, true);
    if (kernel_restricts_every_thread()) {
      return restricted.is_ok() && thread.try_open(outside) == EACCES ? 0 : 1;
    }
    if (restricted.is_ok() || restricted.status().code() != sandpool::Code::kPlugin) return 2;
    return restricted.status().message().find("1 thread(s) started by the plugin's init") == 0 ? 0
                                                                                               : 3;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

namespace {

// A thread standing in for one the plugin's init parked in read() on a pipe: it enters read()
// before the sweep and the seccomp filter, and returns what it read once the body writes.
class ParkedReader {
 public:
  ParkedReader() {
    if (::pipe2(fds_, O_CLOEXEC) != 0) std::_Exit(kChildSetupFailedHere);
    thread_ = std::thread([this] {
      tid_ = static_cast<pid_t>(::syscall(SYS_gettid));
      char c = 0;
      const ssize_t n = ::read(fds_[0], &c, 1);
      got_ = n == 1 ? c : -1;
      done_ = true;
      done_.notify_all();
    });
    // Parked once /proc says it sleeps: after its tid it makes no call but read().
    while (tid_ == 0 || !sleeping()) ::usleep(1000);
  }
  ~ParkedReader() { thread_.detach(); }  // the forked child exits with it
  int wake_and_read() {
    const char c = 'x';
    if (::write(fds_[1], &c, 1) != 1) return -2;
    done_.wait(false);
    return got_;
  }

 private:
  static constexpr int kChildSetupFailedHere = 91;
  bool sleeping() const {
    char path[64], stat[512];
    std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", static_cast<int>(tid_.load()));
    std::FILE* f = std::fopen(path, "re");
    if (f == nullptr) return false;
    const std::size_t n = std::fread(stat, 1, sizeof stat - 1, f);
    std::fclose(f);
    stat[n] = '\0';
    const char* paren = std::strrchr(stat, ')');
    return paren != nullptr && paren[1] == ' ' && paren[2] == 'S';
  }

  int fds_[2] = {-1, -1};
  std::atomic<pid_t> tid_{0};
  std::atomic<bool> done_{false};
  int got_ = -1;
  std::thread thread_;
};

}  // namespace

TEST_CASE("a thread the sweep interrupts in read() enters it again before the strict filter") {
  sandpool::testing::require_landlock();
  // A kernel that restricts every thread itself (kernel_restricts_every_thread()) sends no
  // signal, so nothing interrupts the read(): it must come back with the byte all the same.
  PublicDir allowed;
  SandboxPolicy strict;
  strict.profile = SeccompProfile::kStrict;
  // On one CPU the sweep's caller, woken by the thread's answer, tends to run before the
  // thread has left the handler: without the wait for it to sleep again, its restarted read()
  // met the filter in about one round of 50 here.
  for (int round = 0; round < 100; ++round) {
    INFO("round " << round);
    std::unique_ptr<ParkedReader> reader;
    ChildResult r = run_sandboxed(
        strict, [&] { return reader->wake_and_read() == 'x' ? 0 : 1; },
        [&] {
          cpu_set_t one;
          CPU_ZERO(&one);
          CPU_SET(0, &one);
          (void)::sched_setaffinity(0, sizeof one, &one);
          reader = std::make_unique<ParkedReader>();
          auto restricted = restrict_filesystem({allowed.path()}, false);
          if (!restricted.is_ok() || restricted->other_threads != 1) std::_Exit(92);
        });
    INFO(r.describe());
    REQUIRE(r.exited_with(0));
  }
}
