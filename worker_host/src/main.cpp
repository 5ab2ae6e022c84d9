// sandpool-worker: the sandboxed worker host. The manager's spawner execs it with the
// shared region on --channel-fd and its doorbell on --doorbell-fd (see
// <sandpool/sandbox/worker_args.hpp> for the flags and exit codes).
#include <unistd.h>

#include <cstdio>

#include <sandpool/sandbox/worker_args.hpp>

#include "worker_startup.hpp"

int main(int argc, char** argv) {
  // First thing: the spawner is our parent now. If it died before this line, step 1
  // cannot tell (the kernel gives no record of the original parent).
  const pid_t spawner = ::getppid();
  auto args = sandpool::sandbox::parse_worker_argv(argc, argv);
  if (!args) {
    std::fprintf(stderr,
                 "sandpool-worker: %s\n"
                 "usage: sandpool-worker --plugin PATH [--channel-fd N] [--doorbell-fd N] ...\n"
                 "(started by the sandpool manager; see worker_args.hpp for every flag)\n",
                 args.status().message().c_str());
    return sandpool::sandbox::kExitUsage;
  }
  sandpool::worker::run_worker(*args, spawner);
}
