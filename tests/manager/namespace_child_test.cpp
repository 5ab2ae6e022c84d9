// The clone3 child's own steps (namespace_child.hpp), run in a plain forked child: what it
// does when its parent is gone before it has the go-ahead.
#include <catch2/catch.hpp>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervision/namespace_child.hpp"

using namespace sandpool::supervision;

TEST_CASE("a namespaced child whose parent goes before the id maps exits instead of waiting") {
  int sync[2], error[2];
  REQUIRE(::pipe2(sync, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(error, O_CLOEXEC) == 0);
  char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
  char* const envp[] = {nullptr};
  ChildSetup setup;
  setup.sync_fd = sync[0];
  setup.sync_write_fd = sync[1];
  setup.error_fd = error[1];
  setup.wait_for_parent = true;
  setup.path = argv[0];
  setup.argv = argv;
  setup.envp = envp;
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) run_namespace_child(setup);
  // What the child sees of a parent that died before writing the maps: every parent copy of
  // the sync pipe's write end closed, and no byte.
  ::close(sync[0]);
  ::close(sync[1]);
  ::close(error[1]);
  pollfd p{error[0], POLLIN, 0};
  const bool answered = ::poll(&p, 1, 60'000) > 0;  // generous: a loaded machine
  if (!answered) ::kill(child, SIGKILL);            // still blocked in read(): the bug
  ChildFailure failure;
  const ssize_t n = answered ? ::read(error[0], &failure, sizeof failure) : 0;
  ::close(error[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(answered);
  REQUIRE(n == static_cast<ssize_t>(sizeof failure));
  CHECK(failure.step == ChildStep::kWaitParent);
  CHECK(failure.error == EPIPE);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 127);
}
