#include "core/pool_loop.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>

#include <spdlog/spdlog.h>

#include <sandpool/dead_letters.hpp>
#include <sandpool/ipc/diagnostics.hpp>
#include <sandpool/log_text.hpp>
#include <sandpool/posix_call.hpp>
#include <sandpool/thread_name.hpp>

#include "core/declared_types.hpp"
#include "core/worker_locator.hpp"
#include "supervision/proc_stats.hpp"

namespace sandpool::core {
namespace {

constexpr std::int64_t kMsNs = 1000000;
constexpr std::size_t kResultBudget = 4096;  // messages per worker per iteration
constexpr std::int64_t kRunningPollMs = 10;
constexpr std::int64_t kStatsPublishNs = 1'000'000;  // published_stats() is at most 1 ms old
// Worker-writable sizes the manager keeps, whatever a frame claims: the worker host's own
// caps (host_api.hpp), enforced again here for a worker that forges its frames.
constexpr std::size_t kMaxTaskError = 4096;
constexpr std::size_t kMaxProgressData = 64 * 1024;
enum EventKind : std::uint64_t { kPidfd = 0, kDoorbell = 1, kOutput = 2, kInbox = 3 };

std::uint64_t event_tag(WorkerId id, EventKind k) { return id * 4 + k; }

// Adds fd to the epoll set for EPOLLIN, tagged. Returns the failure, naming the call.
Status watch(int epoll_fd, int fd, std::uint64_t tag) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag;
  return posix_call("epoll_ctl(EPOLL_CTL_ADD)",
                    [&] { return ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev); })
      .status();
}

std::uint32_t default_spin_us(std::uint32_t workers) {
  if (const char* env = std::getenv("SANDPOOL_SPIN_US"))
    return static_cast<std::uint32_t>(std::atoi(env));
  // Spinners yield their core after a few rounds (ipc::spin_until), so a modest
  // oversubscription costs little; only a single core, or far more workers than cores, turns
  // spinning off. On 2 vCPUs this spin is what took W2 from ~90 to ~22 us (performance.md).
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  return cores >= 2 && workers < static_cast<std::uint32_t>(cores) * 4 ? 50 : 0;
}

}  // namespace

// As root: refuses a plugin other users could replace, and resolves who the workers
// become (lock-down step 4, docs/security.md) once, here, since the worker's view of /etc may be restricted.
Status prepare_privilege_drop(sandbox::WorkerArgs& args, const std::string& user) {
  if (::geteuid() != 0) return Status::ok();
  if (Status s = sandbox::check_plugin_permissions(args.plugin_path); !s) {
    return Status::error(s.code() == Code::kPermissionDenied ? Code::kPlugin : s.code(),
                         s.message());
  }
  if (args.policy.run_as || user.empty()) return Status::ok();
  Result<sandbox::RunAs> who = sandbox::resolve_run_as(user);
  if (!who) return who.status();
  // The worker reopens the plugin file the manager hands it as that user: say so here
  // rather than fail in every worker.
  if (Status s = sandbox::check_readable_by(args.plugin_path, *who, user); !s) {
    return Status::error(s.code() == Code::kPermissionDenied ? Code::kPlugin : s.code(),
                         "plugin " + args.plugin_path + ": " + s.message());
  }
  args.policy.run_as = std::move(who).value();
  return Status::ok();
}

PoolLoop::PoolLoop(PoolOptions options) : opts_(options), as_started_(std::move(options)) {
  log_ = opts_.logger ? opts_.logger : spdlog::default_logger();
  spawner_ = opts_.spawner ? opts_.spawner : make_process_spawner();
  if (opts_.seed == 0) opts_.seed = std::random_device{}();
  spin_us_ = default_spin_us(opts_.workers);
  max_payload_.store(opts_.max_payload);
  queue_capacity_.store(opts_.queue_capacity);
  max_timeout_ms_.store(opts_.max_timeout.count());
}

PoolLoop::~PoolLoop() { close(); }

Result<std::shared_ptr<PoolLoop>> PoolLoop::start(PoolOptions options) {
  if (options.plugin_path.empty()) return Status::invalid("no plugin given");
  if (options.concurrency == 0) return Status::invalid("concurrency must be at least 1");
  if (options.workers == 0) return Status::invalid("a pool needs at least 1 worker");
  std::shared_ptr<PoolLoop> loop(new PoolLoop(std::move(options)));
  SP_RETURN_IF_ERROR(loop->launch());
  return loop;
}

