// The clone3 spawner (<sandpool/pool/spawner.hpp>): the parent's side. The child's side, which
// may only make raw system calls, is namespace_child.cpp.
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/pool/spawner.hpp>

#include "supervision/mount_plan.hpp"
#include "supervision/namespace_child.hpp"

namespace sandpool {
namespace {

using sandbox::Namespace;
using sandbox::NamespaceSet;
using supervision::ChildFailure;
using supervision::ChildSetup;
using supervision::MountOp;

// ASan and TSan keep per-thread state in TLS and intercept the libc calls the child makes:
// a child sharing the spawning thread's memory and TLS would corrupt that state. Their
// builds fork the child instead (clone3 without CLONE_VM), which is slower, not different.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kShareMemory = false;
#else
constexpr bool kShareMemory = true;
#endif

// clone3 without CLONE_VM: a fork that also creates the namespaces and, with CLONE_PIDFD,
// hands back a pidfd. Returns the child's pid (0 in the child), -1 with errno.
pid_t clone3_fork(std::uint64_t flags, int* pidfd, int cgroup_fd) {
  struct clone_args args;
  std::memset(&args, 0, sizeof args);
  args.flags = flags;
  if (pidfd != nullptr) {
    args.flags |= CLONE_PIDFD;
    args.pidfd = reinterpret_cast<std::uintptr_t>(pidfd);
  }
  if (cgroup_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<std::uint64_t>(cgroup_fd);
  }
  // SIGCHLD: an ordinary child as far as waitid is concerned (no __WCLONE needed).
  args.exit_signal = SIGCHLD;
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
}

// The CLONE_VM child's stack: the child shares the manager's memory until it execs (as
// posix_spawn's does), so no page table is copied and the manager takes no copy-on-write
// faults while the child builds its namespaces. Unmapped by the destructor, which runs only
// once the child has exec'd, exited or been reaped.
class ChildStack {
 public:
  static constexpr std::size_t kSize = 256 * 1024;
  ChildStack() {
    void* p = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : p;
  }
  ~ChildStack() {
    if (base_ != nullptr) ::munmap(base_, kSize);
  }
  ChildStack(const ChildStack&) = delete;
  ChildStack& operator=(const ChildStack&) = delete;
  bool ok() const { return base_ != nullptr; }
  void* top() const { return static_cast<char*>(base_) + kSize; }  // stacks grow down

 private:
  void* base_ = nullptr;
};

int namespace_child_main(void* setup) {
  supervision::run_namespace_child(*static_cast<const ChildSetup*>(setup));
}

// clone with CLONE_VM on `stack`: the child runs run_namespace_child(setup) until it execs.
// Returns the child's pid, -1 with errno. The legacy clone takes CLONE_PIDFD (the pidfd
// lands in *pidfd) but not CLONE_INTO_CGROUP: that one needs clone3_fork.
pid_t clone_vm_child(std::uint64_t flags, int* pidfd, const ChildStack& stack,
                     const ChildSetup& setup) {
  const int all = static_cast<int>(flags | CLONE_VM | CLONE_PIDFD | SIGCHLD);
  return ::clone(namespace_child_main, stack.top(), all, const_cast<ChildSetup*>(&setup), pidfd);
}

std::string clone_flags_text(NamespaceSet set) {
  std::string out;
  for (Namespace ns : sandbox::kAllNamespaces) {
    if (!set.has(ns)) continue;
    static const char* const kNames[] = {"CLONE_NEWUSER", "CLONE_NEWPID", "CLONE_NEWNET",
                                         "CLONE_NEWIPC",  "CLONE_NEWUTS", "CLONE_NEWNS"};
    out += (out.empty() ? "" : "|") + std::string(kNames[static_cast<int>(ns)]);
  }
  return out;
}

// Writes `text` to /proc/<pid>/<file> in one write(2), as the kernel requires for id maps.
// A NULL-terminated char* array over strings it owns, for execve. Neither copied nor moved:
// the pointers point into its own strings.
class ExecVector {
 public:
  explicit ExecVector(std::vector<std::string> items) : items_(std::move(items)) {
    for (std::string& item : items_) pointers_.push_back(item.data());
    pointers_.push_back(nullptr);
  }
  ExecVector(const ExecVector&) = delete;
  ExecVector& operator=(const ExecVector&) = delete;
  char* const* data() const { return pointers_.data(); }
  const char* first() const { return items_.empty() ? nullptr : items_.front().c_str(); }

