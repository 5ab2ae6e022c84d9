#include "core/pool_loop.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <random>
#include <utility>

#include <spdlog/spdlog.h>

#include <sandpool/base/thread_name.hpp>
#include <sandpool/store/dead_letters.hpp>
#include <sandpool/store/task_journal.hpp>

#include "core/declared_types.hpp"
#include "core/pool_core_internal.hpp"
#include "core/worker_locator.hpp"

namespace sandpool::core {
namespace {

std::uint32_t default_spin_us(std::uint32_t workers) {
  // Spinners yield their core after a few rounds (ipc::spin_until), so a modest
  // oversubscription costs little; only a single core, or far more workers than cores, turns
  // spinning off. On 2 vCPUs this spin is what took W2 from ~90 to ~22 us (performance.md).
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  return cores >= 2 && workers < static_cast<std::uint32_t>(cores) * 4 ? 50 : 0;
}

}  // namespace

PoolLoop::PoolLoop(PoolOptions options) : opts_(options), as_started_(std::move(options)) {
  log_ = opts_.logger ? opts_.logger : spdlog::default_logger();
  spawner_ = opts_.spawner ? opts_.spawner : make_process_spawner();
  if (opts_.seed == 0) opts_.seed = std::random_device{}();
  spin_us_ = opts_.spin_us ? *opts_.spin_us : default_spin_us(opts_.workers);
  max_payload_.store(opts_.max_payload);
  queue_capacity_.store(opts_.queue_capacity);
  max_timeout_ms_.store(opts_.max_timeout.count());
  max_per_tenant_.store(opts_.max_per_tenant);
  max_tenants_.store(opts_.tenants.max_tenants);
  if (opts_.dead_letter_store) journal_ = opts_.dead_letter_store->journal();
  hand_off_allowed_ = journal_ == nullptr;
  // No worker to learn them from: the configured types (check_worker_count insists on them).
  if (opts_.workers == 0) task_types_ = TaskTypes(opts_.task_types);
}

PoolLoop::~PoolLoop() { close(); }

Result<std::shared_ptr<PoolLoop>> PoolLoop::start(PoolOptions options) {
  if (options.plugin_path.empty()) return Status::invalid("no plugin given");
  if (options.concurrency == 0) return Status::invalid("concurrency must be at least 1");
  SP_RETURN_IF_ERROR(check_worker_count(options));
  std::shared_ptr<PoolLoop> loop(new PoolLoop(std::move(options)));
  SP_RETURN_IF_ERROR(loop->launch());
  if (Status s = loop->recover_journal(); !s) {
    loop->close();
    return s;
  }
  return loop;
}

Status PoolLoop::launch() {
  auto worker = locate_worker(opts_.worker_path);
  if (!worker) return worker.status();
  std::error_code ec;
  if (!std::filesystem::exists(opts_.plugin_path, ec)) {
    return Status::error(Code::kPlugin, "plugin not found: " + opts_.plugin_path);
  }
  SP_RETURN_IF_ERROR(probe_host(std::move(worker).value()));
  auto plan = plan_launch(opts_, host_);
  if (!plan) return plan.status();
  for (const std::string& w : plan->warnings) log_->warn("[{}] {}", opts_.name, w);
  if (host_.cgroups && plan->spec.cgroups) {
    log_->debug("[{}] per-worker cgroups ({}) under {}", opts_.name,
                supervision::to_string(host_.cgroups->version()), host_.cgroups->parents().front());
  }
  SP_RETURN_IF_ERROR(wire(std::move(plan).value()));
  thread_ = std::thread([this] { run(); });
  Status s = mailbox_.wait_started();
  if (!s) {
    close();
    return s;
  }
  return Status::ok();
}

Status PoolLoop::probe_host(std::string worker_path) {
  host_.manager_pid = ::getpid();
  host_.worker_path = std::move(worker_path);
  host_.plugin_path = std::filesystem::absolute(opts_.plugin_path).string();
  host_.privileges = probe_privileges(host_.plugin_path, opts_.sandbox, opts_.user);
  // A refusal here comes before the spawner's namespace probe and the cgroup tree.
  auto run_as = resolve_privileges(opts_, host_);
  if (!run_as) return run_as.status();
  if (wants_clone3_spawner(opts_)) {
    auto clone3 = make_clone3_spawner(clone3_spawner_options(opts_, *run_as));
    host_.namespaces = clone3->in_effect();
    spawner_ = std::move(clone3);
  }
  if (host_.namespaces.has(sandbox::Namespace::kMount)) {
    host_.etc_files = existing_view_etc_files();
  }
  if (opts_.sandbox.cgroup != sandbox::CgroupMode::kOff) probe_cgroups(&host_);
  return Status::ok();
}

Status PoolLoop::wire(LaunchPlan plan) {
  auto poller = Poller::create();
  if (!poller) return poller.status();
  poller_.emplace(std::move(poller).value());
  SP_RETURN_IF_ERROR(mailbox_.open());
  SP_RETURN_IF_ERROR(poller_->add(mailbox_.bell_fd(), WorkerLinks::kLoopTag));
  isolation_ = std::move(plan.isolation);
  WorkerLinks::Config lc;
  lc.pool = opts_.name;
  lc.log = log_;
  lc.spawner = spawner_;
  lc.limits.max_result = opts_.max_result;
  lc.output_lines_per_second = opts_.output_lines_per_second;
  lc.output_burst = opts_.output_burst;
  lc.spin_us = spin_us_;
  lc.isolation_prefix = std::move(plan.manager_prefix);
  lc.isolation_suffix = std::move(plan.manager_layers);
  lc.on_declared = [this](const std::vector<std::string>& declared) { on_declared(declared); };
  links_ = std::make_unique<WorkerLinks>(std::move(lc), *poller_);
  links_->set_launch(std::move(plan.spec));
  PoolOptions core_opts = opts_;
  if (opts_.on_event) {
    // A user who hears an event (the last old worker's exit, the last replacement's Ready)
    // sees submits already bounded by what that event implies: a raised max_payload is
    // released before the event is heard, not after the loop's iteration.
    core_opts.on_event = [this, user = opts_.on_event](const PoolEvent& e) {
      release_pending_max_payload();
      user(e);
    };
  }
  core_ = std::make_unique<PoolCore>(core_opts, *links_, admitted_);
  core_->set_tenant_counts(&tenant_counts_);
  links_->attach(*core_);
  install_dead_letter_sink();
  install_journal();
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
  return Status::ok();
}

// ---- the loop -------------------------------------------------------------------------

void PoolLoop::run() {
  name_thread(::pthread_self(), "sp-loop:" + opts_.name);
  claim_.acquire();  // let go of only while idle (spin_for_work, wait_for_events)
  journal_batching_ = journal_ != nullptr;
  core_->start(ipc::monotonic_ns());
  publish_stats(ipc::monotonic_ns(), true);
  std::int64_t busy_rounds = 0;
  for (;;) {
    // The pass's one clock read: the core decides on `now`, and stamps wall times from one
    // read of the wall clock per pass at most (WorkerLinks::wall_ms).
    std::int64_t now = ipc::monotonic_ns();
    links_->begin_pass();
    busy_.begin(now);  // poold's watchdog: an iteration is one item of work
    const bool work = iterate(now);
    if (core_->wound_down() && !mailbox_.has_mail()) break;

    if (work && (++busy_rounds % 32) != 0) continue;  // peek at epoll now and then while busy
    if (work) {
      wait_for_events(0, now);
      continue;
    }
    busy_rounds = 0;
    // While waiters read their own results (direct_wait) the loop parks instead of spinning.
    if (spin_us_ > 0 && !parks_for_waiters(now) && spin_for_work(now + spin_us_ * 1000ll)) {
      continue;
    }
    // A hand-off during the spin changed what the stats say: current before a sleep.
    now = ipc::monotonic_ns();  // after the spin: a hand-off may have shown the core a later one
    if (std::exchange(handed_off_, false)) publish_stats(now, true);
    // Sleep until the core's next deadline, but look at the workers' headers now and then:
    // every 10 ms while tasks run (their `running` state), and while waiters read their own
    // results (the next task, handed off while the loop sleeps, needs a loop that looks that
    // soon), else every heartbeat interval.
    std::int64_t timeout_ms = core_->has_in_flight() || parks_for_waiters(now)
                                  ? kRunningPollMs
                                  : opts_.heartbeat_interval.count();
    const std::int64_t next = core_->next_deadline();
    if (next != INT64_MAX) {
      timeout_ms = std::min(
          timeout_ms, std::max<std::int64_t>(0, (next - now + detail::kMsNs - 1) / detail::kMsNs));
    }
    wait_for_events(timeout_ms, now);
  }
  // The end: kill what is left (nothing, after a clean close), then serve late queries. Their
  // records go to the journal at once: late queries may run on other threads.
  if (journal_batching_) hand_over_turn();
  journal_batching_ = false;
  links_->end_passes();  // late queries run inline, on other threads: each reads the clock
  links_->clear();
  mailbox_.end(*core_);
  // A submit that takes the claim from here on finds the pool closed (it stopped accepting
  // before the close that wound it down) and posts, which refuses.
  claim_.release();
}

bool PoolLoop::iterate(std::int64_t now) {
  bool work = drain_mailbox(now);
  // The pass's results in one batch: the queue is dispatched once after them, not once per
  // result (PoolCore::begin_batch).
  core_->begin_batch();
  work |= links_->poll_all(now);
  core_->end_batch(now);
  core_->observe_running();
  core_->observe_backtraces(now);
  if (now >= core_->next_deadline()) core_->on_tick(now);
  work |= links_->report_failed_spawns(now);
  links_->flush();
  if (journal_batching_) hand_over_turn();
  // Before after_iteration() wakes idle waiters, and before a possible sleep: current
  // whenever somebody could have waited for the loop.
  publish_stats(now, !work);
  after_iteration();
  return work;
}

void PoolLoop::publish_stats(std::int64_t now, bool force) {
  mailbox_.publish(now, force, [this] { return core_->stats(); });
}

PoolStats PoolLoop::published_stats() {
  if (std::optional<PoolStats> s = mailbox_.published_stats()) return std::move(*s);
  return query<PoolStats>([](PoolCore& core, std::int64_t) { return core.stats(); });
}

bool PoolLoop::drain_mailbox(std::int64_t now) {
  // Fresh vectors each time, as before the split: swapping with kept ones (a double buffer)
  // was measured slower (docs/performance.md, 3e).
  std::vector<TaskPtr> tasks;
  std::vector<LoopCommand> cmds;
  if (!mailbox_.take(&tasks, &cmds)) return false;
  // The submits in one batch (dispatched once, before the commands run: a command sees
  // what it would have seen with each submit dispatched at once).
  core_->begin_batch();
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    // Written by the submitting thread on another CPU: fetched a few tasks ahead.
    if (i + 4 < tasks.size()) tasks[i + 4]->prefetch_record();
    core_->submit(std::move(tasks[i]), now);
  }
  core_->end_batch(now);
  for (auto& c : cmds) c(*core_, now);
  if (!cmds.empty()) {
    mailbox_.commands_done(cmds.size());
    publish_stats(now, true);  // what the commands changed, for published_stats()
  }
  return true;
}

