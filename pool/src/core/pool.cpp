#include <sandpool/pool/pool.hpp>
#include <sandpool/pool/pool_metrics.hpp>

#include <spdlog/spdlog.h>
#include <sandpool/ipc/wake.hpp>

#include <sandpool/store/dead_letters.hpp>
#include "core/pool_loop.hpp"
#include "core/task_record.hpp"

namespace sandpool {
namespace {
constexpr std::int64_t kTicketSpinNs = 50000;
// Ticket::read_here: between two tries of the direct end, it watches the task this long.
constexpr std::int64_t kReadHereLookNs = 5000;

// A task in flight whose pool's loop is parked: the waiter reads its worker's result itself
// and ends the task on this thread (the return half of the direct hand-off; docs/
// architecture.md, "The loop's claim"), for a few microseconds at most and never past until_ns.
void read_result_here(const core::TaskPtr& rec, const std::weak_ptr<core::PoolLoop>& loop,
                      std::int64_t until_ns) {
  if (rec->done.load(std::memory_order_acquire) != 0) return;
  if (auto pool_loop = loop.lock()) (void)pool_loop->direct_wait(rec, until_ns);
}

}  // namespace

// ---- Ticket ---------------------------------------------------------------------------

std::uint64_t Ticket::id() const { return rec_ ? rec_->id : 0; }

TaskState Ticket::state() const {
  return rec_ ? rec_->state.load(std::memory_order_acquire) : TaskState::kCancelled;
}

TaskResult Ticket::wait() const {
  if (!rec_) return {};
  read_result_here(rec_, loop_, INT64_MAX);
  // A round trip is often done within microseconds: look for a short while before paying
  // for a futex sleep and the cross-CPU wake-up that ends it.
  ipc::spin_until([&] { return rec_->done.load(std::memory_order_acquire) != 0; },
                  ipc::monotonic_ns() + kTicketSpinNs);
  rec_->done.wait(0, std::memory_order_acquire);
  return snapshot();
}

bool Ticket::wait_for(std::chrono::milliseconds timeout) const {
  if (!rec_) return true;
  if (rec_->done.load(std::memory_order_acquire)) return true;
  const std::int64_t ms = std::max<std::int64_t>(0, timeout.count());
  read_result_here(rec_, loop_,
                   ms > INT64_MAX / 4'000'000 ? INT64_MAX : ipc::monotonic_ns() + ms * 1'000'000);
  // std::atomic::wait has no timeout: poll with a short sleep, which is fine for a call
  // that is itself a bounded wait.
  const auto until = std::chrono::steady_clock::now() + timeout;
  auto step = std::chrono::microseconds(50);
  while (!rec_->done.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(step);
    step = std::min(step * 2, std::chrono::microseconds(5000));
  }
  return true;
}

bool Ticket::read_here(std::chrono::microseconds bound) const {
  if (!rec_) return true;
  const auto done = [&] { return rec_->done.load(std::memory_order_acquire) != 0; };
  const std::int64_t until = ipc::monotonic_ns() + bound.count() * 1000;
  auto loop = loop_.lock();
  while (!done()) {
    const std::int64_t now = ipc::monotonic_ns();
    if (now >= until) return false;
    if (loop) (void)loop->direct_wait(rec_, until);
    // Not ended here (the loop was busy or spinning, which then parks for the next look, or
    // the task is not on a ring this thread may read): watch a while, then try again.
    ipc::spin_until(done, std::min(until, ipc::monotonic_ns() + kReadHereLookNs));
  }
  return true;
}

std::string_view Ticket::payload() const { return rec_ ? rec_->payload() : ""; }

SubmitOptions Ticket::options() const { return rec_ ? rec_->opts.unpack() : SubmitOptions{}; }

TaskResult Ticket::snapshot() const {
  if (!rec_) return {};
  MutexLock lock(rec_->mu());
  TaskResult r = rec_->account_copy();
  r.state = rec_->state.load(std::memory_order_acquire);
  return r;
}

Status Ticket::wait_accepted() const {
  if (!rec_) return Status::ok();
  rec_->ack.wait(0, std::memory_order_acquire);
  MutexLock lock(rec_->mu());
  return rec_->ack_status();
}

std::optional<Status> Ticket::acceptance() const {
  if (!rec_) return Status::ok();
  if (rec_->ack.load(std::memory_order_acquire) == 0) return std::nullopt;
  MutexLock lock(rec_->mu());
  return rec_->ack_status();
}

bool Ticket::cancel() const {
  if (!rec_ || done()) return false;
  auto loop = loop_.lock();
  return loop && loop->cancel(rec_);
}

// ---- Pool -----------------------------------------------------------------------------

Pool::Pool(std::shared_ptr<core::PoolLoop> loop) : loop_(std::move(loop)) {}

Pool::~Pool() { close(); }

Result<std::unique_ptr<Pool>> Pool::create(PoolOptions options) {
  auto loop = core::PoolLoop::start(std::move(options));
  if (!loop) return loop.status();
  return std::unique_ptr<Pool>(new Pool(std::move(loop).value()));
}

Result<Ticket> Pool::submit(std::string type, std::string payload, SubmitOptions options) {
  return loop_->submit(std::move(type), std::move(payload), std::move(options));
}

std::vector<Result<Ticket>> Pool::submit_batch(std::vector<BatchTask> tasks,
                                               std::function<void(const Status&)> on_accepted,
                                               TaskCallbacks shared) {
  return loop_->submit_batch(std::move(tasks), std::move(on_accepted), std::move(shared));
}

Status Pool::scale(std::uint32_t workers) {
  // 0 only with configured task_types (check_worker_count); the core then keeps the target
  // within worker_bounds when autoscaling, and at 1 or more when not.
  if (workers == 0 && loop_->options().task_types.empty()) {
    return Status::invalid("a pool needs at least 1 worker");
  }
  loop_->post([workers](core::PoolCore& core, std::int64_t now) { core.scale(workers, now); });
  return Status::ok();
}

Status Pool::set_strategy(DispatchStrategy strategy) {
  loop_->post([strategy](core::PoolCore& core, std::int64_t) { core.set_strategy(strategy); });
  return Status::ok();
}

void Pool::drain() { loop_->set_draining(true); }

void Pool::resume() { loop_->set_draining(false); }

void Pool::restart(bool rolling) {
  loop_->post(
      [rolling](core::PoolCore& core, std::int64_t now) { core.restart_workers(rolling, now); });
}

Status Pool::kill_worker(std::int32_t pid, int signal) {
  if (!loop_->signal_worker(pid, signal)) {
    return Status::error(
        Code::kNotFound,
        "pool '" + loop_->options().name + "' has no live worker with pid " + std::to_string(pid));
  }
  return Status::ok();
}

Result<ReconfigureReport> Pool::reconfigure(PoolOptions next) {
  return loop_->reconfigure(std::move(next));
}

std::size_t Pool::shutdown(std::chrono::milliseconds timeout, DeadReason reason) {
  loop_->stop_accepting();
  std::size_t abandoned = 0;
  if (!loop_->wait_idle_for(timeout.count())) {
    const std::string why = std::string(to_string(reason)) + ": still open after " +
                            std::to_string(timeout.count()) + " ms of draining";
    const bool keep = loop_->keeps_unfinished(reason);
    abandoned =
        loop_->query<std::size_t>([&why, reason, keep](core::PoolCore& core, std::int64_t now) {
          return keep ? core.release_all(why, now) : core.abandon_all(reason, why, now);
        });
  }
  loop_->close();
  return abandoned;
}

void Pool::wait_idle() { loop_->wait_idle_for(-1); }

bool Pool::wait_idle_for(std::chrono::milliseconds timeout) {
  return loop_->wait_idle_for(timeout.count());
}

void Pool::close() { loop_->close(); }

PoolStats Pool::stats() const {
  PoolStats s =
      loop_->query<PoolStats>([](core::PoolCore& core, std::int64_t) { return core.stats(); });
  if (s.state == "running" && loop_->draining()) s.state = "draining";
  return s;
}

PoolStats Pool::stats_snapshot() const {
  PoolStats s = loop_->published_stats();
  if (s.state == "running" && loop_->draining()) s.state = "draining";
  return s;
}

PoolMetrics Pool::metrics() const {
  return loop_->query<PoolMetrics>(
      [](core::PoolCore& core, std::int64_t) { return core.metrics(); });
}

std::vector<WorkerInfo> Pool::workers() const {
  return loop_->query<std::vector<WorkerInfo>>(
      [](core::PoolCore& core, std::int64_t now) { return core.workers(now); });
}

std::vector<TaskResult> Pool::dead_letters() const {
  return loop_->query<std::vector<TaskResult>>([](core::PoolCore& core, std::int64_t) {
    return std::vector<TaskResult>(core.dead_letters().begin(), core.dead_letters().end());
  });
}

const std::vector<std::string>& Pool::task_types() const { return loop_->task_types(); }

const std::string& Pool::isolation() const { return loop_->isolation(); }

Result<Ticket> Pool::replay(std::uint64_t letter_id, TaskCallbacks callbacks) {
  const auto& store = loop_->options().dead_letter_store;
  if (!store) return Status::invalid("this pool has no dead_letter_store");
  if (store->journal() != nullptr) {
    // The letter goes and the task is journaled open again in one transaction (the loop's
    // replay): a stop or a crash at any point leaves it in exactly one of the two.
    auto letter = store->get(letter_id);
    if (!letter) return letter.status();
    if (letter->pool != loop_->options().name) {
      return Status::invalid("dead letter " + std::to_string(letter_id) + " belongs to pool '" +
                             letter->pool + "', not '" + loop_->options().name + "'");
    }
    SubmitOptions options = SubmitOptions::of(letter->options);
    options.on_progress = std::move(callbacks.on_progress);
    options.on_done = std::move(callbacks.on_done);
    return loop_->replay(*letter, std::move(options));
  }
  // Claimed (taken out of the store in one transaction) before the submit: a concurrent
  // replay of the same letter finds it gone.
  auto letter = store->claim(letter_id);
  if (!letter) return letter.status();
  auto log = loop_->options().logger ? loop_->options().logger : spdlog::default_logger();
  auto put_back = [&] {
    if (Status s = store->restore(*letter); !s) {
      log->error(
          "[{}] dead letter {} (task {}) was taken for a replay that did not happen and "
          "could not be put back: {}",
          loop_->options().name, letter_id, letter->task.id, s.to_string());
    }
  };
  if (letter->pool != loop_->options().name) {
    put_back();
    return Status::invalid("dead letter " + std::to_string(letter_id) + " belongs to pool '" +
                           letter->pool + "', not '" + loop_->options().name + "'");
  }
  SubmitOptions options = SubmitOptions::of(letter->options);
  options.on_progress = std::move(callbacks.on_progress);
  options.on_done = std::move(callbacks.on_done);
  auto ticket =
      loop_->submit(letter->task.type, letter->payload, std::move(options), letter->task.id);
  if (!ticket) put_back();
  return ticket;
}

Result<ReplayReport> Pool::replay_matching(DeadLetterFilter filter, TaskCallbacks callbacks) {
  const PoolOptions& opts = loop_->options();
  if (!opts.dead_letter_store) return Status::invalid("this pool has no dead_letter_store");
  if (filter.pool && *filter.pool != opts.name) {
    return Status::invalid("pool '" + opts.name + "' cannot replay letters of pool '" +
                           *filter.pool + "'");
  }
  DeadLetterStore& store = *opts.dead_letter_store;
  filter.pool = opts.name;
  // Only letters dead-lettered before now: a replayed task that dies again becomes a new
  // letter, which this call must not replay a second time.
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  if (!filter.until_ms || *filter.until_ms > now_ms) filter.until_ms = now_ms;
  (void)store.flush(std::chrono::seconds(5));  // letters still being written count too

  ReplayReport report;
  DeadLetterPage page;
  while (true) {
    auto batch = store.list(filter, page);
    if (!batch) return batch.status();
    for (DeadLetter& letter : batch->letters) {
      auto ticket = replay(letter.letter_id, callbacks);
      if (ticket) {
        report.tickets.push_back(std::move(ticket).value());
        continue;
      }
      if (ticket.status().code() == Code::kNotFound) continue;  // replayed or purged meanwhile
      ++report.failed;
      if (report.first_error.empty()) report.first_error = ticket.status().to_string();
      if (ticket.status().code() == Code::kQueueFull || ticket.status().code() == Code::kClosed) {
        return report;
      }
    }
    if (!batch->next) return report;
    page.after = batch->next;
  }
}

std::optional<Ticket> Pool::find(std::uint64_t task_id) const {
  core::TaskPtr rec = loop_->query<core::TaskPtr>(
      [task_id](core::PoolCore& core, std::int64_t) { return core.find_task(task_id); });
  if (!rec) return std::nullopt;
  return Ticket(std::move(rec), loop_);
}

std::vector<TaskListing> Pool::list(const TaskQuery& q) const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const std::int64_t wall_ms =
      duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  struct Found {
    core::TaskPtr task;
    std::int64_t submitted_ms;
  };
  auto found =
      loop_->query<std::vector<Found>>([&q, wall_ms](core::PoolCore& core, std::int64_t now) {
        // submitted_ns is the loop's clock: a submit time is its distance from now, on the
        // wall. (Not queued_ns: a scheduled task enters the queue when due, in the future.)
        const auto submitted = [&](const core::TaskRecord& t) {
          return wall_ms - (now - t.submitted_ns) / 1000000;
        };
        std::vector<Found> out;
        for (core::TaskPtr& t : core.list_tasks(
                 [&](const core::TaskRecord& t) {
                   if (!q.type.empty() && t.type() != q.type) return false;
                   if (!q.key.empty() && t.opts.key() != q.key) return false;
                   if (q.tenant && t.opts.tenant() != *q.tenant) return false;
                   if (q.state && t.state.load() != *q.state) return false;
                   if (q.since_ms && submitted(t) < *q.since_ms) return false;
                   if (q.until_ms && submitted(t) > *q.until_ms) return false;
                   return true;
                 },
                 q.limit)) {
          const std::int64_t at = submitted(*t);
          out.push_back({std::move(t), at});
        }
        return out;
      });
  std::vector<TaskListing> out;
  for (Found& f : found) {
    std::string key = f.task->opts.key();
    out.push_back({Ticket(std::move(f.task), loop_), std::move(key), f.submitted_ms});
  }
  return out;
}

std::uint64_t Pool::wake_syscalls() const { return loop_->wake_syscalls(); }

std::uint64_t Pool::hand_offs() const { return loop_->hand_offs(); }

std::uint64_t Pool::direct_ends() const { return loop_->direct_ends(); }

std::int64_t Pool::busy_for_ns() const { return loop_->busy_for_ns(); }

std::chrono::milliseconds Pool::max_timeout() const { return loop_->max_timeout(); }

Status Pool::check_task(const std::string& type, std::size_t payload_bytes,
                        SubmitOptions& options) const {
  return loop_->check_task(type, payload_bytes, options);
}

}  // namespace sandpool
