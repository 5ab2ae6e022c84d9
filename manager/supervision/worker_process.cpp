#include "supervision/worker_process.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <sandpool/posix_call.hpp>

namespace sandpool::supervision {

Result<std::unique_ptr<WorkerProcess>> WorkerProcess::start(Spawner& spawner,
                                                            const LaunchSpec& spec) {
  auto region = ipc::SharedRegion::create(spec.region);
  if (!region) return region.status().with_context("shared region");
  auto doorbell = ipc::EventFd::create();
  if (!doorbell) return doorbell.status().with_context("doorbell");
  int pipefd[2];
  auto piped = posix_call("pipe2", [&] { return ::pipe2(pipefd, O_CLOEXEC); });
  if (!piped) return piped.status();
  UniqueFd read_end(pipefd[0]);
  UniqueFd write_end(pipefd[1]);
  ::fcntl(read_end.get(), F_SETFL, O_NONBLOCK);

  sandbox::WorkerArgs args = spec.args;
  args.channel_fd = 3;
  args.doorbell_fd = 4;
  SpawnRequest req;
  req.executable = spec.worker_path;
  req.args = sandbox::to_argv(args);
  req.fds = {{1, write_end.get()}, {2, write_end.get()}, {3, region->fd()}, {4, doorbell->fd()}};
  auto child = spawner.spawn(req);
  if (!child) return child.status();

  return std::unique_ptr<WorkerProcess>(
      new WorkerProcess(std::move(region).value(), std::move(doorbell).value(), std::move(read_end),
                        std::move(child).value()));
}

WorkerProcess::WorkerProcess(ipc::SharedRegion region, ipc::EventFd doorbell, UniqueFd output,
                             ChildProcess child)
    : region_(std::move(region)),
      doorbell_(std::move(doorbell)),
      output_(std::move(output)),
      child_(std::move(child)),
      tasks_(region_.task_producer()),
      results_(region_.result_consumer(), region_.max_message()) {}

bool WorkerProcess::flush_tasks() {
  if (!tasks_.publish()) return false;
  ipc::futex_wake(&header()->task_ring.data_seq);
  return true;
}

bool WorkerProcess::release_results() {
  if (!results_.release()) return false;
  ipc::futex_wake(&header()->result_ring.space_seq);
  return true;
}

bool WorkerProcess::read_output(const std::function<void(std::string_view)>& on_line,
                                std::size_t max_line) {
  char buf[4096];
  for (int rounds = 0; rounds < 16; ++rounds) {  // bounded: a chatty worker cannot starve the loop
    ssize_t n = ::read(output_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return true;  // EAGAIN: nothing more now
    if (n == 0) {
      if (!partial_line_.empty()) on_line(partial_line_);
      partial_line_.clear();
      return false;
    }
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == '\n') {
        on_line(partial_line_);
        partial_line_.clear();
      } else if (partial_line_.size() < max_line) {
        partial_line_.push_back(buf[i]);
      }
    }
  }
  return true;
}

}  // namespace sandpool::supervision