Status PoolLoop::launch() {
  auto worker = locate_worker(opts_.worker_path);
  if (!worker) return worker.status();
  std::error_code ec;
  if (!std::filesystem::exists(opts_.plugin_path, ec)) {
    return Status::error(Code::kPlugin, "plugin not found: " + opts_.plugin_path);
  }
  launch_.worker_path = *worker;
  SP_RETURN_IF_ERROR(fill_launch_spec());
  sandbox::NamespaceSet namespaces;
  if (!opts_.spawner && !opts_.sandbox.namespaces.wanted.empty()) {
    // Namespaces need the clone3 spawner; without them the vfork one is faster.
    Clone3SpawnerOptions so;
    so.namespaces = opts_.sandbox.namespaces;
    const auto& who = launch_.args.policy.run_as;  // resolved by fill_launch_spec()
    if (who && !so.namespaces.run_as_uid) {
      so.namespaces.run_as_uid = who->uid;
      so.namespaces.run_as_gid = who->gid;
    }
    so.logger = log_;
    so.log_name = opts_.name;
    auto clone3 = make_clone3_spawner(std::move(so));
    namespaces = clone3->in_effect();
    spawner_ = std::move(clone3);
  }
  isolation_ = sandbox::describe_isolation(opts_.sandbox, namespaces);
  namespaces_ = namespaces;
  if (!namespaces.empty()) manager_prefix_ = "ns:" + namespaces.describe() + "+";
  SP_RETURN_IF_ERROR(set_up_cgroups());
  // Again, now that the namespaces and the cgroup are known: the paths the namespaces open
  // to Landlock (step 6) and the cgroup's limits.
  SP_RETURN_IF_ERROR(fill_launch_spec());
  if (const auto off = sandbox::unlimited_resources(opts_.sandbox.limits); !off.empty()) {
    std::string names;
    for (const std::string& n : off) names += (names.empty() ? "limits." : ", limits.") + n;
    log_->warn("[{}] limits set to 0, none applied: {}", opts_.name, names);
  }

  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return Status::from_errno(errno, "epoll_create1");
  epoll_.reset(ep);
  auto bell = ipc::EventFd::create();
  if (!bell) return bell.status();
  inbox_bell_ = std::move(bell).value();
  SP_RETURN_IF_ERROR(watch(epoll_.get(), inbox_bell_.fd(), event_tag(0, kInbox)));

  core_ = std::make_unique<PoolCore>(opts_, *this, admitted_);
  install_dead_letter_sink();
  core_->set_log([this](int level, const std::string& text) {
    switch (level) {
      case 1:
        log_->info("[{}] {}", opts_.name, text);
        break;
      case 2:
        log_->warn("[{}] {}", opts_.name, text);
        break;
      default:
        log_->error("[{}] {}", opts_.name, text);
        break;
    }
  });
  auto started = started_.get_future();
  thread_ = std::thread([this] { run(); });
  Status s = started.get();
  if (!s) {
    close();
    return s;
  }
  return Status::ok();
}

Status PoolLoop::fill_launch_spec() {
  launch_.args.plugin_path = std::filesystem::absolute(opts_.plugin_path).string();
  launch_.args.heartbeat_ms = static_cast<std::uint32_t>(opts_.heartbeat_interval.count());
  launch_.args.max_result = opts_.max_result;
  launch_.args.init_timeout_ms = static_cast<std::uint32_t>(opts_.init_timeout.count());
  launch_.args.plugin_config_json = opts_.plugin_config_json;
  launch_.args.parent_pid = ::getpid();
  launch_.args.policy = opts_.sandbox;
  launch_.args.policy.limits.cpu_seconds = worker_cpu_seconds(opts_);
  SP_RETURN_IF_ERROR(prepare_privilege_drop(launch_.args, opts_.user));
  // What the namespaces made the worker's own stays open under Landlock (step 6): the /proc
  // of its pid namespace shows only itself, the view's tmpfs /tmp is private and empty.
  if (namespaces_.has(sandbox::Namespace::kPid) && namespaces_.has(sandbox::Namespace::kMount)) {
    launch_.args.policy.readonly_paths.push_back("/proc");
  }
  if (namespaces_.has(sandbox::Namespace::kMount)) {
    // The glibc files the view shows of /etc (the mount plan binds those that exist).
    for (const char* f : {"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts",
                          "/etc/localtime", "/etc/ld.so.cache"}) {
      std::error_code ec;
      if (std::filesystem::exists(f, ec)) launch_.args.policy.readonly_paths.emplace_back(f);
    }
  }
  if (namespaces_.has(sandbox::Namespace::kMount) && opts_.sandbox.namespaces.tmpfs_size > 0) {
    launch_.args.policy.writable_paths.push_back("/tmp");
  }
  launch_.region.task_ring_bytes = opts_.ring_bytes;
  launch_.region.result_ring_bytes = opts_.ring_bytes;
  launch_.region.max_message = std::max(opts_.max_payload, opts_.max_result) + 4096;
  if (launch_.cgroups) {
    launch_.cgroup_limits.memory_bytes = opts_.sandbox.limits.address_space;
    launch_.cgroup_limits.pids = opts_.sandbox.limits.processes;
    launch_.cgroup_limits.cpus = opts_.sandbox.cpu_quota;
    // The cgroup's memory limit replaces RLIMIT_AS, which breaks runtimes that reserve large
    // address ranges (JITs, Go, ASan) without using them.
    launch_.args.policy.limits.address_space = 0;
    // pids.max replaces RLIMIT_NPROC, which counts every task of the worker's user on the
    // host: every worker of every pool running as sandbox.user would share one budget, and a
    // fork bomb in one would stop the others' threads.
    launch_.args.policy.limits.processes = 0;
  }
  return Status::ok();
}