 private:
  std::vector<std::string> items_;
  std::vector<char*> pointers_;
};

// The two pipes of a spawn: `sync` lets a child in a user namespace go on once its id maps
// are written; `error` carries a ChildFailure, or EOF at execve (both close-on-exec).
struct SpawnPipes {
  UniqueFd sync_read, sync_write, error_read, error_write;
  Status open() {
    int sync_pipe[2] = {-1, -1};
    int error_pipe[2] = {-1, -1};
    auto p1 = posix_call("pipe2", [&] { return ::pipe2(sync_pipe, O_CLOEXEC); });
    if (!p1) return p1.status();
    sync_read = UniqueFd(sync_pipe[0]);
    sync_write = UniqueFd(sync_pipe[1]);
    auto p2 = posix_call("pipe2", [&] { return ::pipe2(error_pipe, O_CLOEXEC); });
    if (!p2) return p2.status();
    error_read = UniqueFd(error_pipe[0]);
    error_write = UniqueFd(error_pipe[1]);
    return Status::ok();
  }
};

Status write_proc(pid_t pid, const char* file, const std::string& text) {
  const std::string path = "/proc/" + std::to_string(pid) + "/" + file;
  auto fd = posix_call("open(" + path + ")", [&] { return ::open(path.c_str(), O_WRONLY); });
  if (!fd) return fd.status();
  UniqueFd owned(*fd);
  auto n = posix_call("write(" + path + ", \"" + text.substr(0, text.find('\n')) + "...\")",
                      [&] { return ::write(owned.get(), text.data(), text.size()); });
  if (!n) return n.status();
  if (static_cast<std::size_t>(*n) != text.size()) {
    return Status::error(Code::kSystem, "write(" + path + "): short write");
  }
  return Status::ok();
}

class NamespaceSpawner final : public Clone3Spawner {
 public:
  explicit NamespaceSpawner(Clone3SpawnerOptions o) : opts_(std::move(o)) {
    log_ = opts_.logger ? opts_.logger : spdlog::default_logger();
    const NamespaceSet wanted = opts_.namespaces.wanted;
    std::string why;
    in_effect_ = probe_namespaces(wanted, &why);
    const NamespaceSet missing = wanted - in_effect_;
    if (!(opts_.namespaces.required & missing).empty()) {
      refusal_ = "sandbox.require: the kernel refuses the " +
                 (opts_.namespaces.required & missing).describe(", ") +
                 " namespace(s) for this process: " + why;
    } else if (!missing.empty()) {
      missing_warning_ = "workers start WITHOUT the " + missing.describe(", ") +
                         " namespace(s) (sandbox.namespaces asked for them): " + why;
    }
  }

  NamespaceSet in_effect() const override { return in_effect_; }

  // clone3 takes CLONE_INTO_CGROUP: on a v2 host the worker starts inside its cgroup, with
  // no placement gate.
  bool places_into_cgroup() const override { return true; }

