#include "worker_startup.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/ipc/layout.hpp>
#include <sandpool/ipc/messages.hpp>
#include <sandpool/sandbox/lockdown.hpp>
#include <sandpool/sandbox/privileges.hpp>

#include "backtrace_reporter.hpp"
#include "host_api.hpp"
#include "init_deadline.hpp"
#include "memory_reporter.hpp"
#include "plugin_loader.hpp"
#include "task_loop.hpp"
#include "worker_channel.hpp"

namespace sandpool::worker {
namespace {

// What a ResultMsg adds around its data (id, status, two length prefixes): the result
// must fit in one message together with it.
constexpr std::uint64_t kResultEnvelope = 1024;

[[noreturn]] void leave(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);
}

// Tells the manager why startup went wrong: stderr always (its pipe reaches the manager's
// log), the channel as a LogMsg once it is attached.
class StartupReport {
 public:
  void attach(WorkerChannel* channel) { channel_ = channel; }

  void say(int level, const std::string& text) const {
    std::fprintf(stderr, "sandpool-worker: %s\n", text.c_str());
    if (channel_ == nullptr) return;
    ipc::LogMsg msg;
    msg.level = static_cast<std::uint8_t>(level);
    msg.text = text;
    (void)channel_->send(msg);  // send publishes and rings the doorbell
  }

  // A debug line for the manager's log only (nothing on stderr, whose lines the manager
  // logs at info): what each lock-down step did, once per worker start.
  void debug(const std::string& text) const {
    if (channel_ == nullptr) return;
    ipc::LogMsg msg;
    msg.level = 0;
    msg.text = text;
    (void)channel_->send(msg);
  }

  // Exits with `code` when `s` is an error, after saying "<what>: <reason>".
  void check(const Status& s, int code, std::string_view what) const {
    if (s) return;
    say(3, std::string(what) + ": " + s.message());
    leave(code);
  }

