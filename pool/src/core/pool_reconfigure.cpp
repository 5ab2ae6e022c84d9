// Pool::reconfigure on both sides: PoolLoop validates the new options on the caller's
// thread and plans the workers' launch (plan_launch), swaps the submit-side limits and the
// launch spec on the loop thread;
// PoolCore applies the rest and rolls the workers (docs/operations.md, "Reload").
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <sandpool/sandbox/worker_args.hpp>

#include "core/host_facts.hpp"
#include "core/plan_launch.hpp"
#include "core/pool_core.hpp"
#include "core/pool_core_internal.hpp"
#include "core/pool_loop.hpp"

namespace sandpool::core {

// ---- PoolCore -------------------------------------------------------------------------

void PoolCore::reconfigure(const PoolOptions& next, bool replace_workers, std::int64_t now) {
  clock_ns_ = now;
  const FlowLimits flow_before = opts_.flow;
  // Both parts a reconfigure applies, whole (pool_options.hpp); identity and wiring stay.
  opts_.worker_spec() = next.worker_spec();
  opts_.live() = next.live();
  dispatcher_.set_strategy(opts_.dispatch);
  queue_.set_tenants(opts_.tenants);
  if (!(opts_.flow == flow_before)) {
    std::vector<TaskPtr> back = gates_.configure(opts_.flow, now, ring_entries_by_type());
    for (auto it = back.rbegin(); it != back.rend(); ++it) to_queue(std::move(*it), true, now);
  }
  // Aging on, off or at a new interval: the queue is looked at again now.
  next_aging_ns_ = opts_.aging_interval.count() > 0 && !queue_.empty() ? now : INT64_MAX;
  workers_.set_intensity_limits({opts_.max_restarts, opts_.restart_window, opts_.crash_backoff_base,
                                 opts_.crash_backoff_max, opts_.stable_after});
  ledger_.set_bounds({opts_.task_records_max, detail::to_ns(opts_.task_records_max_age),
                      static_cast<std::size_t>(opts_.task_records_max_bytes)},
                     opts_.dead_letter_capacity, now);
  // A shorter heartbeat interval takes effect at the next sweep, not a long one away.
  next_sweep_ns_ = std::min(next_sweep_ns_, now + detail::to_ns(opts_.heartbeat_interval));
  if (replace_workers && !closing_ && !failed_) {
    if (const std::size_t old = workers_.new_generation(); old > 0) {
      log(1, "reconfigured: replacing " + std::to_string(old) +
                 " worker(s) with the new launch spec, one at a time");
    }
  }
  // The autoscaler (on, off, new bounds) looks again now.
  autoscaler_.configure(opts_.autoscale, opts_.worker_bounds, now);
  std::uint32_t want = opts_.workers;
  if (autoscaler_.enabled()) want = autoscaler_.clamp(want);
  if (want != workers_.target()) {
    note_target(want, "reconfigured to " + std::to_string(want));
    set_target(want, now);
  } else {
    adjust_worker_count(now);
  }
  // A lower recycle.max_tasks applies to idle workers too: no result would recycle them.
  for (auto& [wid, w] : workers_) recycle_if_due(w, now);
  advance_rolling_restart(now);
  settle(now);
}

}  // namespace sandpool::core

namespace sandpool {

Status check_worker_count(const PoolOptions& o) {
  const AutoscalePolicy& a = o.autoscale;
  if (o.worker_bounds.min > o.worker_bounds.max) {
    return Status::invalid("worker_bounds: min " + std::to_string(o.worker_bounds.min) +
                           " is greater than max " + std::to_string(o.worker_bounds.max));
  }
  if (a.enabled) {
    if (a.scale_up_step == 0) return Status::invalid("autoscale.scale_up_step must be at least 1");
    if (a.target_queue_wait.count() <= 0 || a.idle_timeout.count() <= 0) {
      return Status::invalid("autoscale: target_queue_wait and idle_timeout must be positive");
    }
    if (o.workers < o.worker_bounds.min || o.workers > o.worker_bounds.max) {
      return Status::invalid("workers " + std::to_string(o.workers) + " is outside worker_bounds " +
                             std::to_string(o.worker_bounds.min) + ".." +
                             std::to_string(o.worker_bounds.max));
    }
  }
  if (o.workers == 0 || (a.enabled && o.worker_bounds.min == 0)) {
    if (!a.enabled || o.worker_bounds.min != 0) {
      return Status::invalid(
          "a pool needs at least 1 worker, unless it autoscales from worker_bounds.min 0");
    }
    if (o.task_types.empty()) {
      return Status::invalid(
          "a pool that may have no worker (worker_bounds.min 0) needs its task_types: they are "
          "otherwise learned from its first worker");
    }
  }
  return Status::ok();
}

std::optional<std::string> needs_new_pool(const PoolOptions& started, const PoolOptions& next) {
  const std::string in_place = " cannot change in place: that needs a new pool";
  if (next.name != started.name) {
    return "cannot be renamed to '" + next.name + "' in place: that needs a new pool";
  }
  if (next.task_types != started.task_types) return "task_types" + in_place;
  // An identity field added later is refused too, by name once it has a line above.
  if (next.identity() != started.identity()) return "the pool's identity" + in_place;
  // What the spawner and the cgroup tree were built from: worker spec, but fixed at start.
  const sandbox::NamespacePolicy& ns = started.sandbox.namespaces;
  if (!(next.sandbox.namespaces == ns)) return "sandbox.namespaces" + in_place;
  if (next.sandbox.cgroup != started.sandbox.cgroup) return "sandbox.cgroup" + in_place;
  if (!ns.wanted.empty() && next.user != started.user) {
    return "sandbox.user (named in the namespaces' id maps)" + in_place;
  }
  return std::nullopt;
}

}  // namespace sandpool