Status PoolLoop::set_up_cgroups() {
  using sandbox::CgroupMode;
  if (opts_.sandbox.cgroup == CgroupMode::kOff) {
    if (opts_.sandbox.cpu_quota > 0) {
      return Status::invalid("limits.cpu_quota needs per-worker cgroups (sandbox.cgroup)");
    }
    return Status::ok();
  }
  auto tree = supervision::CgroupTree::system();
  if (!tree) {
    const std::string why = "per-worker cgroups unavailable: " + tree.status().message();
    if (opts_.sandbox.cgroup == CgroupMode::kRequired) {
      return tree.status().with_context(
          "sandbox.cgroup is required, but per-worker cgroups are unavailable");
    }
    log_->warn("[{}] {}; workers are limited by rlimits only (sandbox.cgroup: auto)", opts_.name,
               why);
    if (opts_.sandbox.cpu_quota > 0) {
      log_->warn("[{}] limits.cpu_quota is not enforced without a cgroup", opts_.name);
    }
    return Status::ok();
  }
  launch_.cgroups = std::move(tree).value();
  launch_.pool_name = opts_.name;
  const std::string version(supervision::to_string(launch_.cgroups->version()));
  manager_layers_ = "+cgroup:" + version;
  isolation_ += manager_layers_;
  log_->debug("[{}] per-worker cgroups ({}) under {}", opts_.name, version,
              launch_.cgroups->parents().front());
  return Status::ok();
}

// ---- the loop -------------------------------------------------------------------------

void PoolLoop::run() {
  name_thread(::pthread_self(), "sp-loop:" + opts_.name);
  core_->start(ipc::monotonic_ns());
  publish_stats(ipc::monotonic_ns(), true);
  std::int64_t busy_rounds = 0;
  for (;;) {
    std::int64_t now = ipc::monotonic_ns();
    busy_.begin(now);  // poold's watchdog: an iteration is one item of work
    bool work = drain_inbox(now);
    for (auto& [id, link] : links_) work |= poll_worker(id, link, now, kResultBudget);
    core_->observe_running();
    core_->observe_backtraces(now);
    if (now >= core_->next_deadline()) core_->on_tick(now);
    for (WorkerId id : std::exchange(spawn_failures_, {})) {
      auto it = links_.find(id);
      if (it == links_.end()) continue;
      core_->on_worker_error(id, it->second.spawn_error);
      links_.erase(it);
      core_->on_exit(id, {ExitStatus{true, 127, 0}, 0, 0}, now);
      work = true;
    }
    flush_links();
    // Before after_iteration() wakes idle waiters, and before a possible sleep: current
    // whenever somebody could have waited for the loop.
    publish_stats(now, !work);
    after_iteration();
    if (core_->finished() && inbox_count_.load() == 0) break;

    if (work && (++busy_rounds % 32) != 0) continue;  // peek at epoll now and then while busy
    if (work) {
      wait_for_events(0, now);
      continue;
    }
    busy_rounds = 0;
    if (spin_us_ > 0 && spin_for_work(now + spin_us_ * 1000ll)) continue;
    // Sleep until the core's next deadline, but look at the workers' headers now and then:
    // every 10 ms while tasks run (their `running` state), else every heartbeat interval.
    std::int64_t timeout_ms =
        core_->has_in_flight() ? kRunningPollMs : opts_.heartbeat_interval.count();
    const std::int64_t next = core_->next_deadline();
    if (next != INT64_MAX) {
      timeout_ms =
          std::min(timeout_ms, std::max<std::int64_t>(0, (next - now + kMsNs - 1) / kMsNs));
    }
    wait_for_events(timeout_ms, now);
  }
  // The end: kill what is left (nothing, after a clean close), then serve late queries.
  links_.clear();
  std::lock_guard lock(ended_mu_);
  loop_ended_ = true;
  std::vector<std::function<void(PoolCore&, std::int64_t)>> cmds;
  {
    std::lock_guard in(inbox_mu_);
    cmds.swap(inbox_cmds_);
  }
  for (auto& c : cmds) c(*core_, ipc::monotonic_ns());
  if (!started_reported_) {
    started_reported_ = true;
    started_.set_value(Status::error(Code::kClosed, "pool closed while starting"));
  }
  std::lock_guard idle(idle_mu_);
  idle_ = true;
  idle_cv_.notify_all();
}

void PoolLoop::publish_stats(std::int64_t now, bool force) {
  if (!force && now - published_at_ns_ < kStatsPublishNs) return;
  published_at_ns_ = now;
  PoolStats s = core_->stats();
  std::lock_guard lock(published_mu_);
  published_ = std::move(s);
  published_cmds_ = cmds_done_;
}