 private:
  WorkerChannel* channel_ = nullptr;
};

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string describe_limits(const sandbox::ResourceLimits& l) {
  std::string out;
  auto add = [&](const char* name, std::uint64_t v) {
    if (v != 0) out += std::string(" ") + name + "=" + std::to_string(v);
  };
  add("as", l.address_space);
  add("cpu", l.cpu_seconds);
  add("nofile", l.open_files);
  add("nproc", l.processes);
  add("fsize", l.file_size);
  return out + " core=0";
}

std::string describe_drop(const sandbox::PrivilegeDrop& d,
                          const std::optional<sandbox::RunAs>& run_as) {
  std::string out = "lock-down step 4: ";
  if (d.was_root && run_as) {
    out += "uid " + std::to_string(d.uid) + ", gid " + std::to_string(d.gid) + ", " +
           std::to_string(run_as->groups.size()) + " supplementary groups";
  } else if (d.was_root) {
    out += "stays uid 0 (no sandbox.user)";
  } else {
    out += "not root, uid " + std::to_string(d.uid) + " kept";
  }
  return out + ", no capabilities (bounding, ambient, permitted, effective), not dumpable";
}

// The layers a worker has in effect, for the manager's `poolctl workers` (ReadyMsg).
class Isolation {
 public:
  Isolation() : text_("rlimits") {}
  void add(const std::string& layer) { text_ += "+" + layer; }
  void add_privileges(const sandbox::PrivilegeDrop& d) {
    if (d.uid != 0) add("uid:" + std::to_string(d.uid));
    add("caps:none");
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// A refusal of the plugin for what its init did: the error names the plugin.
Status refused(const std::string& plugin_path, const Status& why) {
  return Status::error(Code::kPlugin, "plugin '" + plugin_path + "' refused: " + why.message() +
                                          " (what init may do: docs/plugin-guide.md)");
}

// Step 5a: what binds the plugin's init from its first line on (docs/security.md, "Init").
// Returns what it did, for step 5's debug line.
std::string confine_init(const StartupReport& report, const sandbox::SandboxPolicy& policy) {
  report.check(sandbox::set_no_new_privs(), sandbox::kExitLockdown,
               "lock-down step 5 (no_new_privs)");
  report.check(sandbox::become_child_subreaper(), sandbox::kExitLockdown,
               "lock-down step 5 (child subreaper)");
  report.check(sandbox::install_init_seccomp(policy), sandbox::kExitLockdown,
               "lock-down step 5 (init seccomp layer)");
  const std::vector<std::string> exempt = sandbox::init_layer_exemptions(policy);
  return std::string("no_new_privs, child subreaper, ") +
         (policy.profile == sandbox::SeccompProfile::kOff
              ? "no init layer (seccomp off)"
              : std::string(policy.init.network ? "init layer (no processes, exec or ptrace"
                                                : "init layer (no processes, exec, ptrace or "
                                                  "sockets") +
                    (exempt.empty() ? std::string() : " but " + join(exempt)) + ")");
}

// What the plugin may read under Landlock besides `extra`: its directory (through its fd),
// the directories of every library loaded so far, readonly_paths and its own /proc/self.
std::vector<std::string> readable_paths(const sandbox::WorkerArgs& args,
                                        const std::vector<std::string>& extra) {
  std::vector<std::string> readable = {"/proc/self/fd/" + std::to_string(args.plugin_dir_fd)};
  for (std::string& dir : sandbox::loaded_library_dirs()) readable.push_back(std::move(dir));
  readable.insert(readable.end(), args.policy.readonly_paths.begin(),
                  args.policy.readonly_paths.end());
  readable.insert(readable.end(), extra.begin(), extra.end());
  // Its own /proc/<pid> (glibc reads /proc/self/maps, a plugin its fds): no other process's.
  if (::access("/proc/self", F_OK) == 0) readable.emplace_back("/proc/self");
  return readable;
}

// Step 5b, before the plugin is loaded (its constructors run at dlopen): Landlock over what
// init may read (readable_paths with sandbox.init.read_paths) and write (the view's /tmp and
// sandbox.init.write_paths), on the only thread there is.
// Step 6 narrows it again after init. Returns what it did, for step 5's debug line.
std::string restrict_init_filesystem(const StartupReport& report, const sandbox::WorkerArgs& args) {
  const sandbox::SandboxPolicy& policy = args.policy;
  std::vector<std::string> readable = readable_paths(args, policy.init.read_paths);
  std::vector<std::string> writable = policy.writable_paths;
  writable.insert(writable.end(), policy.init.write_paths.begin(), policy.init.write_paths.end());
  Result<sandbox::LandlockProbe> landlock =
      sandbox::restrict_filesystem(readable, sandbox::requires_layer(policy, "landlock"), writable);
  report.check(landlock.status(), sandbox::kExitLockdown, "lock-down step 5 (init Landlock)");
  if (landlock->abi == 0) return "init reads anything (no Landlock)";
  readable.front() = std::filesystem::path(args.plugin_path).parent_path().string() + " (by fd)";
  return "init reads only " + join(readable) +
         (writable.empty() ? std::string(", writes nothing") : ", writes only " + join(writable));
}

// The end of an init failure's message: the plugin's own last error line, and what init may
// reach, naming the keys that grant more (a file or a socket refused is the usual reason).
std::string init_failure_context(HostApi& host, const sandbox::SandboxPolicy& policy) {
  std::string out;
  if (const std::string said = host.last_unattributed_error(); !said.empty()) {
    out += ": " + said;
  }
  out +=
      "; init is confined: it reads only the plugin's directory, its libraries, "
      "sandbox.readonly_paths and sandbox.init.read_paths, writes only sandbox.init.write_paths";
  out += policy.init.network ? " (sandbox.init.network is true)"
                             : ", and makes no socket unless sandbox.init.network is true";
  return out;
}

// Step 6: Landlock over the plugin's directory, its libraries' and the configured paths,
// for every thread of the process. The plugin's directory is granted through its fd (the
// magic link): the worker's user may not be able to reach its path (a checkout under /root),
// and Landlock's rules hold on the directory itself, not on a name.
void restrict_filesystem(const StartupReport& report, const sandbox::WorkerArgs& args,
                         Isolation& isolation) {
  const sandbox::SandboxPolicy& policy = args.policy;
  const std::string& plugin_path = args.plugin_path;
  std::vector<std::string> readable = readable_paths(args, {});
  Result<sandbox::LandlockProbe> landlock = sandbox::restrict_filesystem(
      readable, sandbox::requires_layer(policy, "landlock"), policy.writable_paths);
  if (!landlock && landlock.status().code() == Code::kPlugin) {
    report.check(refused(plugin_path, landlock.status()), sandbox::kExitInit, "plugin init");
  }
  report.check(landlock.status(), sandbox::kExitLockdown, "lock-down step 6 (Landlock)");
  if (landlock->abi == 0) {
    report.say(2, "Landlock unavailable, the plugin's filesystem view is not restricted: " +
                      landlock->unavailable);
    report.debug("lock-down step 6: no Landlock");
    return;
  }
  isolation.add("landlock:v" + std::to_string(landlock->abi));
  readable.front() = std::filesystem::path(plugin_path).parent_path().string() + " (by fd)";
  const int others = landlock->other_threads;
  report.debug("lock-down step 6: Landlock ABI " + std::to_string(landlock->abi) +
               ", read-only: " + join(readable) + "; " +
               (others < 0    ? std::string("the other threads are unknown (no /proc/self/task)")
                : others == 0 ? std::string("no other thread")
                              : std::to_string(others) + " thread(s) of the plugin's init too, " +
                                    (landlock->kernel_tsync ? "by the kernel (TSYNC)"
                                                            : "each by itself (signalled)")));
  if (others < 0) {
    report.say(2,
               "cannot list the worker's threads (/proc/self/task): threads the plugin's "
               "init started may not be under Landlock; seccomp still covers them");
  }
}

// Steps 0-2: placed in its cgroups, tied to the manager, nothing inherited; then the
// channel, through which every later step reports.
std::unique_ptr<WorkerChannel> prepare_process(StartupReport& report,
                                               const sandbox::WorkerArgs& args, pid_t spawner) {
  // 0. In its cgroups before anything else (the manager places it, then opens the gate).
  if (args.gate_fd >= 0) {
    report.check(sandbox::wait_for_placement(args.gate_fd), sandbox::kExitLockdown,
                 "lock-down step 0 (cgroup placement)");
  }

  // 1. Die with the manager.
  report.check(sandbox::set_parent_death_signal(spawner, args.manager_pidfd),
               sandbox::kExitLockdown, "lock-down step 1 (parent death signal)");

  // 2. Nothing inherited but stdio and the channel; a clean, predictable process.
  report.check(sandbox::close_inherited_fds({args.channel_fd, args.doorbell_fd, args.manager_pidfd,
                                             args.plugin_fd, args.plugin_dir_fd}),
               sandbox::kExitLockdown, "lock-down step 2 (inherited fds)");
  report.check(sandbox::reset_process_state(args.policy.keep_env), sandbox::kExitLockdown,
               "lock-down step 2 (environment, cwd, umask, stdio)");
  Result<std::unique_ptr<WorkerChannel>> attached =
      WorkerChannel::attach(args.channel_fd, args.doorbell_fd);
  report.check(attached.status(), sandbox::kExitChannel, "channel");
  std::unique_ptr<WorkerChannel> channel = std::move(attached).value();
  report.attach(channel.get());
  channel->beat();
  report.debug("lock-down step 1: PR_SET_PDEATHSIG(SIGKILL), parent " + std::to_string(spawner));
  report.debug("lock-down step 2: inherited fds closed, environment cleared (kept: " +
               join(args.policy.keep_env) + "), cwd /, umask 077");
  return channel;
}

// Steps 3-4: resource limits, then privileges, before any plugin code runs: plugin init
// never runs as root.
void limit_and_drop(const StartupReport& report, const sandbox::WorkerArgs& args, pid_t spawner,
                    Isolation& isolation) {
  // 3. Resource limits.
  report.check(sandbox::apply_rlimits(args.policy.limits), sandbox::kExitLockdown,
               "lock-down step 3 (rlimits)");
  report.check(sandbox::raise_oom_score_adj(), sandbox::kExitLockdown,
               "lock-down step 3 (oom_score_adj)");
  report.debug("lock-down step 3: rlimits" + describe_limits(args.policy.limits));

  // 4. Privileges.
  Result<sandbox::PrivilegeDrop> dropped = sandbox::drop_privileges(args.policy.run_as);
  report.check(dropped.status(), sandbox::kExitLockdown, "lock-down step 4 (privileges)");
  // Changing credentials cleared the parent-death signal; the manager may be gone by now.
  report.check(sandbox::set_parent_death_signal(spawner, args.manager_pidfd),
               sandbox::kExitLockdown, "lock-down step 4 (parent death signal again)");
  // From here PR_SET_PDEATHSIG stays set: the manager's pidfd is not the plugin's to keep.
  if (args.manager_pidfd >= 0) ::close(args.manager_pidfd);
  isolation.add_privileges(*dropped);
  report.debug(describe_drop(*dropped, args.policy.run_as));
  if (dropped->was_root) {
    // The manager checked these fds when it opened them; their modes may have changed since.
    report.check(
        sandbox::check_plugin_permissions(args.plugin_fd, args.plugin_dir_fd, args.plugin_path),
        sandbox::kExitLoad, "plugin load");
  }
}

// Hung-task diagnostics and the memory report. Installed before any plugin code runs (the
// first backtrace() loads libgcc_s, which only works before seccomp; RLIMIT_AS is known
// then), and again just before seccomp: init may have replaced or blocked them; after
// seccomp nobody can.
void install_reporters(const StartupReport& report, WorkerChannel& channel, std::string_view step) {
  const std::string prefix = step.empty() ? std::string() : std::string(step) + " (";
  const std::string suffix = step.empty() ? std::string() : ")";
  report.check(install_backtrace_reporter(&channel.header().diagnostics, channel.doorbell_fd()),
               sandbox::kExitLockdown, prefix + "backtrace reporter" + suffix);
  report.check(install_memory_reporter(&channel.header().diagnostics), sandbox::kExitLockdown,
               prefix + "memory reporter" + suffix);
}

// The largest result a task may return: the configured max_result, shrunk to what one
// message of the channel can carry with its envelope.
HostLimits host_limits(const StartupReport& report, const sandbox::WorkerArgs& args,
                       const WorkerChannel& channel) {
  HostLimits limits;
  limits.max_result = args.max_result;
  if (channel.max_message() < kResultEnvelope * 2 ||
      args.max_result > channel.max_message() - kResultEnvelope) {
    limits.max_result = channel.max_message() > kResultEnvelope * 2
                            ? channel.max_message() - kResultEnvelope
                            : channel.max_message() / 2;
    report.say(2, "max_result " + std::to_string(args.max_result) +
                      " does not fit the channel's max_message " +
                      std::to_string(channel.max_message()) + "; using " +
                      std::to_string(limits.max_result));
  }
  return limits;
}

// 5. The plugin: dlopen and sp_plugin_init, bounded by init_timeout, under the init layer:
//    no new process, no exec, no ptrace from here on, in any thread. Returns the plugin and
//    fills `task_types` with the types it serves.
LoadedPlugin load_plugin(const StartupReport& report, const sandbox::WorkerArgs& args,
                         WorkerChannel& channel, HostApi& host,
                         std::vector<std::string>& task_types) {
  const std::string& plugin_path = args.plugin_path;  // a name: the plugin comes as fds
  const std::string confined = confine_init(report, args.policy);
  const std::string init_view = restrict_init_filesystem(report, args);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // plugin printf lines reach the log whole
  InitDeadline deadline;
  report.check(deadline.arm(args.init_timeout_ms), sandbox::kExitLockdown, "init deadline");
  Result<LoadedPlugin> plugin =
      LoadedPlugin::load(PluginFile{plugin_path, args.plugin_fd, args.plugin_dir_fd});
  report.check(plugin.status(), sandbox::kExitLoad, "plugin load");
  name_loaded_object(plugin->loaded_as().c_str(), plugin_path.c_str());  // for backtraces
  // From the region, where the manager put it (never on the command line).
  if (Status inited = plugin->init(host.table(), channel.plugin_config()); !inited) {
    report.check(
        Status::error(inited.code(), inited.message() + init_failure_context(host, args.policy)),
        sandbox::kExitInit, "plugin init");
  }
  Result<std::vector<std::string>> types = plugin->task_types();
  report.check(types.status(), sandbox::kExitLoad, "plugin task types");
  task_types = std::move(types).value();
  deadline.disarm();
  // Init may not leave a process behind (only a pool that allows fork lets it start one).
  if (Status left = sandbox::end_init_children(); !left) {
    report.check(left.code() == Code::kPlugin ? refused(plugin_path, left) : left,
                 sandbox::kExitInit, "plugin init");
  }
  report.debug("lock-down step 5: " + confined + "; " + init_view + "; plugin " + plugin_path +
               " loaded and initialised, no process left");
  return std::move(plugin).value();
}

// 7. Seccomp, last; its SIGSYS reporter writes into the shared header.
void install_filter(const StartupReport& report, const sandbox::SandboxPolicy& policy,
                    const std::string& plugin_path, WorkerChannel& channel, Isolation& isolation) {
  report.check(sandbox::install_sigsys_reporter(&channel.header().violation_syscall),
               sandbox::kExitLockdown, "lock-down step 7 (SIGSYS reporter)");
  install_reporters(report, channel, "lock-down step 7");
  const bool wx = sandbox::denies_write_execute(policy);
  if (wx) {
    Status clean = sandbox::check_no_writable_executable_mapping();
    if (!clean && clean.code() == Code::kPlugin) {
      report.check(refused(plugin_path, clean), sandbox::kExitInit, "plugin init");
    }
    if (!clean) {
      report.say(2, "write-xor-execute: cannot check the mappings init left (" + clean.to_string() +
                        "); new ones are still refused");
    }
  }
  report.check(sandbox::install_seccomp(policy), sandbox::kExitLockdown,
               "lock-down step 7 (seccomp)");
  if (policy.profile == sandbox::SeccompProfile::kOff) {
    report.say(2,
               "SECCOMP IS OFF for this worker (profile 'off'): the plugin runs without a "
               "syscall filter; use it for debugging only");
  } else {
    report.debug(
        "lock-down step 7: seccomp profile " + std::string(sandbox::profile_name(policy.profile)) +
        (policy.allow_syscalls.empty() ? std::string() : " + " + join(policy.allow_syscalls)) +
        (wx ? ", write-xor-execute" : ", no write-xor-execute"));
  }
  isolation.add("seccomp:" + std::string(sandbox::profile_name(policy.profile)));
}

}  // namespace

// The lock-down, in order (docs/security.md): each step assumes the ones before it.
void run_worker(const sandbox::WorkerArgs& args, pid_t spawner) {
  StartupReport report;
  std::unique_ptr<WorkerChannel> channel = prepare_process(report, args, spawner);  // 0-2
  Isolation isolation;
  limit_and_drop(report, args, spawner, isolation);  // 3-4
  install_reporters(report, *channel, "");
  HostApi host(*channel, host_limits(report, args, *channel));
  std::vector<std::string> task_types;
  LoadedPlugin plugin = load_plugin(report, args, *channel, host, task_types);  // 5
  // 6. Landlock, on every thread: from here on the plugin's directory, its libraries'
  //    directories, the configured paths and the worker's own /proc are readable, and only
  //    the view's private /tmp (when the pool has one) is writable.
  restrict_filesystem(report, args, isolation);
  // Loaded and granted: the plugin's fds have served (and a task could list them).
  ::close(args.plugin_fd);
  ::close(args.plugin_dir_fd);
  install_filter(report, args.policy, args.plugin_path, *channel, isolation);  // 7

  // Ready: from here on only the task loop's syscalls.
  channel->header().phase.store(static_cast<std::uint32_t>(ipc::WorkerPhase::kReady),
                                std::memory_order_release);
  ipc::ReadyMsg ready;
  ready.pid = static_cast<std::uint32_t>(::getpid());
  ready.task_types = std::move(task_types);
  ready.isolation = isolation.text();
  channel->beat();
  report.check(channel->send(ready), sandbox::kExitProtocol, "ready");

  TaskLoop loop(*channel, plugin, host, args.heartbeat_ms);
  leave(loop.run());
}

}  // namespace sandpool::worker
