// RedisFeeder (redis_feeder.hpp): its life, its figures, and the reader of one node, which
// reads and claims entries and hands them to the local pool within its limits. The writer is
// in redis_feeder_writer.cpp, the beat in redis_feeder_beat.cpp, an attempt's JSON in
// redis_feeder_encode.cpp.
#include <sandpool/redis/redis_feeder.hpp>

#include <unistd.h>

#include <algorithm>
#include <random>

#include <sandpool/base/thread_name.hpp>

#include "redis/redis_feeder_threads.hpp"

namespace sandpool::redis {

namespace {

using feeder::Clock;
using feeder::connect;
using feeder::kRetryFirst;
using feeder::stopped_here;
using feeder::wall_ms;
constexpr std::chrono::milliseconds kReadBlock{500};  // a read wakes this often to see places
// The batch layout: a read of the batch streams waits this long at most, so that a per-task
// entry (read first, not waiting) waits at most this long on an idle node.
constexpr std::chrono::milliseconds kBatchBlock{100}, kNoWait{0};
// After the local pool refused a task (draining, shutting down), reading waits this long.
constexpr std::chrono::milliseconds kRefusedPause{1000};

// The end of a claimed task whose lost attempt used up its retries.
TaskResult exhausted_account(const StreamEntry& entry, const std::string& error) {
  TaskResult account;
  account.id = entry.task_id;
  account.type = entry.task.type;
  account.state = TaskState::kDeadLettered;
  account.reason = DeadReason::kRetriesExhausted;
  account.error = error;
  return account;
}

// The options of an entry's one attempt in the local pool, after `before` attempts elsewhere.
SubmitOptions local_options(const StreamEntry& entry, std::uint32_t before) {
  SubmitOptions o;
  o.timeout = entry.task.options.timeout;
  o.retries = 0;  // one attempt here; the next, if any, waits in Redis (write_ends)
  o.attempts_before = before;
  o.priority = entry.task.options.priority;
  o.key = entry.task.options.key;
  o.tenant = entry.task.options.tenant;
  return o;
}

// The rate buckets (into `buckets`) and the cap of `limits` that apply to `entry`.
std::optional<TaskUpkeep::Cap> limits_of(const PoolKeys& keys, const FlowLimits& limits,
                                         const StreamEntry& entry,
                                         std::vector<TaskUpkeep::Bucket>& buckets) {
  const auto add = [&](std::string key, const RateLimit& r) {
    if (r.tasks == 0) return;
    buckets.push_back({std::move(key), r.tasks, r.per.count(), r.burst != 0 ? r.burst : r.tasks});
  };
  add(keys.rate_key("pool", ""), limits.pool);
  if (auto it = limits.task_types.find(entry.task.type); it != limits.task_types.end()) {
    add(keys.rate_key("type", entry.task.type), it->second);
  }
  if (auto it = limits.tenants.find(entry.task.options.tenant); it != limits.tenants.end()) {
    add(keys.rate_key("tenant", entry.task.options.tenant), it->second);
  }
  if (auto it = limits.type_concurrency.find(entry.task.type);
      it != limits.type_concurrency.end()) {
    return TaskUpkeep::Cap{keys.cap_key(entry.task.type), it->second, entry.task_id};
  }
  return std::nullopt;
}

}  // namespace

RedisFeeder::RedisFeeder(Pool& pool, FeederOptions options)
    : pool_(pool),
      opts_(std::move(options)),
      keys_(opts_.prefix, opts_.pool),
      consumer_(keys_, opts_.stream_limits),
      upkeep_(keys_, opts_.stream_limits),
      batches_(keys_),
      sh_(std::make_shared<Shared>()),
      per_worker_(opts_.per_worker),
      headroom_workers_(opts_.headroom_workers) {
  sh_->limits = opts_.limits;
  sh_->batch_layout = opts_.layout == Layout::kBatch;
}

void RedisFeeder::retune(std::uint32_t per_worker, std::uint32_t headroom_workers,
                         std::uint32_t default_retries, const RetryPolicy& retry) {
  if (opts_.per_worker != 0) {  // else a fixed capacity
    per_worker_.store(std::max<std::uint32_t>(1, per_worker));
    headroom_workers_.store(headroom_workers);
  }
  MutexLock lk(sh_->mu);
  sh_->default_retries = default_retries;
  sh_->retry = retry;
  sh_->cv.notify_all();  // the reader may have room now
}

Result<std::unique_ptr<RedisFeeder>> RedisFeeder::start(Pool& pool, FeederOptions options) {
  if (options.consumer.empty()) return Status::invalid("redis pool: the node needs a name");
  if (options.capacity == 0) options.capacity = 1;
  if (options.layout == Layout::kBatch) {
    // What slice 2 does not run is refused, never half-done (docs/redis-batch-layout.md).
    const std::string not_yet = " (slice 3 of docs/redis-batch-layout.md)";
    if (options.default_retries > 0) {
      return Status::invalid("redis pool " + options.pool +
                             ": the batch layout does not retry a task yet" + not_yet +
                             ": set the pool's retries to 0, or keep the per-task layout");
    }
    if (options.limits.any()) {
      return Status::invalid("redis pool " + options.pool +
                             ": the batch layout does not take rate limits or caps yet" + not_yet +
                             ": keep the per-task layout");
    }
  }
  std::unique_ptr<RedisFeeder> f(new RedisFeeder(pool, std::move(options)));
  {
    MutexLock lk(f->sh_->mu);  // no thread of the feeder runs yet; taken for the checker
    f->sh_->default_retries = f->opts_.default_retries;
    f->sh_->retry = f->opts_.retry;
  }
  auto c = Connection::open(f->opts_.endpoint);
  if (!c) return c.status();
  SP_RETURN_IF_ERROR(f->upkeep_.ensure_group(*c));
  if (f->sh_->batch_layout) SP_RETURN_IF_ERROR(f->batches_.ensure_group(*c));
  SP_RETURN_IF_ERROR(f->take_name(*c));
  SP_RETURN_IF_ERROR(f->consumer_.join(*c, f->opts_.consumer));  // one of the pool's nodes now
  SP_RETURN_IF_ERROR(f->write_kept_ends(*c));  // before anything is read or claimed
  f->reader_ = std::thread([p = f.get()] { p->read_loop(); });
  f->writer_ = std::thread([p = f.get()] { p->write_loop(); });
  f->beater_ = std::thread([p = f.get()] { p->beat_loop(); });
  // docs/architecture.md's table of threads: cut to 15 bytes, so 6-8 of the pool's name.
  name_thread(f->reader_.native_handle(), "sp-rd:" + f->opts_.pool);
  name_thread(f->writer_.native_handle(), "sp-wr:" + f->opts_.pool);
  name_thread(f->beater_.native_handle(), "sp-beat:" + f->opts_.pool);
  return f;
}

RedisFeeder::~RedisFeeder() {
  {
    MutexLock lk(sh_->mu);
    sh_->stopping = true;
  }
  sh_->wake_all();
  for (std::thread* t : {&reader_, &writer_, &beater_}) {
    if (t->joinable()) t->join();
  }
  // The tickets' tasks hold on_done callbacks that hold sh_: a cycle while they are kept.
  MutexLock lk(sh_->mu);
  for (auto& [key, h] : sh_->held) h.ticket.reset();
}

void RedisFeeder::die() {
  {
    MutexLock lk(sh_->mu);
    sh_->stopping = true;
    sh_->dead = true;
  }
  sh_->wake_all();
  for (std::thread* t : {&reader_, &writer_, &beater_}) {
    if (t->joinable()) t->join();
  }
  // The tickets' tasks hold on_done callbacks that hold sh_: a cycle while they are kept.
  MutexLock lk(sh_->mu);
  for (auto& [key, h] : sh_->held) h.ticket.reset();
}

void RedisFeeder::stop_reading() {
  {
    MutexLock lk(sh_->mu);
    sh_->reading = false;
  }
  sh_->cv.notify_all();
  if (reader_.joinable()) reader_.join();
}

void RedisFeeder::set_limits(const FlowLimits& limits) {
  MutexLock lk(sh_->mu);
  sh_->limits = limits;
}

FeederStats RedisFeeder::stats() const {
  MutexLock lk(sh_->mu);
  FeederStats s = sh_->stats;
  s.held = sh_->held.size() + sh_->batches.size();
  return s;
}

void RedisFeeder::note(const Status& s) {
  MutexLock lk(sh_->mu);
  sh_->stats.redis_up = s.is_ok() || s.code() != Code::kUnavailable;
  if (!s) sh_->stats.last_error = s.to_string();
}

std::string RedisFeeder::new_identity() {
  char host[256] = "?";
  (void)::gethostname(host, sizeof host - 1);
  std::random_device rd;
  return std::string(host) + " pid " + std::to_string(::getpid()) + " #" + std::to_string(rd());
}

Status RedisFeeder::take_name(Connection& c) {
  identity_ = opts_.identity.empty() ? new_identity() : opts_.identity;
  // A node started again under its name after a crash finds its old key: it waits for it to
  // expire (one TTL at most). A key that outlives that is another live node's.
  const auto until = Clock::now() + name_ttl() + opts_.heartbeat;
  for (;;) {
    auto holder = TaskUpkeep::beat(c, opts_.prefix, opts_.consumer, identity_, name_ttl());
    if (!holder) return holder.status();
    if (!*holder) return Status::ok();
    if (Clock::now() > until) {
      return Status::error(Code::kInvalidArgument,
                           "redis pool " + opts_.pool + ": the node name '" + opts_.consumer +
                               "' is in use by " + **holder +
                               " (two nodes with one name would share a consumer: give each node "
                               "a name of its own)");
    }
    std::this_thread::sleep_for(opts_.heartbeat / 2);
  }
}

std::chrono::milliseconds RedisFeeder::name_ttl() const { return 3 * opts_.heartbeat; }

bool RedisFeeder::stopping() const {
  MutexLock lk(sh_->mu);
  return sh_->stopping;
}

std::size_t RedisFeeder::capacity() const {
  const PoolStats s = pool_.stats_snapshot();  // never waits
  // A pool that takes no task now (drained, failed, closing) or runs none (crash_loop): the
  // node reads and claims nothing for it, and other nodes run the stream.
  if (s.state == "draining" || s.state == "crash_loop" || s.state == "failed" ||
      s.state == "closing" || s.state == "closed") {
    return 0;
  }
  if (opts_.per_worker == 0) return opts_.capacity;
  const std::size_t workers = s.target_workers + headroom_workers_.load();
  return std::max<std::size_t>(1, workers * per_worker_.load());
}

void RedisFeeder::Shared::push_end(Ended e) {
  ends.push_back(std::move(e));
  if (ends.size() == 1) ends_cv.notify_all();
}

void RedisFeeder::Shared::wake_all() {
  cv.notify_all();
  ends_cv.notify_all();
  beat_cv.notify_all();
}

void RedisFeeder::Shared::ended_locally(const TaskResult& r) {
  if (!r.history.empty()) {
    const Attempt& a = r.history.back();
    const double run = static_cast<double>(std::max<std::int64_t>(0, a.ended_ms - a.started_ms));
    mean_run_ms = mean_run_ms < 0 ? run : 0.9 * mean_run_ms + 0.1 * run;
  }
  if (reader_waits && to_read(reader_cap) > 0) cv.notify_all();
}

std::size_t RedisFeeder::Shared::in_pool() const {
  const std::size_t unwritten = ends.size() + writing + (lone_end ? 1 : 0) + (lone_writing ? 1 : 0);
  return held.size() - std::min(held.size(), unwritten) + batch_local;
}

std::size_t RedisFeeder::Shared::window(std::size_t cap) const {
  return mean_run_ms >= 0 && mean_run_ms < kShortRunMs ? kReadAhead * cap : cap;
}

std::size_t RedisFeeder::Shared::free_places(std::size_t cap) const {
  const std::size_t w = window(cap);
  // Ends the writer has not written hold no place, but past a bound they stop the reading
  // (Redis is slow or away for the writer: the node must not run ahead of what it can end).
  if (batch_layout) {
    // Whole batches: the node reads one more while it holds less than `low`, so that its
    // workers never idle through a read's round trips; its unwritten ends are bounded in
    // batches too.
    const std::size_t low = std::max(w, batch::kMaxTasks / 2);
    if (ends.size() + writing + batch_unwritten >=
        kMaxUnwrittenWindows * (low + batch::kMaxTasks)) {
      return 0;
    }
    return low + batch::kMaxTasks - std::min(low + batch::kMaxTasks, in_pool());
  }
  if (ends.size() + writing >= kMaxUnwrittenWindows * std::max<std::size_t>(1, w)) return 0;
  return w - std::min(w, in_pool());
}

std::size_t RedisFeeder::Shared::to_read(std::size_t cap) const {
  const std::size_t free = free_places(cap);
  // Reading ahead, the reader waits until half of what it reads ahead is free, so that it
  // reads in batches (one script each), unless the local pool holds less than its capacity
  // (a place idles: it reads at once).
  const std::size_t w = window(cap);
  if (batch_layout) return free > batch::kMaxTasks ? free : 0;  // in_pool() < low
  const std::size_t batch = std::max<std::size_t>(1, (w - std::min(w, cap)) / 2);
  return free >= batch || in_pool() < cap ? free : 0;
}

std::size_t RedisFeeder::to_read() {
  const std::size_t cap = capacity();
  MutexLock lk(sh_->mu);
  return sh_->to_read(cap);
}

void RedisFeeder::read_loop() {
  auto noter = [this](const Status& s) { note(s); };
  auto stopped_reading = [this] {
    MutexLock lk(sh_->mu);
    return sh_->stopping || !sh_->reading;
  };
  std::optional<Connection> c;
  while (!stopped_reading()) {
    if (!c || c->broken()) {
      c = connect(opts_.endpoint, stopped_reading, noter);
      if (!c) return;
    }
    move_throttled(*c);
    // A read wakes by the next due time of what this node throttled, to move it back.
    std::chrono::milliseconds block = kReadBlock;
    {
      MutexLock lk(sh_->mu);
      if (!sh_->throttle_due.empty()) {
        block = std::clamp(std::chrono::milliseconds(*sh_->throttle_due.begin() - wall_ms()),
                           std::chrono::milliseconds(1), kReadBlock);
      }
      if (Clock::now() < sh_->paused_until) {
        while (!sh_->stopping && sh_->reading &&
               sh_->cv.wait_until(sh_->mu, sh_->paused_until) == std::cv_status::no_timeout) {
        }
        continue;
      }
    }
    const std::size_t free = to_read();
    if (free == 0) {
      const std::size_t cap = capacity();
      MutexLock lk(sh_->mu);
      const auto until = Clock::now() + block;
      sh_->reader_waits = true;
      sh_->reader_cap = cap;
      while (!sh_->stopping && sh_->reading && sh_->to_read(cap) == 0 &&
             sh_->cv.wait_until(sh_->mu, until) == std::cv_status::no_timeout) {
      }
      sh_->reader_waits = false;
      continue;
    }
    // The batch layout: the per-task streams first, not waiting (moved, scheduled and awaited
    // tasks keep that layout), then the batch streams, waiting a short while.
    const bool batches = sh_->batch_layout;
    auto got = consumer_.read(*c, opts_.consumer, free, batches ? kNoWait : block);
    note(got.status());
    if (got && got->empty() && batches) {
      read_batches(*c, free, std::min(block, kBatchBlock));
      continue;
    }
    if (!got) {
      if (!c->broken()) std::this_thread::sleep_for(kRetryFirst);  // an entry it cannot parse
      continue;
    }
    // Read and taken: each entry's attempts are those made before (a retry of another node's,
    // a claimed one); its attempts here are numbered on from there.
    {
      // Held (so the beat keeps them fresh) while the batch goes through: one may wait for
      // the pool's rate.
      MutexLock lk(sh_->mu);
      for (const StreamEntry& e : *got) {
        if (e.malformed.empty() && !sh_->dead) sh_->held.try_emplace(key_of(e));
      }
    }
    {
      MutexLock lk(sh_->mu);
      sh_->stats.read += got->size();
    }
    run_locally(*c, std::move(got).value(), false);
  }
}

Result<SubmitOptions> RedisFeeder::prepare(Connection& c, StreamEntry& entry, bool claimed) {
  if (!entry.malformed.empty()) {  // not a task: nothing to run or end, and nobody waits on it
    note(consumer_.discard(c, entry, opts_.consumer).status());
    MutexLock lk(sh_->mu);
    ++sh_->stats.malformed;
    sh_->stats.last_error = "redis pool " + opts_.pool + ": discarded " + entry.malformed;
    return Status::error(Code::kCancelled, "malformed");
  }
  std::uint32_t retries = 0;
  {
    MutexLock lk(sh_->mu);
    if (sh_->dead) return Status::error(Code::kCancelled, "dead");
    sh_->held.try_emplace(key_of(entry));
    retries = entry.task.options.retries.value_or(sh_->default_retries);
  }
  std::uint32_t before = entry.attempts;  // attempts other nodes made
  if (claimed) {                          // its lost attempt, recorded by the beat, counts
    ++before;
    if (before > retries) {
      TaskResult account = exhausted_account(entry, feeder::lost_error(opts_.consumer));
      MutexLock lk(sh_->mu);
      sh_->push_end({std::move(entry), std::move(account)});
      return Status::error(Code::kCancelled, "ended");
    }
  }
  if (!pass_limits(c, entry, !claimed)) return Status::error(Code::kCancelled, "not run here");
  return local_options(entry, before);
}

void RedisFeeder::run_locally(Connection& c, std::vector<StreamEntry> entries, bool claimed) {
  // Each task's entry, shared by its on_done (which moves it into its end) and this call
  // (which hands it back if the pool refuses it: then on_done never runs).
  std::vector<std::shared_ptr<StreamEntry>> kept;
  std::vector<EntryKey> keys;  // each task's entry and id, read before on_done may move it
  std::vector<std::uint64_t> ids;
  std::vector<BatchTask> tasks;
  kept.reserve(entries.size());
  keys.reserve(entries.size());
  ids.reserve(entries.size());
  tasks.reserve(entries.size());
  for (StreamEntry& entry : entries) {
    auto o = prepare(c, entry, claimed);
    if (!o) continue;  // discarded, ended, throttled, handed back or not this node's
    auto e = std::make_shared<StreamEntry>(std::move(entry));
    BatchTask& t = tasks.emplace_back();
    t.type = e->task.type;
    t.payload = std::move(e->task.payload);  // the pool's now: no end or hand-back needs it
    t.options = std::move(o).value();
    t.options.on_done = on_end(sh_, e, false);
    keys.push_back(key_of(*e));
    ids.push_back(e->task_id);
    kept.push_back(std::move(e));
  }
  if (tasks.empty()) return;
  const bool lone = !claimed && tasks.size() == 1 && arm_lone();
  if (lone) {  // its end, while the reader waits for it, is the reader's (lone_end)
    tasks[0].options.on_done = on_end(sh_, kept[0], true);
    tasks[0].options.on_done_on_waiter = true;  // short, and never waits on the pool
  }
  std::vector<Result<Ticket>> tickets = submit_locally(std::move(tasks), lone);
  {
    MutexLock lk(sh_->mu);
    for (std::size_t i = 0; i < tickets.size(); ++i) {
      // Unless it ended already (its end written and the entry let go).
      if (!tickets[i]) continue;
      if (auto it = sh_->held.find(keys[i]); it != sh_->held.end()) {
        it->second.task_id = ids[i];
        it->second.ticket = *tickets[i];
      }
    }
  }
  for (std::size_t i = 0; i < tickets.size(); ++i) {
    if (tickets[i]) continue;  // the entry is its on_done's now
    const Status& refusal = tickets[i].status();
    const Code code = refusal.code();
    if (code == Code::kInvalidArgument || code == Code::kTooLarge) {
      // The task itself (its type, timeout or payload is not one this node's pool accepts):
      // handed back and counted, at no pause, as the pool takes other tasks.
      hand_back(std::move(*kept[i]), refusal.to_string(), true);
      continue;
    }
    // Draining, stopping, its queue full: another node (or this one later) runs it. This
    // node reads nothing for a while.
    {
      MutexLock lk(sh_->mu);
      sh_->paused_until = Clock::now() + kRefusedPause;
    }
    hand_back(std::move(*kept[i]), refusal.to_string());
  }
  if (lone) finish_lone(c, tickets[0] ? std::optional(*tickets[0]) : std::nullopt);
}

std::function<void(const TaskResult&)> RedisFeeder::on_end(std::shared_ptr<Shared> sh,
                                                           std::shared_ptr<StreamEntry> e,
                                                           bool lone) {
  return [sh = std::move(sh), e = std::move(e), lone](const TaskResult& r) {
    const bool shutdown = stopped_here(r);
    MutexLock lk(sh->mu);
    if (sh->dead) return;
    if (lone && sh->lone_armed) {
      sh->lone_armed = false;
      sh->lone_end.emplace(Ended{std::move(*e), r, shutdown});
    } else {
      sh->push_end({std::move(*e), r, shutdown});
    }
    sh->ended_locally(r);
  };
}

std::vector<Result<Ticket>> RedisFeeder::submit_locally(std::vector<BatchTask> tasks, bool lone) {
  if (!lone) return pool_.submit_batch(std::move(tasks));  // one lock, one wake-up
  std::vector<Result<Ticket>> one;
  one.push_back(pool_.submit(std::move(tasks[0].type), std::move(tasks[0].payload),
                             std::move(tasks[0].options)));
  return one;
}

bool RedisFeeder::pass_limits(Connection& c, StreamEntry& entry, bool may_wait) {
  std::vector<TaskUpkeep::Bucket> buckets;
  std::optional<TaskUpkeep::Cap> cap;
  {
    MutexLock lk(sh_->mu);
    if (!sh_->limits.any()) return true;  // the common case: no key built, no round trip
    cap = limits_of(keys_, sh_->limits, entry, buckets);
  }
  if (buckets.empty() && !cap) return true;
  const bool pool_limited = !buckets.empty() && buckets.front().key == keys_.rate_key("pool", "");
  // A task over its type's cap is tried again from 100 ms later, a backlog spread over
  // 100 ms per `max` tasks (the throttle's spacing, on a bucket-like key of the cap's own).
  const TaskUpkeep::Bucket cap_bucket{cap ? keys_.rate_key("cap", entry.task.type) : "",
                                      cap ? cap->max : 1, 100, 1};
  for (;;) {
    auto taken = upkeep_.take_tokens(c, buckets, cap, &entry, opts_.consumer);
    note(taken.status());
    if (!taken) {
      hand_back(entry, "its rate limits could not be taken: " + taken.status().to_string());
      return false;
    }
    if (taken->not_yours) {  // claimed by another node while this one stalled: not run here
      MutexLock lk(sh_->mu);
      sh_->held.erase(key_of(entry));
      ++sh_->stats.fenced;
      sh_->cv.notify_all();  // a place is free
      return false;
    }
    if (taken->taken) {
      entry.leased = entry.leased || cap.has_value();
      return true;
    }
    if (may_wait && pool_limited && taken->worst == 0) {
      // The pool's own rate: no task of the pool may start on any node before a token is
      // back, so this node waits for it, holding the entry, rather than read more.
      MutexLock lk(sh_->mu);
      ++sh_->stats.throttle_waits;
      const auto until = Clock::now() + std::chrono::milliseconds(taken->wait_ms);
      while (!sh_->stopping && sh_->reading &&
             sh_->cv.wait_until(sh_->mu, until) == std::cv_status::no_timeout) {
      }
      const bool stop = sh_->stopping || !sh_->reading;
      if (!stop) continue;
      lk.unlock();
      hand_back(entry, "the node stopped reading while the pool's rate held the task");
      return false;
    }
    const TaskUpkeep::Bucket& worst =
        taken->worst < buckets.size() ? buckets[taken->worst] : cap_bucket;
    auto due = upkeep_.throttle(c, entry, opts_.consumer, worst, taken->wait_ms, wall_ms());
    note(due.status());
    if (!due) {
      hand_back(entry, "it could not be throttled: " + due.status().to_string());
      return false;
    }
    MutexLock lk(sh_->mu);
    sh_->held.erase(key_of(entry));
    if (*due) {
      ++sh_->stats.throttled;
      sh_->throttle_due.insert(**due);
    } else {
      ++sh_->stats.fenced;
    }
    sh_->cv.notify_all();  // a place is free
    return false;
  }
}

void RedisFeeder::move_throttled(Connection& c) {
  const std::int64_t now = wall_ms();
  std::size_t due = 0;
  {
    MutexLock lk(sh_->mu);
    const auto end = sh_->throttle_due.upper_bound(now);
    due = static_cast<std::size_t>(std::distance(sh_->throttle_due.begin(), end));
    sh_->throttle_due.erase(sh_->throttle_due.begin(), end);
  }
  if (due == 0) return;
  // Those due on other nodes' throttles too, oldest first; the beat moves what is left.
  note(upkeep_.move_due(c, now, due + 16).status());
}

void RedisFeeder::hand_back(StreamEntry entry, const std::string& why, bool refused) {
  TaskResult account;
  account.id = entry.task_id;
  account.error = why;
  MutexLock lk(sh_->mu);
  if (sh_->dead) return;
  sh_->stats.last_error = "redis pool " + opts_.pool + ": handed task " +
                          std::to_string(entry.task_id) + " back: " + why;
  sh_->push_end({std::move(entry), std::move(account), true, refused ? why : ""});
}

}  // namespace sandpool::redis