PoolStats PoolLoop::published_stats() {
  const std::uint64_t posted = cmds_posted_.load(std::memory_order_acquire);
  {
    std::lock_guard lock(published_mu_);
    // Read-your-writes: a copy taken after every command posted so far (a scale, a
    // reconfigure) is good enough; submitted tasks may be up to a millisecond behind.
    if (published_cmds_ >= posted && !loop_ended_.load()) return published_;
  }
  return query<PoolStats>([](PoolCore& core, std::int64_t) { return core.stats(); });
}

bool PoolLoop::drain_inbox(std::int64_t now) {
  if (inbox_count_.load(std::memory_order_acquire) == 0) return false;
  std::vector<TaskPtr> tasks;
  std::vector<std::function<void(PoolCore&, std::int64_t)>> cmds;
  {
    std::lock_guard lock(inbox_mu_);
    tasks.swap(inbox_tasks_);
    cmds.swap(inbox_cmds_);
    inbox_count_.store(0, std::memory_order_release);
  }
  for (TaskPtr& t : tasks) core_->submit(std::move(t), now);
  for (auto& c : cmds) c(*core_, now);
  if (!cmds.empty()) {
    cmds_done_ += cmds.size();
    publish_stats(now, true);  // what the commands changed, for published_stats()
  }
  return true;
}

bool PoolLoop::spin_for_work(std::int64_t until_ns) {
  return ipc::spin_until(
      [&] {
        if (inbox_count_.load(std::memory_order_acquire) != 0) return true;
        for (auto& [id, link] : links_) {
          if (link.proc && !link.broken && link.proc->results().ring().has_data()) return true;
        }
        return false;
      },
      until_ns);
}

void PoolLoop::wait_for_events(std::int64_t timeout_ms, std::int64_t now) {
  bool may_sleep = timeout_ms != 0;
  if (may_sleep) {
    // Announce the sleep, then look once more (the producers' half of the handshake is in
    // submit() and the rings' publish()).
    sleeping_.store(true);
    if (inbox_count_.load() != 0) may_sleep = false;
    for (auto& [id, link] : links_) {
      if (!may_sleep || !link.proc || link.broken) continue;
      if (!link.proc->results().ring().prepare_sleep()) may_sleep = false;
      if (link.proc->tasks().has_queued() &&
          !link.proc->tasks().ring().prepare_wait(link.proc->tasks().ring().max_record_payload())) {
        may_sleep = false;
      }
    }
  }
  epoll_event events[64];
  if (may_sleep) busy_.end();  // poold's watchdog: idle, however long the sleep
  int n = ::epoll_wait(epoll_.get(), events, 64, may_sleep ? static_cast<int>(timeout_ms) : 0);
  if (may_sleep) busy_.begin(ipc::monotonic_ns());  // handling what woke it is work
  if (timeout_ms != 0) {
    sleeping_.store(false);
    for (auto& [id, link] : links_) {
      if (link.proc && !link.broken) {
        link.proc->results().ring().cancel_sleep();
        link.proc->tasks().ring().cancel_wait();
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    const std::uint64_t tag = events[i].data.u64;
    const WorkerId id = tag / 4;
    const auto kind = static_cast<EventKind>(tag % 4);
    if (kind == kInbox) {
      inbox_bell_.drain();
      continue;
    }
    auto it = links_.find(id);
    if (it == links_.end() || !it->second.proc) continue;
    Link& link = it->second;
    switch (kind) {
      case kDoorbell:
        if (!link.proc->doorbell().drain()) {  // the worker closed its end: rings no more
          ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, link.proc->doorbell_fd(), nullptr);
        }
        break;
      case kOutput:
        if (!link.proc->read_output([&](std::string_view line) { log_line(id, -1, line); })) {
          ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, link.proc->output_fd(), nullptr);
          link.output_open = false;
        }
        break;
      case kPidfd:
        if (link.proc->child().try_reap()) exited_.push_back(id);
        break;
      default:
        break;
    }
  }
  for (WorkerId id : std::exchange(exited_, {})) reap(id, now);
}

bool PoolLoop::poll_worker(WorkerId id, Link& link, std::int64_t now, std::size_t budget) {
  if (!link.proc || link.broken) return false;
  std::size_t n = 0;
  std::uint16_t kind = 0;
  while (n < budget) {
    const ipc::RingStatus s = link.proc->results().next(&kind, &message_);
    if (s == ipc::RingStatus::kEmpty) break;
    if (s == ipc::RingStatus::kCorrupt) {
      protocol_error(id, link, "result ring corrupt (bad index, record length or fragment)");
      break;
    }
    ++n;
    handle_message(id, link, kind, now);
    if (link.broken) break;
  }
  if (!link.broken && link.proc->release_results()) wakes_.fetch_add(1, std::memory_order_relaxed);
  return n > 0;
}

