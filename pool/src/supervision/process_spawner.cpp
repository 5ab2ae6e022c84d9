// The plain spawner: Boost.Process with posix::use_vfork, then pidfd_open. The program is
// exec'd from its open fd when the request has one, always with the request's environment.
//
// Boost 1.74 only compiles its vfork executor when _XOPEN_SOURCE is 500..699 and
// _POSIX_C_SOURCE is below 2008, which no current glibc configuration satisfies, so
// use_vfork would not link. vfork itself is there (glibc declares it under _GNU_SOURCE):
// the flag is forced on for this file alone, before any Boost header.
#ifndef BOOST_POSIX_HAS_VFORK
#define BOOST_POSIX_HAS_VFORK 1
#endif
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sandpool/base/pidfd.hpp>

#include <array>
#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/extend.hpp>
#include <boost/process/io.hpp>
#include <boost/process/posix.hpp>
#include <string>
#include <vector>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/pool/spawner.hpp>

namespace bp = boost::process;

namespace sandpool {
namespace {

// NULL-terminated pointers into `strings`, built before vfork: the child may not allocate.
std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

class ProcessSpawner final : public Spawner {
 public:
  Result<ChildProcess> spawn(const SpawnRequest& req) override {
    if (req.fds.size() > kMaxMappedFds) return Status::invalid("too many fds to map into a worker");
    if (req.into_cgroup_fd >= 0) {
      return Status::invalid("into_cgroup_fd needs the clone3 spawner (make_clone3_spawner)");
    }
    // The child side runs between vfork and exec, sharing our memory: it may only make
    // async-signal-safe calls and must not allocate, so everything it reads is built here.
    std::array<std::pair<int, int>, kMaxMappedFds> map{};
    const std::size_t n = req.fds.size();
    for (std::size_t i = 0; i < n; ++i) map[i] = req.fds[i];
    std::vector<std::string> arg_strings{req.executable};
    arg_strings.insert(arg_strings.end(), req.args.begin(), req.args.end());
    std::vector<std::string> env_strings = req.env;
    const std::vector<char*> argv = pointers(arg_strings);
    const std::vector<char*> envp = pointers(env_strings);
    const char* const path = req.executable.c_str();
    const int exec_fd = req.executable_fd;
    auto setup = [&map, n, &argv, &envp, path, exec_fd](auto& exec) {
      // Boost's vfork executor goes on to its own execve even after set_error: a failed
      // step must end the child here.
      auto fail = [&exec](const char* call) {
        exec.set_error(std::error_code(errno, std::system_category()), call);
        ::_exit(127);
      };
      // poold blocks SIGTERM/SIGINT/SIGHUP for its signalfd; the mask survives exec, and a
      // worker must stay killable by them (and see the defaults its host expects).
      sigset_t none;
      ::sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      // Move the program's fd and every source above the target range first, so that
      // binding fd 3 cannot clobber a source that happens to be fd 3 or 4.
      const int program = exec_fd >= 0 ? ::fcntl(exec_fd, F_DUPFD_CLOEXEC, 64) : -1;
      if (exec_fd >= 0 && program < 0) fail("fcntl(F_DUPFD, executable)");
      int moved[kMaxMappedFds];
      for (std::size_t i = 0; i < n; ++i) {
        moved[i] = ::fcntl(map[i].second, F_DUPFD, 64);
        if (moved[i] < 0) fail("fcntl(F_DUPFD)");
      }
      for (std::size_t i = 0; i < n; ++i) {
        if (::dup2(moved[i], map[i].first) < 0) fail("dup2");
      }
      for (std::size_t i = 0; i < n; ++i) ::close(moved[i]);
      // Boost.Process has no fexecve and passes the parent's environment: this hook, the
      // last before Boost's own execve, execs with our argv and envp and never returns.
      if (program >= 0) {
        ::syscall(SYS_execveat, program, "", argv.data(), envp.data(), AT_EMPTY_PATH);
        fail("execveat");
      }
      ::execve(path, argv.data(), envp.data());
      fail("execve");
    };
    try {
      std::error_code ec;
      bp::child child(req.executable, bp::args(req.args), bp::std_in < bp::null,
                      bp::posix::use_vfork, bp::extend::on_exec_setup = setup, ec);
      if (ec) {
        return Status::error(Code::kSystem, "spawn " + req.executable + ": " + ec.message());
      }
      const pid_t pid = child.id();
      child.detach();  // from here on the pidfd owns the child's lifetime
      auto fd = posix_call("pidfd_open", [&] { return sandpool::pidfd_open(pid); });
      if (!fd) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);  // our own child, by its pid: never waitpid(-1)
        return fd.status();
      }
      ::fcntl(*fd, F_SETFD, FD_CLOEXEC);
      return ChildProcess(pid, UniqueFd(*fd));
    } catch (const std::exception& e) {
      return Status::error(Code::kSystem, "spawn " + req.executable + ": " + e.what());
    }
  }
};

}  // namespace

std::shared_ptr<Spawner> make_process_spawner() { return std::make_shared<ProcessSpawner>(); }

}  // namespace sandpool
