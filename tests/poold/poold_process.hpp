// A real poold for the service tests: a config written into a scratch dir (socket, state
// dir and metrics port 0 inside it), the process started from build/bin/poold with its
// stderr on a pipe that a thread drains, so a test waits for a log line instead of
// sleeping. Helpers to signal it, wait for its exit and connect the real Client.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <regex>
#include <sandpool/base/pidfd.hpp>
#include <string>
#include <thread>
#include <utility>
#include "wire_json.hpp"

#include "poold_test_support.hpp"

namespace sandpool::testing {

inline constexpr auto kPatience = std::chrono::seconds(60);

inline std::string poold_path() { return std::string(SANDPOOL_BIN_DIR) + "/poold"; }
inline std::string plugin_path(const std::string& name) {
  return std::string(SANDPOOL_PLUGIN_DIR) + "/lib" + name + ".so";
}

// The service section every test uses, rooted in `dir`, followed by `pools` (YAML text
// starting with "pools:").
inline std::string service_yaml(const std::filesystem::path& dir, const std::string& extra = "") {
  return "service:\n"
         "  socket: {path: " +
         (dir / "poold.sock").string() +
         ", mode: \"0666\"}\n"
         "  state_dir: " +
         (dir / "state").string() +
         "\n"
         "  metrics: {listen: 127.0.0.1:0}\n"
         "  log: {level: debug}\n" +
         extra;
}

inline std::string pool_yaml(const std::string& name, const std::string& plugin,
                             const std::string& extra = "",
                             const std::string& workers = "{min: 1, max: 4, initial: 1}") {
  return "  - name: " + name + "\n    plugin: " + plugin_path(plugin) + "\n" +
         "    workers: " + workers + "\n" + extra;
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::trunc);
  f << text;
}