void PoolLoop::handle_message(WorkerId id, Link& link, std::uint16_t kind, std::int64_t now) {
  switch (static_cast<ipc::MsgKind>(kind)) {
    case ipc::MsgKind::kResult: {
      ipc::ResultMsg m;
      if (Status s = ipc::decode(message_, &m); !s) return protocol_error(id, link, s.message());
      if (m.data.size() > opts_.max_result) {
        m.status = ipc::TaskStatus::kResultTooLarge;
        m.data.clear();
      }
      if (m.error.size() > kMaxTaskError) m.error = supervision::capped_log_line(m.error);
      if (!core_->on_result(id, m, now)) {
        protocol_error(id, link, "result for task " + std::to_string(m.id) + " not in flight");
      }
      return;
    }
    case ipc::MsgKind::kProgress: {
      ipc::ProgressMsg m;
      if (Status s = ipc::decode(message_, &m); !s) return protocol_error(id, link, s.message());
      if (m.data.size() > kMaxProgressData) m.data.resize(kMaxProgressData);
      if (!core_->on_progress(id, m)) {
        protocol_error(id, link, "progress for task " + std::to_string(m.id) + " not in flight");
      }
      return;
    }
    case ipc::MsgKind::kLog: {
      ipc::LogMsg m;
      if (Status s = ipc::decode(message_, &m); !s) return protocol_error(id, link, s.message());
      log_line(id, m.level, m.text);
      if (m.level >= 3) core_->on_worker_error(id, log_text(m.text));
      return;
    }
    case ipc::MsgKind::kReady: {
      ipc::ReadyMsg m;
      if (Status s = ipc::decode(message_, &m); !s) return protocol_error(id, link, s.message());
      if (link.ready) return protocol_error(id, link, "a second Ready message");
      link.ready = true;
      if (!first_ready_seen_) {
        first_ready_seen_ = true;
        std::vector<std::string> declared = m.task_types;
        if (Status s = core::validate_declared_types(declared, opts_.plugin_path); !s) {
          failure_ = s.message();
          failed_.store(true);
        } else if (!opts_.task_types.empty()) {
          for (const auto& t : opts_.task_types) {
            if (!declared.empty() &&
                std::find(declared.begin(), declared.end(), t) == declared.end()) {
              set_failure("task type '" + t + "' is not served by plugin " + opts_.plugin_path);
            }
          }
          task_types_ = opts_.task_types;
        } else {
          task_types_ = declared.empty() ? std::vector<std::string>{"default"} : declared;
        }
      } else {
        check_declared_types(m.task_types);
      }
      // Worker-written: keep it short and printable.
      constexpr std::size_t kMaxIsolation = 256;
      const std::string isolation = log_text(m.isolation, kMaxIsolation);
      log_->debug("[{}] worker {} ready, isolation {}", opts_.name, link.proc->pid(), isolation);
      if (!core_->on_ready(id, now, manager_prefix_ + isolation + manager_layers_)) {
        protocol_error(id, link, "a second Ready");
      }
      return;
    }
    default:
      return protocol_error(id, link, "unknown message kind " + std::to_string(kind));
  }
}

void PoolLoop::protocol_error(WorkerId id, Link& link, const std::string& what) {
  if (link.broken) return;
  link.broken = true;
  const std::string safe = log_text(what);  // may quote what the worker wrote
  log_->warn("[{}] worker {} protocol_error: {}; killing it", opts_.name,
             link.proc ? link.proc->pid() : 0, safe);
  core_->on_protocol_error(id, safe);
}

void PoolLoop::flush_links() {
  for (auto& [id, link] : links_) {
    if (!link.dirty || !link.proc || link.broken) continue;
    if (link.proc->tasks().has_queued() && link.proc->tasks().pump() == ipc::RingStatus::kCorrupt) {
      protocol_error(id, link, "task ring tail corrupt");
      continue;
    }
    if (link.proc->flush_tasks()) wakes_.fetch_add(1, std::memory_order_relaxed);
    link.dirty = link.proc->tasks().has_queued();
  }
}