namespace sandpool::core {

// ---- PoolLoop -------------------------------------------------------------------------

Result<ReconfigureReport> PoolLoop::reconfigure(PoolOptions next) {
  if (auto why = needs_new_pool(as_started_, next)) {
    return Status::invalid("pool '" + as_started_.name + "': " + *why);
  }
  SP_RETURN_IF_ERROR(check_worker_count(next));
  if (next.concurrency == 0) return Status::invalid("concurrency must be at least 1");
  std::error_code ec;
  if (!std::filesystem::exists(next.plugin_path, ec)) {
    return Status::error(Code::kPlugin, "plugin not found: " + next.plugin_path);
  }
  if (failed_.load()) return Status::error(Code::kClosed, "pool failed: " + failure());
  if (!mailbox_.accepting()) return Status::error(Code::kClosed, "pool is closing");
  // The launch plan for `next`, made here where a refusal can still be returned: from the
  // host as probed at start (namespaces and cgroups cannot change in place) and the
  // privileges probed again, since the plugin and the user may have changed.
  PoolOptions planned = as_started_;
  planned.worker_spec() = next.worker_spec();
  planned.live() = next.live();
  HostFacts facts = host_;
  facts.plugin_path = std::filesystem::absolute(planned.plugin_path).string();
  facts.privileges = probe_privileges(facts.plugin_path, planned.sandbox, planned.user);
  auto plan = plan_launch(planned, facts);
  if (!plan) return plan.status();
  return query<Result<ReconfigureReport>>(
      [this, next = std::move(next), spec = std::move(plan->spec)](
          PoolCore& core, std::int64_t now) -> Result<ReconfigureReport> {
        if (mailbox_.ended()) return Status::error(Code::kClosed, "pool is closed");
        ReconfigureReport report;
        report.rolling_restart = apply_options(next, spec);
        core.reconfigure(next, report.rolling_restart, now);
        return report;
      });
}

bool PoolLoop::apply_options(const PoolOptions& next, const supervision::LaunchSpec& spec) {
  const supervision::LaunchSpec& old = links_->launch();
  const bool changed = !sandbox::same_launch(spec.args, old.args) ||
                       spec.region.task_ring_bytes != old.region.task_ring_bytes ||
                       spec.region.result_ring_bytes != old.region.result_ring_bytes ||
                       spec.region.max_message != old.region.max_message ||
                       // Limits a worker's cgroup holds are set when it is made: a worker
                       // made with the old ones is replaced, like one launched with old args.
                       (spec.cgroups != nullptr && !(spec.cgroup_limits == old.cgroup_limits));
  // The worker spec and the live values, whole (pool_options.hpp). The identity and the
  // wiring stay as started: other threads read those without a lock (options()).
  opts_.worker_spec() = next.worker_spec();
  opts_.live() = next.live();
  links_->set_launch(spec);
  links_->set_max_result(opts_.max_result);
  queue_capacity_.store(opts_.queue_capacity, std::memory_order_relaxed);
  max_per_tenant_.store(opts_.max_per_tenant, std::memory_order_relaxed);
  max_tenants_.store(opts_.tenants.max_tenants, std::memory_order_relaxed);
  max_timeout_ms_.store(opts_.max_timeout.count(), std::memory_order_relaxed);
  // A smaller max_payload applies at once. A larger one waits until no worker started with
  // the old, smaller max_message is left (the rolling restart is over): such a worker
  // refuses a larger task frame as a protocol error.
  if (opts_.max_payload <= max_payload_.load(std::memory_order_relaxed) || !changed) {
    max_payload_.store(opts_.max_payload, std::memory_order_relaxed);
    pending_max_payload_ = 0;
  } else {
    pending_max_payload_ = opts_.max_payload;
  }
  log_->info("[{}] reconfigured{}", opts_.name,
             changed ? ": new launch spec, rolling restart" : " in place");
  return changed;
}

void PoolLoop::check_declared_types(const std::vector<std::string>& declared) {
  if (declared.empty()) return;
  for (const std::string& t : task_types_.names()) {
    if (std::find(declared.begin(), declared.end(), t) == declared.end()) {
      log_->error(
          "[{}] plugin {} does not declare task type '{}' that this pool serves; such "
          "tasks fail on its workers",
          opts_.name, opts_.plugin_path, t);
    }
  }
}

void PoolLoop::release_pending_max_payload() {
  if (pending_max_payload_ == 0 || core_->rolling_restart()) return;
  max_payload_.store(pending_max_payload_, std::memory_order_relaxed);
  pending_max_payload_ = 0;
}

}  // namespace sandpool::core
