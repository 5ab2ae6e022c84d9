// The seccomp profiles, exercised for real in forked children (sandboxed_child.hpp).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include <sandpool/sandbox/lockdown.hpp>
#include <sandpool/sandbox/worker_args.hpp>

#include "../../sandbox/src/seccomp_profiles.hpp"
#include "sandbox/sandboxed_child.hpp"

using namespace sandpool::sandbox;
using sandpool::sandbox::testing::ChildResult;
using sandpool::sandbox::testing::run_sandboxed;

namespace {

SandboxPolicy policy(SeccompProfile profile, std::vector<std::string> allow = {}) {
  SandboxPolicy p;
  p.profile = profile;
  p.allow_syscalls = std::move(allow);
  return p;
}

// True when the child was stopped by the reporter for syscall `nr`.
bool trapped(const ChildResult& r, long nr) {
  return r.exited_with(kExitViolation) && r.violation == static_cast<std::uint32_t>(nr + 1) &&
         r.stderr_text.find("forbidden syscall " + std::to_string(nr)) != std::string::npos;
}

int make_socket() { return ::socket(AF_INET, SOCK_STREAM, 0) >= 0 ? 0 : 1; }
int open_passwd() { return ::open("/etc/passwd", O_RDONLY) >= 0 ? 0 : 1; }
int do_fork() {
  pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  return 1;
}
int do_execve() {
  char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
  ::execve("/bin/true", argv, nullptr);
  return 1;
}

// A file for the read-only checks, with known contents.
struct TempFile {
  std::string path;
  TempFile() {
    char tmpl[] = "/tmp/sandbox_test_XXXXXX";
    int fd = ::mkstemp(tmpl);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, "hello", 5) == 5);
    ::close(fd);
    path = tmpl;
  }
  ~TempFile() { ::unlink(path.c_str()); }
};

void* thread_body(void* arg) {
  *static_cast<int*>(arg) = 42;
  return nullptr;
}

int run_thread() {
  pthread_t t;
  int value = 0;
  if (::pthread_create(&t, nullptr, thread_body, &value) != 0) return 2;
  if (::pthread_join(t, nullptr) != 0) return 3;
  return value == 42 ? 0 : 4;
}

// Runs `body` on a thread started before the filter, once the filter is on; the child exits
// with body's result (reached only if the thread survived). The thread waits for the go
// spinning on sched_yield, which every profile allows. The filter goes on only once the
// thread runs its own code: glibc starts a thread with every signal blocked and makes
// syscalls (set_robust_list) before unblocking them, and a trap while SIGSYS is blocked is
// a plain kill with nothing reported.
ChildResult run_on_early_thread(SeccompProfile profile, int (*body)()) {
  static std::atomic<bool> go{false};
  static std::atomic<bool> running{false};
  static std::atomic<int (*)()> task{nullptr};
  static std::atomic<int> result{-1};
  task.store(body);
  pthread_t early{};
  auto start_thread = [&] {
    ::pthread_create(
        &early, nullptr,
        [](void*) -> void* {
          running.store(true);
          while (!go.load()) ::sched_yield();
          result.store(task.load()());
          return nullptr;
        },
        nullptr);
    while (!running.load()) ::sched_yield();
  };
  return run_sandboxed(
      policy(profile),
      [&] {
        go.store(true);
        ::pthread_join(early, nullptr);
        return result.load();
      },
      start_thread);
}

}  // namespace

TEST_CASE("strict traps sockets, opening files, fork and exec, and reports the syscall") {
  struct Case {
    const char* what;
    int (*body)();
    long nr;
  };
  const Case c = GENERATE(Case{"socket", make_socket, SYS_socket},
                          Case{"open(/etc/passwd)", open_passwd, SYS_openat},
                          Case{"fork", do_fork, SYS_clone}, Case{"execve", do_execve, SYS_execve});
  INFO(c.what);
  ChildResult r = run_sandboxed(policy(SeccompProfile::kStrict), c.body);
  INFO(r.describe());
  CHECK(trapped(r, c.nr));
}