class PooldProcess {
 public:
  // `env`: NAME=value entries added to (or replacing those of) this process's environment
  // for poold; "NAME" alone removes NAME.
  // `binary`: another build of poold (poold_faults, with the fault seam of its SQLite layer).
  PooldProcess(const std::filesystem::path& config, std::vector<std::string> extra_args = {},
               const std::vector<std::string>& env = {}, const std::string& binary = poold_path()) {
    std::vector<std::string> args{binary, "--config", config.string()};
    for (auto& a : extra_args) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> environment = merged_environment(env);
    std::vector<char*> envp;
    for (auto& e : environment) envp.push_back(e.data());
    envp.push_back(nullptr);
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    pid_ = ::fork();  // the child only makes async-signal-safe calls before exec
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(fds[1], 2);
      ::dup2(fds[1], 1);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    pidfd_ = sandpool::pidfd_open(pid_);
    reader_ = std::thread([this, fd = fds[0]] { drain(fd); });
  }
  ~PooldProcess() {
    if (!exit_code_) {
      ::kill(pid_, SIGKILL);
      reap();
    }
    reader_.join();
    if (pidfd_ >= 0) ::close(pidfd_);
  }
  PooldProcess(const PooldProcess&) = delete;
  PooldProcess& operator=(const PooldProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Waits until the output contains `text`; false when poold closed its output first or
  // kPatience passed.
  bool wait_for_output(const std::string& text) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kPatience, [&] {
      return output_.find(text) != std::string::npos || eof_;
    }) && output_.find(text) != std::string::npos;
  }
  bool wait_ready() { return wait_for_output("poold ready"); }
  std::string output() {
    std::lock_guard<std::mutex> lock(mu_);
    return output_;
  }
  // Waits for poold to exit and for the end of its output (kPatience each at most), so
  // output() then holds the whole log. Returns its exit code, or 128+signal; nullopt when it
  // did not exit, or its output did not end (a process it left behind holds the pipe).
  std::optional<int> wait_exit() {
    if (!reap()) return std::nullopt;
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, kPatience, [&] { return eof_; })) return std::nullopt;
    return exit_code_;
  }
  void signal(int sig) { ::kill(pid_, sig); }

  // The id of poold's thread named `name` (its comm, as pthread_setname_np set it); 0 when
  // there is none. The main thread's id is pid().
  pid_t thread_named(const std::string& name) const {
    const std::string tasks = "/proc/" + std::to_string(pid_) + "/task";
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(tasks, ec)) {
      std::ifstream comm(e.path() / "comm");
      std::string got;
      if (std::getline(comm, got) && got == name) {
        return static_cast<pid_t>(std::stol(e.path().filename().string()));
      }
    }
    return 0;
  }
  // True iff poold's thread `tid` is now in write(2) to fd 2, its log: after block_output()
  // it stays there until resume_output().
  bool writing_log(pid_t tid) const {
    const auto [nr, arg0] = syscall_of(tid);
    return nr == std::to_string(SYS_write) && arg0 == "0x2";
  }
  // True iff poold's thread `tid` is now waiting in futex(2): on a lock, such as the log's
  // while another thread holds it, writing into a full pipe.
  bool waiting_on_lock(pid_t tid) const {
    return syscall_of(tid).first == std::to_string(SYS_futex);
  }

  // Stops reading poold's output and fills its stderr pipe, so the next thread of poold
  // that logs blocks in write(2) until resume_output(). Returns once the pipe is full.
  void block_output() {
    // A description of the pipe's write end of our own, non-blocking (poold's stays blocking).
    const int w = ::open(("/proc/" + std::to_string(pid_) + "/fd/2").c_str(),
                         O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    REQUIRE(w >= 0);
    {
      std::unique_lock<std::mutex> lock(mu_);
      paused_ = true;
      const char line[] = "(the test fills this pipe)\n";
      REQUIRE(::write(w, line, sizeof line - 1) > 0);  // wakes the reader if it sleeps in read
      cv_.wait(lock, [&] { return parked_ || eof_; });
    }
    // Pages first, then byte by byte: a write no larger than PIPE_BUF fails whole when it does
    // not fit, and a log line must not find even a few bytes of room.
    const std::string page(4096, '.');
    for (std::size_t chunk : {page.size(), std::size_t{1}}) {
      while (::write(w, page.data(), chunk) > 0) {
      }
      REQUIRE(errno == EAGAIN);
    }
    ::close(w);
  }
  void resume_output() {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = false;
    cv_.notify_all();
  }

 private:
  static std::vector<std::string> merged_environment(const std::vector<std::string>& changes) {
    std::vector<std::string> out;
    auto name_of = [](const std::string& e) { return e.substr(0, e.find('=')); };
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      bool changed = false;
      for (const auto& c : changes) changed |= name_of(c) == name_of(entry);
      if (!changed) out.push_back(entry);
    }
    for (const auto& c : changes) {
      if (c.find('=') != std::string::npos) out.push_back(c);
    }
    return out;
  }

  // The system call poold's thread `tid` is in (its number) and its first argument, from
  // /proc/PID/task/TID/syscall; "running" and "" when it is in none.
  std::pair<std::string, std::string> syscall_of(pid_t tid) const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/task/" + std::to_string(tid) + "/syscall");
    std::string nr, arg0;
    f >> nr >> arg0;
    return {nr, arg0};
  }

  // Waits for poold to exit (kPatience at most) and reaps it; its exit code, or 128+signal.
  std::optional<int> reap() {
    if (exit_code_) return exit_code_;
    pollfd p{pidfd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kPatience).count())) != 1) {
      return std::nullopt;
    }
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }

  void drain(int fd) {
    char buf[4096];
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (paused_) {
          parked_ = true;
          cv_.notify_all();
          cv_.wait(lock, [&] { return !paused_; });
          parked_ = false;
        }
      }
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      std::lock_guard<std::mutex> lock(mu_);
      if (n <= 0) {
        eof_ = true;
        cv_.notify_all();
        break;
      }
      output_.append(buf, static_cast<std::size_t>(n));
      cv_.notify_all();
    }
    ::close(fd);
  }

  pid_t pid_ = -1;
  int pidfd_ = -1;
  std::optional<int> exit_code_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string output_;
  bool eof_ = false;
  bool paused_ = false;  // pause_output() asked the reader to stop
  bool parked_ = false;  // the reader stopped and reads nothing until resume_output()
  std::thread reader_;
};

// A submit request for `type` carrying `payload`, every option left to the pool.
inline SubmitRequest task(std::string type, std::string payload) {
  SubmitRequest r;
  r.type = std::move(type);
  r.payload = std::move(payload);
  return r;
}

// The metrics port poold picked for `listen: 127.0.0.1:0`, from its ready line.
inline int metrics_port(PooldProcess& poold) {
  REQUIRE(poold.wait_ready());
  std::smatch m;
  const std::string out = poold.output();
  REQUIRE(std::regex_search(out, m, std::regex(R"(poold ready .*http=127\.0\.0\.1:(\d+))")));
  return std::stoi(m[1]);
}

// A scratch dir with a config file and a running poold serving it.
struct PooldFixture {
  explicit PooldFixture(const std::string& pools_yaml, const std::string& service_extra = "") {
    config = dir.path / "poold.yaml";
    socket = (dir.path / "poold.sock").string();
    write_file(config, service_yaml(dir.path, service_extra) + pools_yaml);
    start();
  }
  void start() {
    poold.emplace(config);
    if (!poold->wait_ready()) FAIL("poold did not start:\n" << poold->output());
  }
  Client connect() {
    auto c = Client::connect(socket);
    if (!c) FAIL("connect: " << c.status().to_string());
    return std::move(c).value();
  }
  TempDir dir;
  std::filesystem::path config;
  std::string socket;
  std::optional<PooldProcess> poold;
};

}  // namespace sandpool::testing