  // Step 5 of WorkerProcess::start (docs/security.md, "The manager's steps, in order"), in
  // its own order: (a) the mount view planned, (b) everything the child reads built, (c) the
  // clone, (d) the user namespace's id maps written, (e) the child's execve awaited, (f) the
  // steps taken logged. The child's side is namespace_child.cpp's numbered steps.
  Result<ChildProcess> spawn(const SpawnRequest& req) override {
    if (!refusal_.empty()) return Status::error(Code::kSystem, refusal_);
    if (req.fds.size() > kMaxMappedFds) return Status::invalid("too many fds to map into a worker");
    if (!missing_warning_.empty()) {
      log_->warn("[{}] {}", opts_.log_name, missing_warning_);
      missing_warning_.clear();  // once per pool
    }
    if (in_effect_.has(Namespace::kMount)) {  // (a)
      SP_RETURN_IF_ERROR(plan_view(req.executable_fd >= 0 ? std::string() : req.executable));
    }

    // (b) Everything the child reads is built here: after clone3 it may not allocate.
    std::vector<std::string> program = {req.executable};
    program.insert(program.end(), req.args.begin(), req.args.end());
    const ExecVector argv(std::move(program));
    const ExecVector envp(req.env);
    const bool user_ns = in_effect_.has(Namespace::kUser);
    sandbox::UserNamespaceMaps maps;
    if (user_ns) maps = sandbox::plan_user_namespace(opts_.namespaces, ::geteuid(), ::getegid());
    SpawnPipes pipes;
    SP_RETURN_IF_ERROR(pipes.open());
    const ChildSetup setup = child_setup(req, pipes, maps, argv, envp);

    // Declared before the child: unmapped only after the child has exec'd or been reaped.
    // CLONE_INTO_CGROUP needs clone3, which here is a fork; everything else shares memory.
    const bool into_cgroup = req.into_cgroup_fd >= 0;
    const bool share_memory = kShareMemory && !into_cgroup;
    std::optional<ChildStack> stack;
    if (share_memory) {
      stack.emplace();
      if (!stack->ok()) return Status::from_errno(errno, "mmap(worker spawn stack)");
    }
    Result<ChildProcess> child = clone_child(setup, stack, req.into_cgroup_fd);  // (c)
    if (!child) return child.status();  // ChildProcess kills and reaps it if we return an error
    const pid_t pid = child->pid();
    pipes.sync_read.reset();
    pipes.error_write.reset();

    if (user_ns) SP_RETURN_IF_ERROR(map_ids(pid, maps, pipes.sync_write));  // (d)
    pipes.sync_write.reset();
    SP_RETURN_IF_ERROR(await_exec(req, setup, pipes.error_read));  // (e)
    log_steps(pid, maps, share_memory, into_cgroup);               // (f)
    return child;
  }

 private:
  // What the child reads: filled in before clone, never touched by the child but to read.
  ChildSetup child_setup(const SpawnRequest& req, const SpawnPipes& pipes,
                         const sandbox::UserNamespaceMaps& maps, const ExecVector& argv,
                         const ExecVector& envp) const {
    const bool user_ns = in_effect_.has(Namespace::kUser);
    ChildSetup setup;
    setup.sync_fd = pipes.sync_read.get();
    setup.sync_write_fd = pipes.sync_write.get();
    setup.error_fd = pipes.error_write.get();
    setup.wait_for_parent = user_ns;
    if (user_ns) {
      setup.become_uid = maps.become_uid ? static_cast<std::int64_t>(*maps.become_uid) : -1;
      setup.become_gid = maps.become_gid ? static_cast<std::int64_t>(*maps.become_gid) : -1;
      setup.drop_groups = !maps.deny_setgroups && maps.become_gid.has_value();
    }
    setup.hostname = in_effect_.has(Namespace::kUts) ? "sandpool" : nullptr;
    setup.loopback_up = in_effect_.has(Namespace::kNet);
    if (in_effect_.has(Namespace::kMount)) {
      setup.mounts = ops_.data();
      setup.mount_count = ops_.size();
      setup.bind_sources = bind_sources_.data();
    }
    setup.fds = req.fds.data();
    setup.fd_count = req.fds.size();
    setup.path = argv.first();
    setup.exec_fd = req.executable_fd;
    setup.argv = argv.data();
    setup.envp = envp.data();
    return setup;
  }