void PoolLoop::after_iteration() {
  if (!mailbox_.start_reported()) {
    if (failed_.load()) {
      mailbox_.report_start(Status::error(Code::kPlugin, failure()));
    } else if (core_->ready_workers() > 0 || opts_.workers == 0) {
      mailbox_.report_start(Status::ok());
    } else if (core_->init_failures() > 0 || core_->failed()) {
      // The first worker could not load or init: report its own words instead of
      // retrying a plugin that is broken the same way every time.
      set_failure(core_->failure());
      mailbox_.report_start(Status::error(Code::kPlugin, failure()));
    }
  }
  release_pending_max_payload();
  if (core_->failed() && !failed_.load()) set_failure(core_->failure());
  if (mailbox_.idle_wanted()) mailbox_.set_idle(core_->idle() && !mailbox_.has_mail());
}

void PoolLoop::on_declared(const std::vector<std::string>& declared) {
  if (first_ready_seen_) return check_declared_types(declared);
  first_ready_seen_ = true;
  std::vector<std::string> types = declared;
  if (Status s = core::validate_declared_types(types, opts_.plugin_path); !s) {
    set_failure(s.message());
  } else if (!opts_.task_types.empty()) {
    for (const auto& t : opts_.task_types) {
      if (!types.empty() && std::find(types.begin(), types.end(), t) == types.end()) {
        set_failure("task type '" + t + "' is not served by plugin " + opts_.plugin_path);
      }
    }
    // Set at start without a worker.
    if (task_types_.empty()) task_types_ = TaskTypes(opts_.task_types);
  } else {
    task_types_ = TaskTypes(types.empty() ? std::vector<std::string>{"default"} : types);
  }
}

