#include "worker_startup.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <sandpool/ipc/layout.hpp>
#include <sandpool/ipc/messages.hpp>
#include <sandpool/sandbox/lockdown.hpp>

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

  // Exits with `code` when `s` is an error, after saying "<what>: <reason>".
  void check(const Status& s, int code, std::string_view what) const {
    if (s) return;
    say(3, std::string(what) + ": " + s.message());
    leave(code);
  }

 private:
  WorkerChannel* channel_ = nullptr;
};

// Step 2 moves to "/", so a relative plugin path is resolved against the spawner's cwd first.
std::string absolute_path(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.string();
}

}  // namespace

void run_worker(const sandbox::WorkerArgs& args, pid_t spawner) {
  StartupReport report;
  const std::string plugin_path = absolute_path(args.plugin_path);

  // 0. In its cgroups before anything else (the manager places it, then opens the gate).
  if (args.gate_fd >= 0) {
    report.check(sandbox::wait_for_placement(args.gate_fd), sandbox::kExitLockdown,
                 "lock-down step 0 (cgroup placement)");
  }

  // 1. Die with the manager.
  report.check(sandbox::set_parent_death_signal(spawner), sandbox::kExitLockdown,
               "lock-down step 1 (parent death signal)");

  // 2. Nothing inherited but stdio and the channel; a clean, predictable process.
  report.check(sandbox::close_inherited_fds({args.channel_fd, args.doorbell_fd}),
               sandbox::kExitLockdown, "lock-down step 2 (inherited fds)");
  report.check(sandbox::reset_process_state(args.policy.keep_env), sandbox::kExitLockdown,
               "lock-down step 2 (environment, cwd, umask, stdio)");
  Result<std::unique_ptr<WorkerChannel>> attached =
      WorkerChannel::attach(args.channel_fd, args.doorbell_fd);
  report.check(attached.status(), sandbox::kExitChannel, "channel");
  WorkerChannel& channel = **attached;
  report.attach(&channel);
  channel.beat();

  // 3. Resource limits.
  report.check(sandbox::apply_rlimits(args.policy.limits), sandbox::kExitLockdown,
               "lock-down step 3 (rlimits)");
  report.check(sandbox::raise_oom_score_adj(), sandbox::kExitLockdown,
               "lock-down step 3 (oom_score_adj)");

  // 4. Privilege drop: NOT YET IMPLEMENTED (a later issue). When running as root:
  //    setgroups, setresgid, setresuid to the configured user, drop capabilities,
  //    PR_SET_DUMPABLE 0. Changing credentials clears PR_SET_PDEATHSIG, so step 1's
  //    set_parent_death_signal must run again right after.

  // Hung-task diagnostics and the memory report, before any plugin code runs (the first
  // backtrace() loads libgcc_s, which only works before seccomp; RLIMIT_AS is known now).
  report.check(install_backtrace_reporter(&channel.header().diagnostics, channel.doorbell_fd()),
               sandbox::kExitLockdown, "backtrace reporter");
  report.check(install_memory_reporter(&channel.header().diagnostics), sandbox::kExitLockdown,
               "memory reporter");

  // 5. The plugin: dlopen and sp_plugin_init, bounded by init_timeout.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // plugin printf lines reach the log whole
  InitDeadline deadline;
  report.check(deadline.arm(args.init_timeout_ms), sandbox::kExitLockdown, "init deadline");
  Result<LoadedPlugin> plugin = LoadedPlugin::load(plugin_path);
  report.check(plugin.status(), sandbox::kExitLoad, "plugin load");

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
  HostApi host(channel, limits);
  report.check(plugin->init(host.table(), args.plugin_config_json), sandbox::kExitInit,
               "plugin init");
  Result<std::vector<std::string>> task_types = plugin->task_types();
  report.check(task_types.status(), sandbox::kExitLoad, "plugin task types");
  deadline.disarm();

  // 6. No new privileges. Landlock: NOT YET IMPLEMENTED (a later issue; kernel permitting,
  //    restrict the file system view here, after init and before seccomp).
  report.check(sandbox::set_no_new_privs(), sandbox::kExitLockdown, "lock-down step 6");

  // 7. Seccomp, last; its SIGSYS reporter writes into the shared header.
  ipc::RegionHeader& header = channel.header();
  report.check(sandbox::install_sigsys_reporter(&header.violation_syscall), sandbox::kExitLockdown,
               "lock-down step 7 (SIGSYS reporter)");
  // Again: init may have replaced or blocked it; after seccomp nobody can.
  report.check(install_backtrace_reporter(&header.diagnostics, channel.doorbell_fd()),
               sandbox::kExitLockdown, "lock-down step 7 (backtrace reporter)");
  report.check(install_memory_reporter(&header.diagnostics), sandbox::kExitLockdown,
               "lock-down step 7 (memory reporter)");
  report.check(sandbox::install_seccomp(args.policy), sandbox::kExitLockdown,
               "lock-down step 7 (seccomp)");
  if (args.policy.profile == sandbox::SeccompProfile::kOff) {
    report.say(2,
               "SECCOMP IS OFF for this worker (profile 'off'): the plugin runs without a "
               "syscall filter; use it for debugging only");
  }

  // Ready: from here on only the task loop's syscalls.
  header.phase.store(static_cast<std::uint32_t>(ipc::WorkerPhase::kReady),
                     std::memory_order_release);
  ipc::ReadyMsg ready;
  ready.pid = static_cast<std::uint32_t>(::getpid());
  ready.task_types = std::move(task_types).value();
  channel.beat();
  report.check(channel.send(ready), sandbox::kExitProtocol, "ready");

  TaskLoop loop(channel, *plugin, host, args.heartbeat_ms);
  leave(loop.run());
}

}  // namespace sandpool::worker