TEST_CASE("strict allows writing, mapping memory, clocks and the heap") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ChildResult r = run_sandboxed(policy(SeccompProfile::kStrict), [&] {
    void* m = ::mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 1;
    std::memset(m, 1, 1 << 20);
    if (::munmap(m, 1 << 20) != 0) return 2;
    std::string grown(10 << 20, 'x');  // malloc through mmap
    timespec ts{};
    if (::clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 3;
    return ::write(fds[1], "ok", 2) == 2 ? 0 : 4;
  });
  ::close(fds[1]);
  char buf[4] = {};
  CHECK(::read(fds[0], buf, sizeof buf) == 2);
  ::close(fds[0]);
  INFO(r.describe());
  CHECK(r.exited_with(0));
  CHECK(std::string(buf) == "ok");
}

TEST_CASE("clone3 and statx fail with ENOSYS so libc falls back to filterable calls") {
  const SeccompProfile profile = GENERATE(SeccompProfile::kStrict, SeccompProfile::kRelaxed);
  ChildResult r = run_sandboxed(policy(profile), [] {
    errno = 0;
    if (::syscall(SYS_clone3, nullptr, 0) != -1 || errno != ENOSYS) return 1;
    errno = 0;
    if (::syscall(SYS_statx, AT_FDCWD, "/", 0, 0, nullptr) != -1 || errno != ENOSYS) return 2;
    return 0;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("changing SIGSYS's disposition kills the process outright") {
  const SeccompProfile profile = GENERATE(SeccompProfile::kStrict, SeccompProfile::kRelaxed);
  ChildResult r = run_sandboxed(policy(profile), [] {
    ::signal(SIGSYS, SIG_IGN);
    return 0;
  });
  INFO(r.describe());
  CHECK(r.killed_by(SIGSYS));
  CHECK(r.violation == 0);
}

TEST_CASE("other signal handlers are trapped unless the pool allows rt_sigaction") {
  auto install_usr1 = [] {
    struct sigaction sa {};
    sa.sa_handler = [](int) {};
    return ::sigaction(SIGUSR1, &sa, nullptr) == 0 ? 0 : 1;
  };
  ChildResult trapped_r = run_sandboxed(policy(SeccompProfile::kStrict), install_usr1);
  INFO(trapped_r.describe());
  CHECK(trapped(trapped_r, SYS_rt_sigaction));

  ChildResult allowed =
      run_sandboxed(policy(SeccompProfile::kStrict, {"rt_sigaction"}), install_usr1);
  INFO(allowed.describe());
  CHECK(allowed.exited_with(0));

  // The expansion of the allowance still leaves SIGSYS guarded.
  ChildResult sigsys = run_sandboxed(policy(SeccompProfile::kStrict, {"rt_sigaction"}), [] {
    ::signal(SIGSYS, SIG_IGN);
    return 0;
  });
  INFO(sigsys.describe());
  CHECK(sigsys.killed_by(SIGSYS));
}

TEST_CASE("a process may signal itself (abort) but no other process") {
  ChildResult aborted = run_sandboxed(policy(SeccompProfile::kStrict), [] {
    std::abort();
    return 0;
  });
  INFO(aborted.describe());
  CHECK(aborted.killed_by(SIGABRT));

  const pid_t parent = ::getpid();
  ChildResult other = run_sandboxed(policy(SeccompProfile::kStrict), [parent] {
    return ::syscall(SYS_tgkill, parent, parent, 0) == 0 ? 0 : 1;
  });
  INFO(other.describe());
  CHECK(trapped(other, SYS_tgkill));
}

TEST_CASE("relaxed allows reading a file and threads") {
  TempFile file;
  ChildResult r = run_sandboxed(policy(SeccompProfile::kRelaxed), [&] {
    int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 1;
    char buf[16] = {};
    if (::read(fd, buf, sizeof buf) != 5 || std::string(buf) != "hello") return 2;
    if (::lseek(fd, 1, SEEK_SET) != 1 || ::pread(fd, buf, 2, 3) != 2) return 3;
    if (::close(fd) != 0) return 4;
    FILE* f = std::fopen(file.path.c_str(), "r");  // stdio: openat, fstat, read, close
    if (f == nullptr || std::fgetc(f) != 'h' || std::fclose(f) != 0) return 5;
    return run_thread() == 0 ? 0 : 6;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("relaxed traps writing, creating and truncating files, sockets and fork") {
  TempFile file;
  struct Case {
    const char* what;
    int flags;
    long nr;
  };
  const Case c =
      GENERATE(Case{"O_WRONLY", O_WRONLY, SYS_openat}, Case{"O_RDWR", O_RDWR, SYS_openat},
               Case{"O_RDONLY|O_CREAT", O_RDONLY | O_CREAT, SYS_openat},
               Case{"O_RDONLY|O_TRUNC", O_RDONLY | O_TRUNC, SYS_openat},
               Case{"O_TMPFILE", O_TMPFILE | O_RDWR, SYS_openat});
  INFO(c.what);
  const std::string path = c.flags & O_DIRECTORY ? "/tmp" : file.path;
  ChildResult r = run_sandboxed(policy(SeccompProfile::kRelaxed),
                                [&] { return ::open(path.c_str(), c.flags, 0600) >= 0 ? 0 : 1; });
  INFO(r.describe());
  CHECK(trapped(r, c.nr));

  ChildResult sock = run_sandboxed(policy(SeccompProfile::kRelaxed), make_socket);
  CHECK(trapped(sock, SYS_socket));
  ChildResult forked = run_sandboxed(policy(SeccompProfile::kRelaxed), do_fork);
  CHECK(trapped(forked, SYS_clone));
}

TEST_CASE("the filter also covers threads that existed before it (TSYNC)") {
  ChildResult r = run_on_early_thread(SeccompProfile::kStrict, make_socket);
  INFO(r.describe());
  CHECK(trapped(r, SYS_socket));
}

TEST_CASE("strict lets a thread still starting at TSYNC register its robust list and rseq") {
  // glibc's start_thread calls set_robust_list (and rseq) before the thread's own code: a
  // thread the plugin's init created may be that far behind when the filter arrives. This
  // thread makes the call only after the filter, as such a late starter would.
  ChildResult r = run_on_early_thread(SeccompProfile::kStrict, [] {
    // A wrong size: EINVAL from the kernel, which proves the filter let it through.
    return ::syscall(SYS_set_robust_list, nullptr, 0) == -1 && errno == EINVAL ? 0 : 1;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("strict does not allow threads") {
  ChildResult r = run_sandboxed(policy(SeccompProfile::kStrict), run_thread);
  INFO(r.describe());
  // glibc's first pthread_create installs its SIGSETXID handler before it clones.
  CHECK((trapped(r, SYS_rt_sigaction) || trapped(r, SYS_clone)));
}

TEST_CASE("a pool's allow_syscalls add to the profile") {
  ChildResult r = run_sandboxed(policy(SeccompProfile::kStrict, {"socket"}), make_socket);
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("an unknown name in allow_syscalls is refused before anything is loaded") {
  ChildResult r = run_sandboxed(policy(SeccompProfile::kOff), [] {
    sandpool::Status s =
        install_seccomp(policy(SeccompProfile::kStrict, {"write", "no_such_call"}));
    if (s.code() != sandpool::Code::kInvalidArgument) return 1;
    if (s.message().find("'no_such_call'") == std::string::npos) return 2;
    return make_socket() == 0 ? 0 : 3;  // no filter was loaded
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("the off profile installs no filter") {
  ChildResult r = run_sandboxed(policy(SeccompProfile::kOff),
                                [] { return make_socket() == 0 && open_passwd() == 0 ? 0 : 1; });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("every name in the built-in allow-lists is a syscall libseccomp knows") {
  using namespace sandpool::sandbox::detail;
  for (auto table : {guard_rules(), strict_rules(), relaxed_extra_rules(), init_layer_rules(),
                     init_no_network_rules(), write_xor_execute_rules()}) {
    for (const SyscallRule& rule : table) {
      INFO(rule.name);
      CHECK(seccomp_syscall_resolve_name(rule.name) != __NR_SCMP_ERROR);
    }
  }
}

TEST_CASE("syscall_name names syscalls of this architecture") {
  CHECK(syscall_name(SYS_read) == "read");
  CHECK(syscall_name(SYS_openat) == "openat");
  CHECK(syscall_name(SYS_socket) == "socket");
  CHECK(syscall_name(99999) == "syscall_99999");
}

// Write-xor-execute: on by default under strict, off under relaxed, a key either way.
namespace {

// 0 when every way to executable memory fails with EPERM and plain mappings still work.
int executable_memory_refused() {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* rwx =
      ::mmap(nullptr, page, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (rwx != MAP_FAILED || errno != EPERM) return 1;
  void* rx = ::mmap(nullptr, page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (rx != MAP_FAILED || errno != EPERM) return 2;
  void* rw = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (rw == MAP_FAILED) return 3;
  if (::mprotect(rw, page, PROT_READ | PROT_EXEC) == 0 || errno != EPERM) return 4;
  if (::mprotect(rw, page, PROT_READ) != 0) return 5;  // without PROT_EXEC: allowed
  return ::munmap(rw, page) == 0 ? 0 : 6;
}

// 0 when an anonymous read-write-execute mapping can be had.
int executable_memory_allowed() {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* rwx =
      ::mmap(nullptr, page, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return rwx == MAP_FAILED ? 1 : 0;
}

}  // namespace

TEST_CASE("write-xor-execute refuses PROT_EXEC with EPERM: strict's default, relaxed's by key") {
  struct Case {
    const char* what;
    SeccompProfile profile;
    std::optional<bool> wx;
    int (*body)();
  };
  const Case c =
      GENERATE(Case{"strict", SeccompProfile::kStrict, std::nullopt, executable_memory_refused},
               Case{"strict, wx off", SeccompProfile::kStrict, false, executable_memory_allowed},
               Case{"relaxed", SeccompProfile::kRelaxed, std::nullopt, executable_memory_allowed},
               Case{"relaxed, wx on", SeccompProfile::kRelaxed, true, executable_memory_refused});
  INFO(c.what);
  SandboxPolicy p = policy(c.profile);
  p.write_xor_execute = c.wx;
  CHECK(denies_write_execute(p) == (c.body == executable_memory_refused));
  ChildResult r = run_sandboxed(p, c.body);
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("pkey_mprotect allowed by a pool still cannot add PROT_EXEC under write-xor-execute") {
  SandboxPolicy p = policy(SeccompProfile::kStrict, {"pkey_mprotect"});
  ChildResult r = run_sandboxed(p, [] {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    void* rw = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (rw == MAP_FAILED) return 1;
    if (::syscall(SYS_pkey_mprotect, rw, page, PROT_READ | PROT_EXEC, -1) == 0 || errno != EPERM) {
      return 2;
    }
    return ::syscall(SYS_pkey_mprotect, rw, page, PROT_READ, -1) == 0 ? 0 : 3;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("the write-xor-execute check names a writable and executable mapping") {
  CHECK(check_no_writable_executable_mapping().is_ok());
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* rwx =
      ::mmap(nullptr, page, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(rwx != MAP_FAILED);
  const sandpool::Status s = check_no_writable_executable_mapping();
  ::munmap(rwx, page);
  CHECK(s.code() == sandpool::Code::kPlugin);
  CHECK(s.message().find("rwxp anonymous") != std::string::npos);
}