  // Starts the child in this spawner's namespaces (on `stack` when it shares our memory).
  // No handler of ours may run in the child before exec: everything is blocked around the
  // clone (the child clears the mask right before execve).
  Result<ChildProcess> clone_child(const ChildSetup& setup, const std::optional<ChildStack>& stack,
                                   int into_cgroup_fd) const {
    sigset_t all, old;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old);
    int pidfd = -1;
    const std::uint64_t flags = in_effect_.clone_flags();
    pid_t pid;
    if (stack) {
      pid = clone_vm_child(flags, &pidfd, *stack, setup);
    } else {
      pid = clone3_fork(flags, &pidfd, into_cgroup_fd);
      if (pid == 0) supervision::run_namespace_child(setup);
    }
    const int clone_errno = errno;
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (pid < 0) {
      return Status::from_errno(
          clone_errno, (stack ? "clone(CLONE_VM|" : "clone3(") + clone_flags_text(in_effect_) +
                           (into_cgroup_fd >= 0 ? "|CLONE_INTO_CGROUP" : "") + ")");
    }
    return ChildProcess(pid, UniqueFd(pidfd));
  }

  // Writes the child's id maps, then lets it go on (it waits on the sync pipe).
  static Status map_ids(pid_t pid, const sandbox::UserNamespaceMaps& maps,
                        const UniqueFd& sync_write) {
    if (maps.deny_setgroups) SP_RETURN_IF_ERROR(write_proc(pid, "setgroups", "deny"));
    SP_RETURN_IF_ERROR(write_proc(pid, "uid_map", sandbox::id_map_text(maps.uids)));
    SP_RETURN_IF_ERROR(write_proc(pid, "gid_map", sandbox::id_map_text(maps.gids)));
    auto go = posix_call("write(sync pipe)", [&] { return ::write(sync_write.get(), "g", 1); });
    return go.status();
  }

  // EOF: the child reached execve (the pipe is close-on-exec); otherwise it says why not.
  Status await_exec(const SpawnRequest& req, const ChildSetup& setup,
                    const UniqueFd& error_read) const {
    ChildFailure failure;
    auto n = posix_call("read(child status)",
                        [&] { return ::read(error_read.get(), &failure, sizeof failure); });
    if (!n) return n.status();
    if (*n == 0) return Status::ok();
    const std::string why = *n == static_cast<ssize_t>(sizeof failure)
                                ? supervision::describe_child_failure(failure, setup)
                                : "the child failed before exec";
    return Status::error(Code::kSystem, "spawn " + req.executable + " in namespaces (" +
                                            in_effect_.describe() + "): " + why);
  }

  // The mount plan depends on the worker host's path only: planned on first use. A worker
  // host exec'd from its fd (`executable` empty) needs no place in the view.
  Status plan_view(const std::string& executable) {
    if (planned_ && planned_for_ == executable) return Status::ok();
    supervision::MountViewRequest request;
    if (!executable.empty()) {
      request.required.push_back(std::filesystem::absolute(executable).parent_path().string());
    }
    request.required.insert(request.required.end(), opts_.view_paths.begin(),
                            opts_.view_paths.end());
    request.required.insert(request.required.end(), opts_.namespaces.readonly_paths.begin(),
                            opts_.namespaces.readonly_paths.end());
    request.optional = supervision::default_view_paths();
    request.tmpfs_size = opts_.namespaces.tmpfs_size;
    request.pid_namespace = in_effect_.has(Namespace::kPid);
    auto ops = supervision::plan_mount_view(request, supervision::posix_view_fs());
    if (!ops) return ops.status().with_context("mount namespace view");
    ops_ = std::move(ops).value();
    bind_sources_.clear();
    for (const MountOp& op : ops_) bind_sources_.push_back(supervision::kOldRoot + op.target);
    planned_for_ = executable;
    planned_ = true;
    return Status::ok();
  }