// ---- any thread -----------------------------------------------------------------------

Status PoolLoop::unknown_type(std::string_view type) const {
  std::string served;
  for (const auto& t : task_types_.names()) served += (served.empty() ? "" : ", ") + t;
  return Status::invalid("unknown task type '" + std::string(type) +
                         "' (this pool serves: " + served + ")");
}

Status PoolLoop::check_schedule(SubmitOptions& options) {
  constexpr std::chrono::milliseconds kMaxDelay = std::chrono::hours(24 * 366);
  if (options.delay && options.not_before) {
    return Status::invalid("delay and not_before: give at most one of the two");
  }
  if (options.delay) {
    const auto now = std::chrono::system_clock::now();
    if (options.delay->count() < 0 || *options.delay > kMaxDelay) {
      return Status::invalid("delay: " + std::to_string(options.delay->count()) +
                             " ms is outside 0 .. " + std::to_string(kMaxDelay.count()) +
                             " ms (366 days)");
    }
    options.not_before =
        std::chrono::time_point_cast<std::chrono::milliseconds>(now) + *options.delay;
    options.delay.reset();
  } else if (options.not_before &&
             *options.not_before > std::chrono::system_clock::now() + kMaxDelay) {
    return Status::invalid("not_before: more than 366 days ahead");
  }
  if (options.tenant.empty()) return Status::ok();
  if (options.tenant.size() > 128) {
    return Status::invalid("tenant: longer than 128 bytes");
  }
  for (const char c : options.tenant) {
    if (c < 0x21 || c > 0x7e) {
      return Status::invalid("tenant: '" + options.tenant +
                             "' has a character that is not printable ASCII (or is a space)");
    }
  }
  return Status::ok();
}

