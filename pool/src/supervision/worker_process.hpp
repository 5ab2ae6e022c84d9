// The manager's end of one live worker: the child process, its shared region, the
// doorbell it rings, the pipe its stdout/stderr go to, and its cgroup when the pool has
// them. Owns all of them; destroying it kills and reaps the worker, then kills whatever is
// left in its cgroup and removes it. Loop-thread only.
//
// start() opens the worker host and the plugin itself and hands the child their fds (the
// launch contract, <sandpool/sandbox/worker_args.hpp>): the worker needs no path, and the
// plugin file it loads is the one checked here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <sandpool/ipc/channel.hpp>
#include <sandpool/ipc/region.hpp>
#include <sandpool/ipc/wake.hpp>
#include <sandpool/pool/spawner.hpp>
#include <sandpool/sandbox/worker_args.hpp>

#include "supervision/worker_cgroups.hpp"

namespace sandpool::supervision {

struct LaunchSpec {
  std::string worker_path;
  sandbox::WorkerArgs args;  // fds are filled in by start(); the config goes in the region
  ipc::RegionConfig region;
  // Per-worker cgroups: null for none. The worker is in its cgroup before it runs plugin
  // code (CLONE_INTO_CGROUP, or the placement gate); one that cannot be placed is killed and
  // start() fails.
  std::shared_ptr<CgroupTree> cgroups;
  CgroupLimits cgroup_limits;
  std::string pool_name;  // names the worker's cgroup
};

class WorkerProcess {
 public:
  static Result<std::unique_ptr<WorkerProcess>> start(Spawner& spawner, const LaunchSpec& spec);

  pid_t pid() const { return child_.pid(); }
  ChildProcess& child() { return child_; }
  int pidfd() const { return child_.pidfd(); }
  int doorbell_fd() const { return doorbell_.fd(); }
  int output_fd() const { return output_.get(); }
  const ipc::Doorbell& doorbell() const { return doorbell_; }
  // The worker's cgroup; null when it has none.
  const WorkerCgroup* cgroup() const { return cgroup_.get(); }
  // Once the worker is reaped: kills what is left in its cgroup, waits until it has exited,
  // and removes the cgroup (WorkerCgroup::destroy). OK when there is none. On failure the
  // cgroup is left to the tree.
  Status destroy_cgroup() { return cgroup_ ? cgroup_->destroy() : Status::ok(); }

  // Worker-writable; read each field defensively.
  ipc::RegionHeader* header() const { return region_.header(); }
  ipc::MessageSender& tasks() { return tasks_; }
  ipc::MessageReceiver& results() { return results_; }
  std::uint64_t max_message() const { return region_.max_message(); }

  // Publishes queued task frames; wakes the worker if it sleeps. Returns true iff a wake
  // syscall was made.
  bool flush_tasks();
  // Releases consumed result space; wakes the worker if it waits for space.
  bool release_results();

  // Reads what the worker printed; calls on_line for each complete line (a line longer
  // than max_line is cut there). Returns false at end of file.
  bool read_output(const std::function<void(std::string_view)>& on_line,
                   std::size_t max_line = 4096);

 private:
  WorkerProcess(ipc::SharedRegion region, ipc::Doorbell doorbell, UniqueFd output,
                std::unique_ptr<WorkerCgroup> cgroup, ChildProcess child);
  ipc::SharedRegion region_;
  ipc::Doorbell doorbell_;
  UniqueFd output_;
  std::unique_ptr<WorkerCgroup> cgroup_;  // before child_: torn down after it is reaped
  ChildProcess child_;
  ipc::MessageSender tasks_;
  ipc::MessageReceiver results_;
  std::string partial_line_;
};

}  // namespace sandpool::supervision