void PoolLoop::reap(WorkerId id, std::int64_t now) {
  auto it = links_.find(id);
  if (it == links_.end()) return;
  Link& link = it->second;
  // Whatever the worker finished before it died still counts.
  poll_worker(id, link, now, SIZE_MAX);
  if (link.output_open) {
    link.proc->read_output([&](std::string_view line) { log_line(id, -1, line); });
  }
  report_dropped_output(link);
  const ExitStatus st = *link.proc->child().try_reap();
  supervision::ExitReport report{st, link.proc->header()->violation_syscall.load(),
                                 link.proc->pid(),
                                 link.proc->header()->diagnostics.fatal_report.load()};
  // Read before the cgroup goes with the WorkerProcess; only a SIGKILL can be an OOM kill.
  report.cgroup_oom = !st.exited && st.signal == SIGKILL && link.proc->cgroup() != nullptr &&
                      link.proc->cgroup()->oom_killed();
  // What the worker forked goes before the pool says the worker went: a submitter that learns
  // the attempt's outcome finds nothing of it still running.
  if (Status s = link.proc->destroy_cgroup(); !s) {
    log_->warn("[{}] worker {}: its cgroup stays for now: {}", opts_.name, report.pid, s.message());
  }
  const bool clean = st.exited && st.code == 0;
  if (clean) {
    log_->debug("[{}] worker {} stopped", opts_.name, report.pid);
  } else if (link.killed) {
    log_->info("[{}] worker {} {} (killed by the pool)", opts_.name, report.pid, describe(st));
  } else {
    const std::uint64_t running = link.proc->header()->started_task.load();
    const supervision::Classified c = supervision::classify_exit(report);
    const std::string why = c.outcome == Outcome::kLost ? std::string() : " (" + c.error + ")";
    log_->warn("[{}] worker {} {}{}{}", opts_.name, report.pid, describe(st), why,
               running ? " while running task " + std::to_string(running) : std::string());
  }
  core_->on_exit(id, report, now);
  for (int fd : {link.proc->pidfd(), link.proc->doorbell_fd(), link.proc->output_fd()}) {
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  }
  links_.erase(id);
}

void PoolLoop::after_iteration() {
  if (!started_reported_) {
    if (failed_.load()) {
      started_reported_ = true;
      started_.set_value(Status::error(Code::kPlugin, failure()));
    } else if (core_->ready_workers() > 0) {
      started_reported_ = true;
      started_.set_value(Status::ok());
    } else if (core_->init_failures() > 0 || core_->failed()) {
      // The first worker could not load or init: report its own words instead of
      // retrying a plugin that is broken the same way every time.
      set_failure(core_->failure());
      started_reported_ = true;
      started_.set_value(Status::error(Code::kPlugin, failure()));
    }
  }
  release_pending_max_payload();
  if (core_->failed() && !failed_.load()) set_failure(core_->failure());
  if (idle_waiters_.load() > 0) {
    const bool idle = core_->idle() && inbox_count_.load() == 0;
    std::lock_guard lock(idle_mu_);
    if (idle != idle_) {
      idle_ = idle;
      if (idle) idle_cv_.notify_all();
    }
  }
}

void PoolLoop::log_line(WorkerId id, int level, std::string_view raw) {
  auto it = links_.find(id);
  const int pid = it != links_.end() && it->second.proc ? it->second.proc->pid() : 0;
  if (it != links_.end() && it->second.output_limit) {
    if (!it->second.output_limit->admit(ipc::monotonic_ns())) {
      core_->on_output_dropped(1);
      return;
    }
    report_dropped_output(it->second);
  }
  const std::string text = log_text(raw, supervision::kMaxWorkerLogLine);
  switch (level) {
    case -1:
      log_->info("[{}] worker {} output: {}", opts_.name, pid, text);
      break;
    case 0:
      log_->debug("[{}] worker {} plugin: {}", opts_.name, pid, text);
      break;
    case 1:
      log_->info("[{}] worker {} plugin: {}", opts_.name, pid, text);
      break;
    case 2:
      log_->warn("[{}] worker {} plugin: {}", opts_.name, pid, text);
      break;
    default:
      log_->error("[{}] worker {} plugin: {}", opts_.name, pid, text);
      break;
  }
}

void PoolLoop::report_dropped_output(Link& link) {
  if (!link.output_limit) return;
  const std::uint64_t dropped = link.output_limit->take_unreported();
  if (dropped == 0) return;
  log_->warn("[{}] worker {}: {}", opts_.name, link.proc ? link.proc->pid() : 0,
             link.output_limit->report_text(dropped));
}

// ---- WorkerControl --------------------------------------------------------------------

WorkerId PoolLoop::spawn() {
  const WorkerId id = next_worker_++;
  Link link;
  auto proc = supervision::WorkerProcess::start(*spawner_, launch_);
  if (!proc) {
    link.spawn_error = proc.status().message();
    log_->error("[{}] cannot start a worker: {}", opts_.name, link.spawn_error);
    links_.emplace(id, std::move(link));
    spawn_failures_.push_back(id);
    return id;
  }
  link.proc = std::move(proc).value();
  link.proc->header()->spin_us.store(spin_us_);
  link.output_limit.emplace(opts_.output_lines_per_second, opts_.output_burst);
  const std::pair<int, EventKind> fds[] = {{link.proc->pidfd(), kPidfd},
                                           {link.proc->doorbell_fd(), kDoorbell},
                                           {link.proc->output_fd(), kOutput}};
  for (auto [fd, kind] : fds) {
    if (Status s = watch(epoll_.get(), fd, event_tag(id, kind)); !s) {
      // A worker whose exit or messages the loop cannot see must not run: it is killed and
      // counts as a spawn that failed.
      for (auto [added, unused] : fds) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, added, nullptr);
      link.spawn_error =
          "cannot watch worker " + std::to_string(link.proc->pid()) + ": " + s.message();
      log_->error("[{}] {}", opts_.name, link.spawn_error);
      link.proc.reset();  // SIGKILLs and reaps it
      links_.emplace(id, std::move(link));
      spawn_failures_.push_back(id);
      return id;
    }
  }
  log_->debug("[{}] spawned worker {}", opts_.name, link.proc->pid());
  links_.emplace(id, std::move(link));
  return id;
}