Status PoolLoop::check_task(const std::string& type, std::size_t payload_bytes,
                            SubmitOptions& options) const {
  return checked_type(type, payload_bytes, options).status();
}

Result<TaskType> PoolLoop::checked_type(std::string_view type, std::size_t payload_bytes,
                                        SubmitOptions& options) const {
  if (options.timeout) {  // a deadline must be reachable and must not overflow
    const std::int64_t ms = options.timeout->count(), max = max_timeout_ms_.load();
    if (ms < 1 || ms > max) {
      return Status::invalid("timeout: " + std::to_string(ms) + " ms is outside 1 ms .. " +
                             std::to_string(max) + " ms (max_timeout)");
    }
  }
  const std::optional<TaskType> kept = task_types_.find(type);
  if (!kept) return unknown_type(type);
  SP_RETURN_IF_ERROR(check_schedule(options));
  if (const std::uint64_t max = max_payload_.load(std::memory_order_relaxed); payload_bytes > max) {
    return Status::too_large("payload of " + std::to_string(payload_bytes) +
                             " bytes exceeds max_payload (" + std::to_string(max) + " bytes)");
  }
  return *kept;
}

Result<TaskPtr> PoolLoop::admit_task(std::string type, std::string payload, SubmitOptions&& options,
                                     std::uint64_t id, const PackedOptions::Callbacks& shared) {
  if (failed_.load()) return Status::error(Code::kClosed, "pool failed: " + failure());
  // Checked again by post_admitted(); here so that a closed pool journals nothing.
  if (!mailbox_.accepting()) return Status::error(Code::kClosed, "pool is closing");
  if (draining_.load()) {
    return Status::error(Code::kClosed, "pool '" + opts_.name + "' is draining (resume it)");
  }
  Result<TaskType> kept = checked_type(type, payload.size(), options);
  if (!kept) return kept.status();
  const std::size_t capacity = queue_capacity_.load(std::memory_order_relaxed);
  if (admitted_.fetch_add(1, std::memory_order_relaxed) >= capacity) {
    admitted_.fetch_sub(1, std::memory_order_relaxed);
    return Status::error(Code::kQueueFull, "queue_full: " + std::to_string(capacity) +
                                               " tasks are waiting in pool '" + opts_.name + "'");
  }
  // Per tenant: only tasks of a named tenant, or every task when max_per_tenant is set (a
  // pool with neither never takes the counts' lock).
  const std::size_t max_per_tenant = max_per_tenant_.load(std::memory_order_relaxed);
  const bool tenant_counted = !options.tenant.empty() || max_per_tenant != 0;
  if (tenant_counted) {
    if (Status s = tenant_counts_.admit(options.tenant, max_per_tenant,
                                        max_tenants_.load(std::memory_order_relaxed), opts_.name);
        !s) {
      admitted_.fetch_sub(1, std::memory_order_relaxed);
      return s;
    }
  }
  // A replayed dead letter keeps its id: replay() journals it (reopen) before it is posted.
  const bool journaled = journal_ != nullptr && id == 0;
  if (id == 0)
    id = (opts_.task_ids ? *opts_.task_ids : next_task_id_).fetch_add(1, std::memory_order_relaxed);
  auto rec = TaskRecord::make(id, *kept, std::move(payload), std::move(options), shared);
  rec->journaled = journaled;
  rec->tenant_counted = tenant_counted;
  if (!journaled) {
    rec->set_ack_status(Status::ok());
    rec->ack.store(1, std::memory_order_release);
  }
  return rec;
}

