// PoolCore, worker deaths: kills (a hung worker's after its backtrace), a worker's exit
// and who pays for it (death_charge.hpp), init failures, restart intensity and crash_loop,
// and the failed pool.
#include <algorithm>
#include <string>

#include <sandpool/base/log_text.hpp>
#include <sandpool/ipc/layout.hpp>

#include "core/death_charge.hpp"
#include "core/pool_core.hpp"
#include "core/pool_core_internal.hpp"

namespace sandpool::core {

using detail::kMaxFreeRequeues;
using detail::to_ns;

void PoolCore::on_worker_error(WorkerId wid, std::string text) {
  if (Worker* w = find(wid)) w->last_error = std::move(text);
}

void PoolCore::on_protocol_error(WorkerId wid, std::string what) {
  if (Worker* w = find(wid)) {
    kill_worker(*w, KillReason::kProtocolError, Outcome::kProtocolError, "protocol_error: " + what,
                0, clock_ns_);
  }
}

void PoolCore::kill_worker(Worker& w, KillReason why, Outcome outcome, std::string error,
                           std::uint64_t task_id, std::int64_t) {
  if (w.is<Killing>()) return;  // already on its way out
  w.state = Killing{why, outcome, std::move(error), task_id, 0};
  ctl_.kill(w.id);
}

void PoolCore::kill_hung_worker(Worker& w, KillReason why, Outcome outcome, std::string error,
                                std::uint64_t task_id, std::int64_t now) {
  if (w.is<Killing>()) return;
  if (opts_.backtrace_grace.count() <= 0 || !ctl_.request_backtrace(w.id)) {
    kill_worker(w, why, outcome, std::move(error), task_id, now);
    return;
  }
  // Decided now, carried out when the answer is in or the grace is over (the loop keeps
  // serving the other workers meanwhile): observe_backtraces() sends the SIGKILL.
  w.state = Killing{why, outcome, std::move(error), task_id, now + to_ns(opts_.backtrace_grace)};
  workers_.await_backtrace();
}

void PoolCore::observe_backtraces(std::int64_t now) {
  if (workers_.backtraces_awaited() == 0) return;
  for (auto& [wid, w] : workers_) {
    Killing* k = w.killing();
    if (k == nullptr || k->backtrace_due_ns == 0) continue;
    if (now < k->backtrace_due_ns && !ctl_.backtrace(wid, ipc::BacktraceRead::kComplete)) continue;
    collect_backtrace(w, *k);
    ctl_.kill(wid);
  }
}

void PoolCore::collect_backtrace(Worker& w, Killing& k) {
  const std::int32_t pid = ctl_.pid(w.id);
  const std::string whose =
      "worker " + std::to_string(pid) +
      (k.task != 0 ? " (task " + std::to_string(k.task) + ")" : std::string(" (idle)"));
  k.backtrace_due_ns = 0;
  workers_.backtrace_collected();
  if (std::optional<std::string> bt = ctl_.backtrace(w.id, ipc::BacktraceRead::kWhatArrived)) {
    w.backtrace = std::move(*bt);
    // Worker-written: one escaped line in the log (the account keeps the frames as sent).
    log(2, whose + " backtrace before the kill (" + k.error +
               "): " + log_text(w.backtrace, 2 * ipc::kBacktraceBytes));
  } else {
    log(2, whose + " gave no backtrace within " + std::to_string(opts_.backtrace_grace.count()) +
               " ms (" + k.error + ")");
  }
}

void PoolCore::on_exit(WorkerId wid, const supervision::ExitReport& report, std::int64_t now) {
  clock_ns_ = now;
  auto node = workers_.extract(wid);
  if (node.empty()) return;
  Worker& w = node.mapped();
  Killing* k = w.killing();
  if (k != nullptr && k->backtrace_due_ns != 0) collect_backtrace(w, *k);  // died first
  const supervision::Classified c = k != nullptr ? supervision::Classified{k->outcome, k->error}
                                                 : supervision::classify_exit(report);
  const std::uint64_t charged = settle_dead_ring(w, c, report.pid, now);

  const bool unwanted = k != nullptr && k->why == KillReason::kUnwanted;
  if (w.ready_ns == 0 && !unwanted) {
    const std::uint32_t failures = workers_.note_init_failure();
    failure_ = k != nullptr            ? k->error
               : !w.last_error.empty() ? w.last_error
                                       : "worker exited during init: " + describe(report.status);
    if (failures >= opts_.max_init_failures) {
      enter_failed("plugin init failed " + std::to_string(failures) +
                   " times in a row: " + failure_);
    } else if (workers_.live() < workers_.target()) {
      workers_.back_off_init_failure(now);
    }
  } else if (w.ready_ns != 0) {
    // Replaced because something went wrong (neither asked to stop nor unwanted), and
    // whether it counts toward crash_loop (KillReason; an unasked exit always does).
    bool replaced = true;
    bool counted = true;
    if (k != nullptr) {
      replaced = k->why != KillReason::kStopTimeout && k->why != KillReason::kShutdown;
      counted = counts_as_restart(k->why);
      if (k->why == KillReason::kStopTimeout) log(2, k->error);
    } else if (w.is<Stopping>()) {
      replaced = counted = false;
    }
    if (replaced) {
      ++stats_.restarts;
      if (c.outcome == Outcome::kLost) ++stats_.lost;
    }
    if (counted) note_restart(now);
  }
  if (opts_.on_event) {
    const std::string what = c.error.empty() ? describe(report.status) : c.error;
    emit({PoolEvent::Kind::kWorkerExited, charged, report.pid, TaskState::kQueued,
          DeadReason::kNone, c.outcome, 0, what});
  }
  adjust_worker_count(now);
  settle(now);
  advance_rolling_restart(now);
}

std::uint64_t PoolCore::settle_dead_ring(Worker& w, const supervision::Classified& c,
                                         std::int32_t pid, std::int64_t now) {
  const Killing* k = w.killing();
  std::vector<RingEntry> view;
  view.reserve(w.ring.size());
  for (const InFlight& f : w.ring) view.push_back({f.task->id, f.ended || f.task->decided});
  const std::optional<std::size_t> charged = charged_entry(view, k != nullptr ? k->task : 0);
  const std::uint64_t charged_id = charged ? w.ring[*charged].task->id : 0;
  std::vector<TaskPtr> never_started;
  for (std::size_t i = 0; i < w.ring.size(); ++i) {
    InFlight& f = w.ring[i];
    --in_flight_total_;
    if (gates_.on()) gates_.left_ring(*f.task);
    if (view[i].ended) continue;
    if (charged && i == *charged) {
      if (f.task->cancel_requested) {
        end_task(f.task, TaskState::kCancelled, DeadReason::kNone, {}, "cancelled while running",
                 CancelReason::kUser);
      } else {
        const bool killed_for_it = k != nullptr && k->task == f.task->id;
        end_attempt(f, c.outcome, c.error, pid, now,
                    killed_for_it ? std::move(w.backtrace) : std::string());
      }
    } else if (f.task->cancel_requested) {
      end_task(f.task, TaskState::kCancelled, DeadReason::kNone, {}, "cancelled before it started",
               CancelReason::kUser);
    } else if (!charged && ++f.task->free_requeues > kMaxFreeRequeues) {
      // A death charged to nobody (its front had ended already) puts the ring back for free;
      // bounded, so no worker can keep a task from ever running out of attempts.
      end_attempt(
          f, Outcome::kLost,
          "its worker died " + std::to_string(f.task->free_requeues) + " times before it started",
          pid, now);
    } else {
      never_started.push_back(f.task);  // no attempt counted
      // nor a journaled start (one that never started has none to undo)
      if (f.start_journaled && journal_.requeued) journal_.requeued(*f.task);
    }
  }
  w.ring.clear();
  // Back at the front of the queue, in their original order: the backlog behind the ring.
  backlogged_ -= w.backlog.size();
  for (auto it = w.backlog.rbegin(); it != w.backlog.rend(); ++it) to_queue(*it, true, now);
  w.backlog.clear();
  for (auto it = never_started.rbegin(); it != never_started.rend(); ++it) to_queue(*it, true, now);
  return charged_id;
}

void PoolCore::note_restart(std::int64_t now) {
  // In crash_loop the next respawn waits its backoff (WorkerSet::note_restart).
  if (workers_.note_restart(now)) {
    log(3, "entered crash_loop: " + std::to_string(workers_.recent_restarts()) +
               " worker restarts within " + std::to_string(opts_.restart_window.count()) +
               " ms; replacements now back off");
    // Tasks that asked to fail fast do not wait the crash loop out.
    for (const TaskPtr& t :
         queue_.remove_if([](const TaskRecord& r) { return r.opts.fail_fast(); })) {
      end_task(t, TaskState::kDeadLettered, DeadReason::kCrashLoop, {},
               "the pool entered crash_loop and the task asked to fail fast");
    }
  }
}

void PoolCore::enter_failed(std::string why) {
  failed_ = true;
  failure_ = std::move(why);
  workers_.cancel_respawn();
  dead_letter_waiting(DeadReason::kCrashLoop, failure_);
}

}  // namespace sandpool::core
