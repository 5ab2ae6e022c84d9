#include "supervision/worker_process.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <sandpool/base/pidfd.hpp>
#include <sandpool/base/posix_call.hpp>
#include <sandpool/sandbox/privileges.hpp>

namespace sandpool::supervision {

namespace {

// The plugin as the worker gets it: the file, opened read-only, and the directory it was
// found in (O_PATH), where $ORIGIN points for the libraries beside it.
struct PluginFiles {
  UniqueFd file;
  UniqueFd dir;
};

// Opens the plugin at `path` (absolute). The directory first, then the file inside it, so
// the file is one that was in that directory. O_NONBLOCK: a FIFO planted at the path must
// not block the pool's loop in open(); anything but a regular file is refused. As root,
// the two fds are what check_plugin_permissions inspects: what is checked is what runs.
Result<PluginFiles> open_plugin(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string dir = p.parent_path().empty() ? "/" : p.parent_path().string();
  const std::string name = p.filename().string();
  PluginFiles f;
  auto d = posix_call("open(" + dir + ", O_PATH)",
                      [&] { return ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC); });
  if (!d) {
    if (d.status().sys_errno() == ENOENT) {
      return Status::error(Code::kPlugin, "plugin directory '" + dir + "' does not exist");
    }
    return d.status().with_context("plugin");
  }
  f.dir.reset(*d);
  auto fd = posix_call("open(" + path + ")", [&] {
    return ::openat(f.dir.get(), name.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  });
  if (!fd) {
    if (fd.status().sys_errno() == ENOENT) {
      return Status::error(Code::kPlugin, "plugin file '" + path + "' does not exist");
    }
    return Status::error(Code::kPlugin,
                         "plugin file '" + path + "' cannot be opened: " + fd.status().message());
  }
  f.file.reset(*fd);
  struct stat st {};
  auto stated = posix_call("fstat(" + path + ")", [&] { return ::fstat(f.file.get(), &st); });
  if (!stated) return stated.status();
  if (!S_ISREG(st.st_mode)) {
    return Status::error(Code::kPlugin, "plugin '" + path + "' is not a regular file");
  }
  if (::geteuid() == 0) {
    Status s = sandbox::check_plugin_permissions(f.file.get(), f.dir.get(), path);
    if (!s) return Status::error(Code::kPlugin, s.message());
  }
  return f;
}

// The cgroup comes first; then either the spawner starts the child inside it (v2), or the
// child waits at the gate until it has been moved there.
struct CgroupEntry {
  std::unique_ptr<WorkerCgroup> cgroup;  // null: the pool has no cgroups
  UniqueFd clone_fd;                     // CLONE_INTO_CGROUP's directory fd
  UniqueFd gate_read, gate_write;        // the placement gate (fd 5 in the worker)

  // Creates the worker's cgroup and adds to `req` and `args` how the child gets into it.
  static Result<CgroupEntry> prepare(const LaunchSpec& spec, const Spawner& spawner,
                                     SpawnRequest& req, sandbox::WorkerArgs& args) {
    CgroupEntry entry;
    if (!spec.cgroups) return entry;
    auto made = spec.cgroups->create(spec.pool_name, spec.cgroup_limits);
    if (!made) return made.status();
    entry.cgroup = std::move(made).value();
    if (spawner.places_into_cgroup() && entry.cgroup->version() == CgroupVersion::kV2) {
      auto fd = entry.cgroup->open_for_clone();
      if (!fd) return fd.status();
      entry.clone_fd = std::move(fd).value();
      req.into_cgroup_fd = entry.clone_fd.get();
      return entry;
    }
    // A socket pair rather than a pipe: send(MSG_NOSIGNAL) to a worker that died at the
    // gate is EPIPE, not a SIGPIPE for the whole manager.
    int gate[2];
    auto made_gate = posix_call("socketpair(gate)", [&] {
      return ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, gate);
    });
    if (!made_gate) return made_gate.status();
    entry.gate_read.reset(gate[0]);
    entry.gate_write.reset(gate[1]);
    args.gate_fd = 5;
    req.fds.emplace_back(5, entry.gate_read.get());
    return entry;
  }