void PoolLoop::unadmit(const TaskPtr& rec) {
  admitted_.fetch_sub(1, std::memory_order_relaxed);
  if (rec->tenant_counted) tenant_counts_.release(rec->opts.tenant());
}

bool PoolLoop::post_admitted(const TaskPtr& rec, bool end_if_closed) {
  if (mailbox_.post_task(rec)) return true;
  refuse_closing(rec, end_if_closed);
  return false;
}

bool PoolLoop::post_admitted(const std::vector<TaskPtr>& recs) {
  if (mailbox_.post_tasks(recs)) return true;
  for (const TaskPtr& rec : recs) refuse_closing(rec, true);
  return false;
}

void PoolLoop::refuse_closing(const TaskPtr& rec, bool end_if_closed) {
  unadmit(rec);
  if (rec->journaled &&
      end_if_closed) {  // accepted in the journal, never run: ended there, never acknowledged
    TaskResult end;
    end.id = rec->id;
    end.type = rec->type();
    end.state = TaskState::kCancelled;
    end.cancel_reason = CancelReason::kShutdown;
    end.error = "pool is closing";
    journal_->finish(end, {});
  }
}

Result<Ticket> PoolLoop::submit(std::string type, std::string payload, SubmitOptions&& options,
                                std::uint64_t id) {
  auto rec = admit_task(std::move(type), std::move(payload), std::move(options), id);
  if (!rec) return rec.status();
  // The accept before the post: the task's start is recorded after it.
  if ((*rec)->journaled) {
    journal_accept({*rec}, nullptr);
  } else if (try_hand_off(*rec)) {
    release_ack(*rec);
    return Ticket(*rec, weak_from_this());
  }
  if (!post_admitted(*rec)) return Status::error(Code::kClosed, "pool is closing");
  release_ack(*rec);
  return Ticket(*rec, weak_from_this());
}

std::vector<Result<Ticket>> PoolLoop::submit_batch(std::vector<BatchTask> tasks,
                                                   std::function<void(const Status&)> on_accepted,
                                                   TaskCallbacks shared) {
  const PackedOptions::Callbacks callbacks(std::move(shared.on_progress),
                                           std::move(shared.on_done));
  std::vector<Result<Ticket>> out;
  out.reserve(tasks.size());
  std::vector<TaskPtr> admitted;  // in order; out[at[i]] is admitted[i]'s ticket
  std::vector<std::size_t> at;
  std::optional<Status> refuse_rest;
  for (BatchTask& t : tasks) {
    if (refuse_rest) {
      out.emplace_back(*refuse_rest);
      continue;
    }
    auto rec =
        admit_task(std::move(t.type), std::move(t.payload), std::move(t.options), 0, callbacks);
    if (!rec) {
      const Code c = rec.status().code();
      if (c == Code::kQueueFull || c == Code::kClosed) refuse_rest = rec.status();
      out.emplace_back(rec.status());
      continue;
    }
    at.push_back(out.size());
    out.emplace_back(Ticket(*rec, weak_from_this()));
    admitted.push_back(std::move(rec).value());
  }
  auto batch = std::make_shared<BatchAck>();
  batch->callback = std::move(on_accepted);
  if (journal_ != nullptr && !admitted.empty()) {
    journal_accept(admitted, batch);
  } else {
    batch->settle(Status::ok());
  }
  // One hand-over to the loop for the whole batch (one lock, at most one wake-up).
  if (post_admitted(admitted)) {
    for (const TaskPtr& rec : admitted) release_ack(rec);
  } else {  // the pool closes: none is posted, nor any task's on_accepted called
    for (const std::size_t i : at) out[i] = Status::error(Code::kClosed, "pool is closing");
  }
  batch->release();
  return out;
}

bool PoolLoop::cancel(const TaskPtr& task) {
  if (mailbox_.ended()) return false;
  return query<bool>([task](PoolCore& core, std::int64_t now) { return core.cancel(task, now); });
}

bool PoolLoop::signal_worker(std::int32_t pid, int sig) {
  return query<bool>(
      [this, pid, sig](PoolCore&, std::int64_t) { return links_->signal(pid, sig); });
}

void PoolLoop::set_failure(std::string why) {
  {
    MutexLock lock(failure_mu_);
    failure_ = std::move(why);
  }
  failed_.store(true, std::memory_order_release);
}

std::string PoolLoop::failure() const {
  MutexLock lock(failure_mu_);
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