  // Design.md: each step logged once per worker start, at debug level.
  void log_steps(pid_t pid, const sandbox::UserNamespaceMaps& maps, bool shared,
                 bool into_cgroup) const {
    if (!log_->should_log(spdlog::level::debug)) return;
    const std::string& name = opts_.log_name;
    log_->debug("[{}] worker {}: {}({}|CLONE_PIDFD{}{})", name, pid, shared ? "clone" : "clone3",
                clone_flags_text(in_effect_), shared ? "|CLONE_VM" : "",
                into_cgroup ? "|CLONE_INTO_CGROUP" : "");
    if (in_effect_.has(Namespace::kUser)) {
      auto one_line = [](std::string s) {
        for (char& c : s) c = c == '\n' ? ';' : c;
        return s;
      };
      log_->debug("[{}] worker {}: user namespace: uid_map '{}' gid_map '{}' setgroups {}", name,
                  pid, one_line(sandbox::id_map_text(maps.uids)),
                  one_line(sandbox::id_map_text(maps.gids)),
                  maps.deny_setgroups ? "deny" : "allow");
    }
    if (in_effect_.has(Namespace::kPid)) {
      log_->debug("[{}] worker {}: pid namespace: the worker is its pid 1", name, pid);
    }
    if (in_effect_.has(Namespace::kNet)) {
      log_->debug("[{}] worker {}: net namespace: loopback only, lo up", name, pid);
    }
    if (in_effect_.has(Namespace::kIpc)) log_->debug("[{}] worker {}: ipc namespace", name, pid);
    if (in_effect_.has(Namespace::kUts)) {
      log_->debug("[{}] worker {}: uts namespace: hostname sandpool", name, pid);
    }
    if (in_effect_.has(Namespace::kMount)) {
      std::size_t binds = 0;
      for (const MountOp& op : ops_) binds += op.kind == MountOp::Kind::kBind ? 1 : 0;
      log_->debug(
          "[{}] worker {}: mount namespace: private, pivot_root into a read-only tmpfs with {} "
          "read-only binds, {}{}",
          name, pid, binds,
          in_effect_.has(Namespace::kPid) ? "fresh /proc" : "/proc with only the worker's own",
          opts_.namespaces.tmpfs_size != 0
              ? ", tmpfs /tmp of " + std::to_string(opts_.namespaces.tmpfs_size) + " bytes"
              : std::string());
    }
  }

  Clone3SpawnerOptions opts_;
  std::shared_ptr<spdlog::logger> log_;
  NamespaceSet in_effect_;
  std::string refusal_;          // non-empty: a required namespace is missing
  std::string missing_warning_;  // logged at the first spawn
  bool planned_ = false;
  std::string planned_for_;
  std::vector<MountOp> ops_;
  std::vector<std::string> bind_sources_;
};

}  // namespace

sandbox::NamespaceSet probe_namespaces(sandbox::NamespaceSet wanted, std::string* why) {
  auto try_flags = [](std::uint64_t flags) -> int {
    const pid_t pid = clone3_fork(flags, nullptr, -1);
    if (pid == 0) ::_exit(0);
    if (pid < 0) return errno;
    ::waitpid(pid, nullptr, 0);  // our own child, by its pid: never waitpid(-1)
    return 0;
  };
  NamespaceSet ok;
  std::uint64_t base = 0;
  if (wanted.has(Namespace::kUser)) {
    if (int err = try_flags(CLONE_NEWUSER); err == 0) {
      ok.add(Namespace::kUser);
      base = CLONE_NEWUSER;
    } else if (why != nullptr) {
      *why += std::string(why->empty() ? "" : "; ") +
              "user: clone3(CLONE_NEWUSER): " + std::strerror(err);
    }
  }
  for (Namespace ns : sandbox::kAllNamespaces) {
    if (ns == Namespace::kUser || !wanted.has(ns)) continue;
    if (int err = try_flags(base | sandbox::clone_flag(ns)); err == 0) {
      ok.add(ns);
    } else if (why != nullptr) {
      NamespaceSet one;
      one.add(ns);
      *why += std::string(why->empty() ? "" : "; ") + std::string(sandbox::namespace_name(ns)) +
              ": clone3(" + clone_flags_text(one) + "): " + std::strerror(err);
    }
  }
  return ok;
}

std::shared_ptr<Clone3Spawner> make_clone3_spawner(Clone3SpawnerOptions options) {
  return std::make_shared<NamespaceSpawner>(std::move(options));
}

}  // namespace sandpool