  // Places the started child and opens its gate; nothing to do when it started inside its
  // cgroup. A worker that cannot be placed never runs plugin code: it is killed (the
  // ChildProcess's destructor) and the start fails, naming the call.
  Status open_gate(pid_t pid) {
    if (!gate_write) return Status::ok();
    gate_read.reset();
    if (Status placed = cgroup->place(pid); !placed) {
      return placed.with_context("placing worker " + std::to_string(pid) + " in its cgroup");
    }
    auto opened =
        posix_call("send(gate)", [&] { return ::send(gate_write.get(), "1", 1, MSG_NOSIGNAL); });
    return opened.status();
  }
};

// What the manager opens for a worker: the shared region (the plugin's config inside: not on
// the command line, /proc/<pid>/cmdline is world-readable, nor in the environment), the
// doorbell, the worker host (O_PATH: it is executed from its fd) and the plugin, and the pipe
// of the worker's output (read end non-blocking).
struct WorkerFiles {
  ipc::SharedRegion region;
  ipc::Doorbell doorbell;
  UniqueFd host;
  PluginFiles plugin;
  UniqueFd output_read, output_write;
};

Result<WorkerFiles> open_worker_files(const LaunchSpec& spec) {
  auto region = ipc::SharedRegion::create(spec.region, spec.args.plugin_config_json);
  if (!region) return region.status().with_context("shared region");
  auto doorbell = ipc::Doorbell::create();
  if (!doorbell) return doorbell.status().with_context("doorbell");
  auto host = posix_call("open(" + spec.worker_path + ")",
                         [&] { return ::open(spec.worker_path.c_str(), O_PATH | O_CLOEXEC); });
  if (!host) return host.status().with_context("worker host");
  UniqueFd host_fd(*host);
  auto plugin = open_plugin(spec.args.plugin_path);
  if (!plugin) return plugin.status();
  int pipefd[2];
  auto piped = posix_call("pipe2", [&] { return ::pipe2(pipefd, O_CLOEXEC); });
  if (!piped) return piped.status();
  UniqueFd read_end(pipefd[0]);
  UniqueFd write_end(pipefd[1]);
  ::fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
  return WorkerFiles{std::move(region).value(), std::move(doorbell).value(), std::move(host_fd),
                     std::move(plugin).value(), std::move(read_end),         std::move(write_end)};
}

// The worker's fds (stdout and stderr to the output pipe, 3 the region, 4 the doorbell, 6 and
// 7 the plugin's file and directory) and environment, and the worker host to execute; the
// fds' numbers go into `args` too.
SpawnRequest spawn_request(const LaunchSpec& spec, const WorkerFiles& f,
                           sandbox::WorkerArgs& args) {
  args.channel_fd = 3;
  args.doorbell_fd = 4;
  args.plugin_fd = 6;
  args.plugin_dir_fd = 7;
  SpawnRequest req;
  req.executable = spec.worker_path;
  req.executable_fd = f.host.get();
  req.env = sandbox::worker_environment(args.policy);
  req.fds = {{1, f.output_write.get()},   {2, f.output_write.get()}, {3, f.region.fd()},
             {4, f.doorbell.worker_fd()}, {6, f.plugin.file.get()},  {7, f.plugin.dir.get()}};
  return req;
}

// The worker's check that this process is still there (lock-down steps 1 and 4), which
// unlike getppid() also works from a pid namespace: `manager_pidfd` at the first free fd.
// Without pidfds (before 5.3) the worker has getppid() alone.
void pass_manager_pidfd(const UniqueFd& manager_pidfd, SpawnRequest& req,
                        sandbox::WorkerArgs& args) {
  if (!manager_pidfd) return;
  int next = 0;
  for (const auto& mapped : req.fds) next = std::max(next, mapped.first + 1);
  args.manager_pidfd = next;
  req.fds.emplace_back(next, manager_pidfd.get());
}

}  // namespace

// The manager's side of a worker's sandbox, in order (docs/security.md, "The manager's steps,
// in order"); the worker's own lock-down follows in worker_host (run_worker).
Result<std::unique_ptr<WorkerProcess>> WorkerProcess::start(Spawner& spawner,
                                                            const LaunchSpec& spec) {
  auto files = open_worker_files(spec);  // 1. what the worker is given
  if (!files) return files.status();
  sandbox::WorkerArgs args = spec.args;
  SpawnRequest req = spawn_request(spec, *files, args);  // 2. its fds
  // 3. Its cgroup, made now: the child starts inside it (clone3's CLONE_INTO_CGROUP) or
  //    waits at the gate until placed (step 6).
  auto entry = CgroupEntry::prepare(spec, spawner, req, args);
  if (!entry) return entry.status();
  const UniqueFd manager_pidfd(sandpool::pidfd_open(::getpid()));
  pass_manager_pidfd(manager_pidfd, req, args);  // 4. a way to see the manager die
  req.args = sandbox::to_argv(args);
  // 5. The child, in the pool's namespaces and mount view (NamespaceSpawner::spawn: the view
  //    planned, clone, the id maps written; then namespace_child.cpp's steps up to execve).
  auto child = spawner.spawn(req);
  if (!child) return child.status();
  files->doorbell.release_worker_end();                // the worker holds the only copy now
  SP_RETURN_IF_ERROR(entry->open_gate(child->pid()));  // 6. placed, and let through

  return std::unique_ptr<WorkerProcess>(new WorkerProcess(
      std::move(files->region), std::move(files->doorbell), std::move(files->output_read),
      std::move(entry->cgroup), std::move(child).value()));
}

WorkerProcess::WorkerProcess(ipc::SharedRegion region, ipc::Doorbell doorbell, UniqueFd output,
                             std::unique_ptr<WorkerCgroup> cgroup, ChildProcess child)
    : region_(std::move(region)),
      doorbell_(std::move(doorbell)),
      output_(std::move(output)),
      cgroup_(std::move(cgroup)),
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
