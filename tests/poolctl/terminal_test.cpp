// On a terminal (a pseudo-terminal here) top redraws in place with ANSI escapes and batch
// draws a progress bar; the other tests check that neither happens off a terminal.
#include <fcntl.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>

#include "poolctl_runner.hpp"
#include "scripted_service.hpp"

using namespace sandpool::testing;

namespace {

struct TerminalRun {
  int exit_code = -1;
  std::string screen;  // everything poolctl wrote to the terminal
};

// Runs poolctl with stdout and stderr on a new pseudo-terminal and reads it to the end.
TerminalRun run_on_terminal(std::vector<std::string> args) {
  int master = -1, slave = -1;
  REQUIRE(::openpty(&master, &slave, nullptr, nullptr, nullptr) == 0);
  args.insert(args.begin(), kPoolctl);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(slave, STDOUT_FILENO);
    ::dup2(slave, STDERR_FILENO);
    ::close(master);
    ::close(slave);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(slave);
  TerminalRun r;
  char buf[4096];
  for (;;) {  // EIO once the child closed its side of the terminal
    const ssize_t n = ::read(master, buf, sizeof buf);
    if (n > 0) {
      r.screen.append(buf, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  ::close(master);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("top on a terminal redraws each snapshot in place") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = run_on_terminal({"--socket", service.socket(), "top", "-n", "3", "-d", "10ms"});
  CHECK(r.exit_code == 0);
  CHECK(count(r.screen, "\x1b[H\x1b[2J") == 3);
  CHECK(count(r.screen, "poolctl top") == 3);
}

TEST_CASE("batch on a terminal draws a progress bar before its summary") {
  TempDir dir;
  ScriptedService service(dir.path());
  auto r = run_on_terminal({"--socket", service.socket(), "batch", "noop", "4000"});
  CHECK(r.exit_code == 0);
  const auto bar = r.screen.find("\r[########################################] 4000/4000");
  REQUIRE(bar != std::string::npos);
  CHECK(r.screen.find("4000 of 4000 tasks accepted") > bar);
}