void PoolLoop::send_message(WorkerId w, std::uint16_t kind) {
  auto it = links_.find(w);
  if (it == links_.end() || !it->second.proc || it->second.broken) return;
  Link& link = it->second;
  if (link.proc->tasks().send(kind, scratch_) == ipc::RingStatus::kCorrupt) {
    protocol_error(w, link, "task ring tail corrupt");
    return;
  }
  link.dirty = true;
}

void PoolLoop::send_task(WorkerId w, const TaskRecord& task, std::uint32_t attempt,
                         std::int64_t deadline_ns) {
  ipc::encode(ipc::TaskMsgView{task.id, attempt, deadline_ns / kMsNs, task.type, task.payload},
              &scratch_);
  send_message(w, static_cast<std::uint16_t>(ipc::MsgKind::kTask));
}

void PoolLoop::send_cancel(WorkerId w, std::uint64_t task_id) {
  ipc::encode(ipc::CancelMsg{task_id}, &scratch_);
  send_message(w, static_cast<std::uint16_t>(ipc::MsgKind::kCancel));
}

void PoolLoop::raise_cancel_flag(WorkerId w, std::uint64_t task_id) {
  auto it = links_.find(w);
  if (it != links_.end() && it->second.proc) {
    it->second.proc->header()->cancel_task.store(task_id, std::memory_order_release);
  }
}

void PoolLoop::send_stop(WorkerId w) {
  ipc::encode(ipc::StopMsg{}, &scratch_);
  send_message(w, static_cast<std::uint16_t>(ipc::MsgKind::kStop));
}

void PoolLoop::kill(WorkerId w) {
  auto it = links_.find(w);
  if (it == links_.end() || !it->second.proc) return;
  it->second.killed = true;
  it->second.proc->child().signal(SIGKILL);
}

std::uint64_t PoolLoop::started_task(WorkerId w) {
  auto it = links_.find(w);
  if (it == links_.end() || !it->second.proc) return 0;
  return it->second.proc->header()->started_task.load(std::memory_order_acquire);
}

std::int32_t PoolLoop::pid(WorkerId w) {
  auto it = links_.find(w);
  if (it == links_.end() || !it->second.proc) return 0;
  return it->second.proc->pid();
}

std::int64_t PoolLoop::heartbeat_ms(WorkerId w) {
  auto it = links_.find(w);
  if (it == links_.end() || !it->second.proc) return ipc::monotonic_ms();
  return static_cast<std::int64_t>(
      it->second.proc->header()->heartbeat_ms.load(std::memory_order_relaxed));
}

std::uint64_t PoolLoop::rss_bytes(WorkerId w) {
  const std::int32_t p = pid(w);
  return p > 0 ? supervision::rss_bytes(p) : 0;
}

std::int64_t PoolLoop::cpu_ns(WorkerId w) {
  const std::int32_t p = pid(w);
  return p > 0 ? supervision::cpu_ns(p) : -1;
}

bool PoolLoop::request_backtrace(WorkerId w) {
  auto it = links_.find(w);
  if (it == links_.end() || !it->second.proc || it->second.killed) return false;
  supervision::WorkerProcess& proc = *it->second.proc;
  ipc::DiagnosticArea& area = proc.header()->diagnostics;
  ipc::request_backtrace(area);
  // Each thread by its tid, the task thread first. The pid cannot have been reused: the
  // worker is our child and is reaped only in reap(). A thread that ends meanwhile is not
  // counted; one started meanwhile is not asked.
  const pid_t pid = proc.pid();
  std::uint32_t signalled = 0;
  for (pid_t tid : supervision::thread_ids(pid, ipc::kMaxBacktraceThreads)) {
    if (::syscall(SYS_tgkill, pid, tid, ipc::backtrace_signal()) == 0) ++signalled;
  }
  if (signalled == 0) return false;
  ipc::expect_backtraces(area, signalled);
  return true;
}

std::optional<std::string> PoolLoop::backtrace(WorkerId w, ipc::BacktraceRead read) {
  auto it = links_.find(w);
  if (it == links_.end() || !it->second.proc) return std::nullopt;
  return ipc::take_backtrace(it->second.proc->header()->diagnostics, read);
}

// ---- any thread -----------------------------------------------------------------------

