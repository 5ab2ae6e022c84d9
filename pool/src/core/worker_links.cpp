#include "core/worker_links.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include <spdlog/spdlog.h>

#include <sandpool/base/log_text.hpp>
#include <sandpool/ipc/diagnostics.hpp>

#include <sandpool/pool/proc_stats.hpp>
#include "core/pool_core_internal.hpp"
#include "supervision/exit_classifier.hpp"
#include "supervision/seccomp_audit.hpp"

namespace sandpool::core {
namespace {

constexpr std::size_t kResultBudget = 4096;  // messages per worker per iteration
enum EventKind : std::uint64_t { kPidfd = 0, kDoorbell = 1, kOutput = 2 };

std::uint64_t event_tag(WorkerId id, EventKind k) { return id * 4 + k; }

}  // namespace

WorkerLinks::WorkerLinks(Config config, Poller& poller) : cfg_(std::move(config)), poller_(poller) {
  scratch_.reserve(ipc::kEncodeScratchBytes);  // kept for every frame: encoded uncounted
}

WorkerLinks::~WorkerLinks() = default;

// ---- the loop's steps -----------------------------------------------------------------

bool WorkerLinks::poll_all(std::int64_t now) {
  bool work = false;
  for (auto& [id, link] : links_) work |= poll_worker(id, link, now, kResultBudget);
  return work;
}

bool WorkerLinks::poll_one(WorkerId w, std::int64_t now) {
  auto it = links_.find(w);
  return it != links_.end() && poll_worker(w, it->second, now, kResultBudget);
}

bool WorkerLinks::report_failed_spawns(std::int64_t now) {
  bool any = false;
  for (WorkerId id : std::exchange(spawn_failures_, {})) {
    auto it = links_.find(id);
    if (it == links_.end()) continue;
    core_->on_worker_error(id, it->second.spawn_error);
    links_.erase(it);
    core_->on_exit(id, {ExitStatus{true, 127, 0}, 0, 0}, now);
    any = true;
  }
  return any;
}

void WorkerLinks::flush() {
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

bool WorkerLinks::prepare_sleep() {
  for (auto& [id, link] : links_) {
    if (!link.proc || link.broken) continue;
    if (!link.proc->results().ring().prepare_sleep()) return false;
    ipc::MessageSender& tasks = link.proc->tasks();
    if (tasks.has_queued() && !tasks.ring().prepare_wait(tasks.ring().max_record_payload())) {
      return false;
    }
  }
  return true;
}

void WorkerLinks::cancel_sleep() {
  for (auto& [id, link] : links_) {
    if (link.proc && !link.broken) {
      link.proc->results().ring().cancel_sleep();
      link.proc->tasks().ring().cancel_wait();
    }
  }
}

void WorkerLinks::on_event(std::uint64_t tag) {
  const WorkerId id = tag / 4;
  const auto kind = static_cast<EventKind>(tag % 4);
  auto it = links_.find(id);
  if (it == links_.end() || !it->second.proc) return;
  Link& link = it->second;
  switch (kind) {
    case kDoorbell:
      if (!link.proc->doorbell().drain()) {  // the worker closed its end: rings no more
        link.doorbell_open = false;
        unwatch(id, link, link.proc->doorbell_fd());
      }
      break;
    case kOutput:
      if (!link.proc->read_output([&](std::string_view line) { log_line(id, -1, line); })) {
        link.output_open = false;
        unwatch(id, link, link.proc->output_fd());
      }
      break;
    case kPidfd:
      if (link.proc->child().try_reap()) exited_.push_back(id);
      break;
    default:
      break;
  }
}

void WorkerLinks::reap_exited(std::int64_t now) {
  for (WorkerId id : std::exchange(exited_, {})) reap(id, now);
}

bool WorkerLinks::signal(std::int32_t pid, int sig) {
  for (auto& [id, link] : links_) {
    if (link.proc && link.proc->pid() == pid && !link.killed) return link.proc->child().signal(sig);
  }
  return false;
}

// ---- watching -------------------------------------------------------------------------

Status WorkerLinks::watch(WorkerId id, Link& link) {
  const std::pair<int, EventKind> fds[] = {{link.proc->pidfd(), kPidfd},
                                           {link.proc->doorbell_fd(), kDoorbell},
                                           {link.proc->output_fd(), kOutput}};
  for (std::size_t i = 0; i < std::size(fds); ++i) {
    if (Status s = poller_.add(fds[i].first, event_tag(id, fds[i].second)); !s) {
      // Failures here are ignored: the fds close with the process, which takes them out of
      // the epoll set as well.
      for (std::size_t j = 0; j < i; ++j) (void)poller_.remove(fds[j].first);
      return s;
    }
  }
  return Status::ok();
}

void WorkerLinks::unwatch(WorkerId id, Link& link, int fd) {
  Status s = poller_.remove(fd);
  if (s || link.killed) return;
  // Still watched, the fd would wake the loop at every turn: the worker goes instead.
  cfg_.log->error("[{}] worker {}: cannot stop watching its fd {}: {}; killing it", cfg_.pool,
                  link.proc->pid(), fd, s.message());
  kill(id);
}

// ---- reading workers ------------------------------------------------------------------

bool WorkerLinks::poll_worker(WorkerId id, Link& link, std::int64_t now, std::size_t budget) {
  if (!link.proc || link.broken) return false;
  std::size_t n = 0;
  std::uint16_t kind = 0;
  while (n < budget) {
    const ipc::RingStatus s = link.proc->results().next(&kind, &frame_);
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

void WorkerLinks::handle_message(WorkerId id, Link& link, std::uint16_t kind, std::int64_t now) {
  if (Status s = check_message(kind, frame_, cfg_.limits, &message_); !s) {
    return protocol_error(id, link, s.message());
  }
  if (auto* r = std::get_if<ipc::ResultMsg>(&message_)) {
    if (!core_->on_result(id, *r, now)) {
      protocol_error(id, link, "result for task " + std::to_string(r->id) + " not in flight");
    }
  } else if (auto* p = std::get_if<ipc::ProgressMsg>(&message_)) {
    if (!core_->on_progress(id, *p)) {
      protocol_error(id, link, "progress for task " + std::to_string(p->id) + " not in flight");
    }
  } else if (auto* l = std::get_if<ipc::LogMsg>(&message_)) {
    log_line(id, l->level, l->text);
    if (l->level >= 3) core_->on_worker_error(id, log_text(l->text));
  } else {
    on_ready(id, link, std::get<ipc::ReadyMsg>(message_), now);
  }
}

void WorkerLinks::on_ready(WorkerId id, Link& link, ipc::ReadyMsg& m, std::int64_t now) {
  if (link.ready) return protocol_error(id, link, "a second Ready message");
  link.ready = true;
  if (cfg_.on_declared) cfg_.on_declared(m.task_types);
  cfg_.log->debug("[{}] worker {} ready, isolation {}", cfg_.pool, link.proc->pid(), m.isolation);
  if (!core_->on_ready(id, now, cfg_.isolation_prefix + m.isolation + cfg_.isolation_suffix)) {
    protocol_error(id, link, "a second Ready");
  }
}

void WorkerLinks::protocol_error(WorkerId id, Link& link, const std::string& what) {
  if (link.broken) return;
  link.broken = true;
  const std::string safe = log_text(what);  // may quote what the worker wrote
  cfg_.log->warn("[{}] worker {} protocol_error: {}; killing it", cfg_.pool,
                 link.proc ? link.proc->pid() : 0, safe);
  core_->on_protocol_error(id, safe);
}

void WorkerLinks::reap(WorkerId id, std::int64_t now) {
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
  supervision::ExitReport report =
      supervision::read_exit_report(*link.proc->header(), st, link.proc->pid());
  if (!st.exited && st.signal == SIGSYS) {
    // Killed by SIGSYS without its reporter: only the kernel's record can name the call.
    // A second of slack: the kernel log's clock and CLOCK_MONOTONIC may drift apart a little.
    const auto started_us = static_cast<std::uint64_t>(link.started_ns / 1000);
    supervision::AuditLookup audit = supervision::find_seccomp_record(
        report.pid, started_us > 1'000'000 ? started_us - 1'000'000 : 0);
    report.audited_syscall = audit.syscall;
    report.audit_note = std::move(audit.note);
  }
  // Read before the cgroup goes with the WorkerProcess; only a SIGKILL can be an OOM kill.
  report.cgroup_oom = !st.exited && st.signal == SIGKILL && link.proc->cgroup() != nullptr &&
                      link.proc->cgroup()->oom_killed();
  // What the worker forked goes before the pool says the worker went: a submitter that learns
  // the attempt's outcome finds nothing of it still running.
  if (Status s = link.proc->destroy_cgroup(); !s) {
    cfg_.log->warn("[{}] worker {}: its cgroup stays for now: {}", cfg_.pool, report.pid,
                   s.message());
  }
  log_exit(link, report);
  core_->on_exit(id, report, now);
  // The fds close with the process just after, which takes them out of the epoll set even
  // if a removal here fails; say so, it would be a bug of ours.
  std::vector<int> fds{link.proc->pidfd()};
  if (link.doorbell_open) fds.push_back(link.proc->doorbell_fd());
  if (link.output_open) fds.push_back(link.proc->output_fd());
  for (int fd : fds) {
    if (Status s = poller_.remove(fd); !s) {
      cfg_.log->warn("[{}] worker {}: {}", cfg_.pool, report.pid, s.message());
    }
  }
  links_.erase(id);
}

void WorkerLinks::log_exit(const Link& link, const supervision::ExitReport& report) {
  const ExitStatus& st = report.status;
  if (st.exited && st.code == 0) {
    cfg_.log->debug("[{}] worker {} stopped", cfg_.pool, report.pid);
  } else if (link.killed) {
    cfg_.log->info("[{}] worker {} {} (killed by the pool)", cfg_.pool, report.pid, describe(st));
  } else {
    const std::uint64_t running = link.proc->header()->started_task.load();
    const supervision::Classified c = supervision::classify_exit(report);
    const std::string why = c.outcome == Outcome::kLost ? std::string() : " (" + c.error + ")";
    cfg_.log->warn("[{}] worker {} {}{}{}", cfg_.pool, report.pid, describe(st), why,
                   running ? " while running task " + std::to_string(running) : std::string());
  }
}

void WorkerLinks::log_line(WorkerId id, int level, std::string_view raw) {
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
  spdlog::logger& log = *cfg_.log;
  switch (level) {
    case -1:
      log.info("[{}] worker {} output: {}", cfg_.pool, pid, text);
      break;
    case 0:
      log.debug("[{}] worker {} plugin: {}", cfg_.pool, pid, text);
      break;
    case 1:
      log.info("[{}] worker {} plugin: {}", cfg_.pool, pid, text);
      break;
    case 2:
      log.warn("[{}] worker {} plugin: {}", cfg_.pool, pid, text);
      break;
    default:
      log.error("[{}] worker {} plugin: {}", cfg_.pool, pid, text);
      break;
  }
}

void WorkerLinks::report_dropped_output(Link& link) {
  if (!link.output_limit) return;
  const std::uint64_t dropped = link.output_limit->take_unreported();
  if (dropped == 0) return;
  cfg_.log->warn("[{}] worker {}: {}", cfg_.pool, link.proc ? link.proc->pid() : 0,
                 link.output_limit->report_text(dropped));
}

// ---- WorkerControl --------------------------------------------------------------------

WorkerId WorkerLinks::spawn() {
  const WorkerId id = next_worker_++;
  Link link;
  auto proc = supervision::WorkerProcess::start(*cfg_.spawner, launch_);
  if (!proc) {
    link.spawn_error = proc.status().message();
    cfg_.log->error("[{}] cannot start a worker: {}", cfg_.pool, link.spawn_error);
    links_.emplace(id, std::move(link));
    spawn_failures_.push_back(id);
    return id;
  }
  link.proc = std::move(proc).value();
  link.started_ns = ipc::monotonic_ns();
  link.proc->header()->spin_us.store(cfg_.spin_us);
  link.output_limit.emplace(cfg_.output_lines_per_second, cfg_.output_burst);
  if (Status s = watch(id, link); !s) {
    // A worker whose exit or messages the loop cannot see must not run: it is killed and
    // counts as a spawn that failed.
    link.spawn_error =
        "cannot watch worker " + std::to_string(link.proc->pid()) + ": " + s.message();
    cfg_.log->error("[{}] {}", cfg_.pool, link.spawn_error);
    link.proc.reset();  // SIGKILLs and reaps it
    links_.emplace(id, std::move(link));
    spawn_failures_.push_back(id);
    return id;
  }
  cfg_.log->debug("[{}] spawned worker {}", cfg_.pool, link.proc->pid());
  links_.emplace(id, std::move(link));
  return id;
}

WorkerLinks::Link* WorkerLinks::live(WorkerId w) {
  auto it = links_.find(w);
  return it == links_.end() || !it->second.proc ? nullptr : &it->second;
}

void WorkerLinks::send_message(WorkerId w, std::uint16_t kind) {
  Link* link = live(w);
  if (link == nullptr || link->broken) return;
  if (link->proc->tasks().send(kind, scratch_) == ipc::RingStatus::kCorrupt) {
    protocol_error(w, *link, "task ring tail corrupt");
    return;
  }
  link->dirty = true;
}

void WorkerLinks::send_task(WorkerId w, const TaskRecord& task, std::uint32_t attempt,
                            std::int64_t deadline_ns) {
  ipc::encode(
      ipc::TaskMsgView{task.id, attempt, deadline_ns / detail::kMsNs, task.type(), task.payload()},
      &scratch_);
  send_message(w, static_cast<std::uint16_t>(ipc::MsgKind::kTask));
}

void WorkerLinks::send_cancel(WorkerId w, std::uint64_t task_id) {
  ipc::encode(ipc::CancelMsg{task_id}, &scratch_);
  send_message(w, static_cast<std::uint16_t>(ipc::MsgKind::kCancel));
}

void WorkerLinks::raise_cancel_flag(WorkerId w, std::uint64_t task_id) {
  if (Link* link = live(w)) {
    link->proc->header()->cancel_task.store(task_id, std::memory_order_release);
  }
}

void WorkerLinks::send_stop(WorkerId w) {
  ipc::encode(ipc::StopMsg{}, &scratch_);
  send_message(w, static_cast<std::uint16_t>(ipc::MsgKind::kStop));
}

void WorkerLinks::kill(WorkerId w) {
  Link* link = live(w);
  if (link == nullptr) return;
  link->killed = true;
  link->proc->child().signal(SIGKILL);
}

std::uint64_t WorkerLinks::started_task(WorkerId w) {
  Link* link = live(w);
  return link ? link->proc->header()->started_task.load(std::memory_order_acquire) : 0;
}

std::int32_t WorkerLinks::pid(WorkerId w) {
  Link* link = live(w);
  return link ? link->proc->pid() : 0;
}

std::int64_t WorkerLinks::heartbeat_ms(WorkerId w) {
  Link* link = live(w);
  if (link == nullptr) return ipc::monotonic_ms();
  return static_cast<std::int64_t>(
      link->proc->header()->heartbeat_ms.load(std::memory_order_relaxed));
}

std::uint64_t WorkerLinks::rss_bytes(WorkerId w) {
  const std::int32_t p = pid(w);
  return p > 0 ? supervision::rss_bytes(p) : 0;
}

std::int64_t WorkerLinks::cpu_ns(WorkerId w) {
  const std::int32_t p = pid(w);
  return p > 0 ? supervision::cpu_ns(p) : -1;
}

bool WorkerLinks::request_backtrace(WorkerId w) {
  Link* link = live(w);
  if (link == nullptr || link->killed) return false;
  supervision::WorkerProcess& proc = *link->proc;
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

std::optional<std::string> WorkerLinks::backtrace(WorkerId w, ipc::BacktraceRead read) {
  Link* link = live(w);
  if (link == nullptr) return std::nullopt;
  return ipc::take_backtrace(link->proc->header()->diagnostics, read);
}

std::int64_t WorkerLinks::steady_ns(std::int64_t now) {
  if (in_passes_ && pass_wall_ms_ != kWallUnread) return std::max(now, pass_steady_ns_);
  return std::max(now, ipc::monotonic_ns());
}

std::int64_t WorkerLinks::wall_ms() {
  if (!in_passes_) return WorkerControl::wall_ms();
  if (pass_wall_ms_ == kWallUnread) {
    pass_wall_ms_ = WorkerControl::wall_ms();
    pass_steady_ns_ = ipc::monotonic_ns();
  }
  return pass_wall_ms_;
}

}  // namespace sandpool::core
