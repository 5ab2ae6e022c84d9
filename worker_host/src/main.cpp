// sandpool-worker: the sandboxed worker host. The manager's spawner execs it (from an fd)
// with the shared region on --channel-fd, its doorbell on --doorbell-fd and the plugin on
// --plugin-fd and --plugin-dir-fd (see <sandpool/sandbox/worker_args.hpp> for the flags
// and exit codes).
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>

#include <sandpool/sandbox/worker_args.hpp>

#include "worker_startup.hpp"

int main(int argc, char** argv) {
  // First thing: the spawner is our parent now. If it died before this line, step 1 can
  // only tell when the manager passed its pid (--parent-pid, which the pool always does).
  const pid_t parent_at_start = ::getppid();
  // exec'd from an fd (execveat), the kernel may name this process after the fd's number:
  // name it for ps, top and the manager's log.
  ::prctl(PR_SET_NAME, "sandpool-worker", 0, 0, 0);
  auto args = sandpool::sandbox::parse_worker_argv(argc, argv);
  if (!args) {
    std::fprintf(stderr,
                 "sandpool-worker: %s\n"
                 "usage: sandpool-worker --plugin NAME [--plugin-fd N] [--channel-fd N] ...\n"
                 "(started by the sandpool manager; see worker_args.hpp for every flag)\n",
                 args.status().message().c_str());
    return sandpool::sandbox::kExitUsage;
  }
  const pid_t spawner = args->parent_pid != 0 ? args->parent_pid : parent_at_start;
  sandpool::worker::run_worker(*args, spawner);
}