Result<Ticket> PoolLoop::submit(std::string type, std::string payload, SubmitOptions options,
                                std::uint64_t id) {
  if (failed_.load()) return Status::error(Code::kClosed, "pool failed: " + failure());
  if (draining_.load()) {
    return Status::error(Code::kClosed, "pool '" + opts_.name + "' is draining (resume it)");
  }
  if (options.timeout) {  // a deadline must be reachable and must not overflow
    const std::int64_t ms = options.timeout->count(), max = max_timeout_ms_.load();
    if (ms < 1 || ms > max) {
      return Status::invalid("timeout: " + std::to_string(ms) + " ms is outside 1 ms .. " +
                             std::to_string(max) + " ms (max_timeout)");
    }
  }
  if (std::find(task_types_.begin(), task_types_.end(), type) == task_types_.end()) {
    std::string served;
    for (const auto& t : task_types_) served += (served.empty() ? "" : ", ") + t;
    return Status::invalid("unknown task type '" + type + "' (this pool serves: " + served + ")");
  }
  if (const std::uint64_t max = max_payload_.load(std::memory_order_relaxed);
      payload.size() > max) {
    return Status::too_large("payload of " + std::to_string(payload.size()) +
                             " bytes exceeds max_payload (" + std::to_string(max) + " bytes)");
  }
  const std::size_t capacity = queue_capacity_.load(std::memory_order_relaxed);
  if (admitted_.fetch_add(1, std::memory_order_relaxed) >= capacity) {
    admitted_.fetch_sub(1, std::memory_order_relaxed);
    return Status::error(Code::kQueueFull, "queue_full: " + std::to_string(capacity) +
                                               " tasks are waiting in pool '" + opts_.name + "'");
  }
  if (id == 0)
    id = (opts_.task_ids ? *opts_.task_ids : next_task_id_).fetch_add(1, std::memory_order_relaxed);
  auto rec =
      std::make_shared<TaskRecord>(id, std::move(type), std::move(payload), std::move(options));
  Ticket ticket(rec, weak_from_this());
  {
    // accepting_ is read under the inbox's lock, which close() takes to clear it: a task is
    // either in the inbox before close()'s command (the loop runs it), or refused here.
    std::lock_guard lock(inbox_mu_);
    if (!accepting_.load()) {
      admitted_.fetch_sub(1, std::memory_order_relaxed);
      return Status::error(Code::kClosed, "pool is closing");
    }
    inbox_tasks_.push_back(std::move(rec));
    inbox_count_.fetch_add(1);
  }
  ring_inbox_bell();
  return ticket;
}

void PoolLoop::post(std::function<void(PoolCore&, std::int64_t)> fn) {
  {
    std::lock_guard lock(inbox_mu_);
    inbox_cmds_.push_back(std::move(fn));
    inbox_count_.fetch_add(1);
    cmds_posted_.fetch_add(1, std::memory_order_release);
  }
  ring_inbox_bell();
}

void PoolLoop::ring_inbox_bell() {
  // Only the first producer to find the loop asleep pays the write: the exchange clears the
  // flag, so the others see an awake loop (it will find their work in the inbox).
  if (sleeping_.load() && sleeping_.exchange(false)) {
    inbox_bell_.signal();
    wakes_.fetch_add(1, std::memory_order_relaxed);
  }
}

bool PoolLoop::cancel(const TaskPtr& task) {
  if (loop_ended_.load()) return false;
  return query<bool>([task](PoolCore& core, std::int64_t now) { return core.cancel(task, now); });
}

bool PoolLoop::wait_idle_for(std::int64_t timeout_ms) {
  idle_waiters_.fetch_add(1);
  std::unique_lock lock(idle_mu_);
  if (!loop_ended_.load()) {
    idle_ = false;  // possibly stale: the loop only tracks it while somebody waits
    lock.unlock();
    post([](PoolCore&, std::int64_t) {});  // make the loop re-evaluate idleness now
    lock.lock();
  }
  bool ok = true;
  if (timeout_ms < 0) {
    idle_cv_.wait(lock, [&] { return idle_; });
  } else {
    ok = idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return idle_; });
  }
  idle_waiters_.fetch_sub(1);
  return ok;
}

bool PoolLoop::signal_worker(std::int32_t pid, int sig) {
  return query<bool>([this, pid, sig](PoolCore&, std::int64_t) {
    for (auto& [id, link] : links_) {
      if (link.proc && link.proc->pid() == pid && !link.killed) {
        return link.proc->child().signal(sig);
      }
    }
    return false;
  });
}

void PoolLoop::stop_accepting() {
  std::lock_guard lock(inbox_mu_);
  accepting_.store(false);
}

void PoolLoop::set_failure(std::string why) {
  {
    std::lock_guard lock(failure_mu_);
    failure_ = std::move(why);
  }
  failed_.store(true, std::memory_order_release);
}

std::string PoolLoop::failure() const {
  std::lock_guard lock(failure_mu_);
  return failure_;
}

void PoolLoop::close() {
  stop_accepting();
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) return;  // from a callback: cannot join
  post([](PoolCore& core, std::int64_t now) { core.close(now); });
  thread_.join();
}

}  // namespace sandpool::core
