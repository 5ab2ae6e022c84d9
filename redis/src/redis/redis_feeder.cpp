// RedisFeeder (redis_feeder.hpp): the reader, the writer and the beat of one node.
#include <sandpool/redis/redis_feeder.hpp>

#include <unistd.h>

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>
#include <sandpool/base/posix_call.hpp>

namespace sandpool::redis {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kReadBlock{500};  // a read wakes this often to see places
constexpr std::chrono::milliseconds kRetryFirst{100}, kRetryMax{2000};
constexpr std::size_t kMoveChunk = 1000;  // due tasks moved back per script
// Entries claimed per beat at most: each costs the beat thread a round trip (its lost
// attempt) before its next touch, and a beat late past claim_after lets others claim this
// node's own entries.
constexpr std::size_t kMaxClaimsPerBeat = 256;
// After the local pool refused a task (draining, shutting down), reading waits this long.
constexpr std::chrono::milliseconds kRefusedPause{1000};

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string encode(const Attempt& a) {
  nlohmann::json j = {{"number", a.number},         {"outcome", std::string(to_string(a.outcome))},
                      {"error", a.error},           {"worker_pid", a.worker_pid},
                      {"started_ms", a.started_ms}, {"ended_ms", a.ended_ms}};
  if (!a.backtrace.empty()) j["backtrace"] = a.backtrace;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

RedisFeeder::RedisFeeder(Pool& pool, FeederOptions options)
    : pool_(pool),
      opts_(std::move(options)),
      stream_(opts_.prefix, opts_.pool, opts_.stream_limits),
      sh_(std::make_shared<Shared>()),
      per_worker_(opts_.per_worker),
      headroom_workers_(opts_.headroom_workers) {
  sh_->limits = opts_.limits;
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
  std::unique_ptr<RedisFeeder> f(new RedisFeeder(pool, std::move(options)));
  {
    MutexLock lk(f->sh_->mu);  // no thread of the feeder runs yet; taken for the checker
    f->sh_->default_retries = f->opts_.default_retries;
    f->sh_->retry = f->opts_.retry;
  }
  auto c = Connection::open(f->opts_.endpoint);
  if (!c) return c.status();
  SP_RETURN_IF_ERROR(f->stream_.ensure_group(*c));
  SP_RETURN_IF_ERROR(f->take_name(*c));
  SP_RETURN_IF_ERROR(f->write_kept_ends(*c));  // before anything is read or claimed
  f->reader_ = std::thread([p = f.get()] { p->read_loop(); });
  f->writer_ = std::thread([p = f.get()] { p->write_loop(); });
  f->beater_ = std::thread([p = f.get()] { p->beat_loop(); });
  return f;
}

RedisFeeder::~RedisFeeder() {
  {
    MutexLock lk(sh_->mu);
    sh_->stopping = true;
  }
  sh_->cv.notify_all();
  for (std::thread* t : {&reader_, &writer_, &beater_}) {
    if (t->joinable()) t->join();
  }
  // The tickets' tasks hold on_done callbacks that hold sh_: a cycle while they are kept.
  MutexLock lk(sh_->mu);
  sh_->running.clear();
}

void RedisFeeder::die() {
  {
    MutexLock lk(sh_->mu);
    sh_->stopping = true;
    sh_->dead = true;
  }
  sh_->cv.notify_all();
  for (std::thread* t : {&reader_, &writer_, &beater_}) {
    if (t->joinable()) t->join();
  }
  // The tickets' tasks hold on_done callbacks that hold sh_: a cycle while they are kept.
  MutexLock lk(sh_->mu);
  sh_->running.clear();
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
  s.held = sh_->held.size();
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
    auto holder = TaskStream::beat(c, opts_.prefix, opts_.consumer, identity_, name_ttl());
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

std::size_t RedisFeeder::free_places() {
  const std::size_t cap = capacity();
  MutexLock lk(sh_->mu);
  return cap - std::min(cap, sh_->held.size());
}

// Opens a connection, retrying with backoff until it works or the feeder stops.
namespace {
template <typename Stop>
std::optional<Connection> connect(const Endpoint& e, Stop stopped,
                                  const std::function<void(const Status&)>& note) {
  std::chrono::milliseconds wait = kRetryFirst;
  while (!stopped()) {
    auto c = Connection::open(e);
    note(c.status());
    if (c) return std::move(c).value();
    std::this_thread::sleep_for(wait);
    wait = std::min(kRetryMax, wait * 2);
  }
  return std::nullopt;
}
}  // namespace

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
    const std::size_t free = free_places();
    if (free == 0) {
      const std::size_t cap = capacity();
      MutexLock lk(sh_->mu);
      const auto until = Clock::now() + block;
      while (!sh_->stopping && sh_->reading && sh_->held.size() >= cap &&
             sh_->cv.wait_until(sh_->mu, until) == std::cv_status::no_timeout) {
      }
      continue;
    }
    auto got = stream_.read(*c, opts_.consumer, free, block);
    note(got.status());
    if (!got) {
      if (!c->broken()) std::this_thread::sleep_for(kRetryFirst);  // an entry it cannot parse
      continue;
    }
    // How many attempts each made before (a retry of another node's, a claimed one): its
    // attempts here are numbered on from there. Broken off: the entries are claimed later.
    const std::size_t read = got->size();
    if (Status s = stream_.take(*c, opts_.consumer, *got); !s) {
      note(s);
      continue;
    }
    {
      // Held (so the beat keeps them fresh) while the batch goes through: one may wait for
      // the pool's rate.
      MutexLock lk(sh_->mu);
      sh_->stats.fenced += read - got->size();  // claimed by another since the read: a stall
      for (const StreamEntry& e : *got) {
        if (e.malformed.empty() && !sh_->dead) sh_->held.insert(key_of(e));
      }
    }
    for (StreamEntry& e : *got) {
      {
        MutexLock lk(sh_->mu);
        ++sh_->stats.read;
      }
      run_locally(*c, std::move(e), false);
    }
  }
}

void RedisFeeder::run_locally(Connection& c, StreamEntry entry, bool claimed) {
  if (!entry.malformed.empty()) {  // not a task: nothing to run or end, and nobody waits on it
    note(stream_.discard(c, entry, opts_.consumer).status());
    MutexLock lk(sh_->mu);
    ++sh_->stats.malformed;
    sh_->stats.last_error = "redis pool " + opts_.pool + ": discarded " + entry.malformed;
    return;
  }
  std::uint32_t retries = 0;
  {
    MutexLock lk(sh_->mu);
    if (sh_->dead) return;
    sh_->held.insert(key_of(entry));
    retries = entry.task.retries.value_or(sh_->default_retries);
  }
  std::uint32_t before = entry.attempts;  // attempts other nodes made
  if (claimed) {
    Attempt lost;
    lost.number = before + 1;
    lost.outcome = Outcome::kLost;
    lost.error = "the node running it died (claimed by " + opts_.consumer + ")";
    lost.ended_ms = wall_ms();
    auto r = stream_.record_attempt(c, entry, opts_.consumer, encode(lost));
    note(r.status());
    ++before;
    if (before > retries) {
      TaskResult account;
      account.id = entry.task_id;
      account.type = entry.task.type;
      account.state = TaskState::kDeadLettered;
      account.reason = DeadReason::kRetriesExhausted;
      account.error = lost.error;
      MutexLock lk(sh_->mu);
      sh_->ends.push_back({std::move(entry), std::move(account)});
      sh_->cv.notify_all();
      return;
    }
  }
  if (!pass_limits(c, entry, !claimed)) return;
  SubmitOptions o;
  if (entry.task.timeout_ms) o.timeout = std::chrono::milliseconds(*entry.task.timeout_ms);
  o.retries = 0;  // one attempt here; the next, if any, waits in Redis (write_ends)
  o.attempts_before = before;
  o.priority = entry.task.priority;
  o.key = entry.task.key;
  o.tenant = entry.task.tenant;
  o.on_done = [sh = sh_, entry](const TaskResult& r) {
    // Stopped by this node's shutdown, by the end of a pool a reload replaced or removed, or
    // by this node's pool failing (crash_loop: its workers cannot start, and the task never
    // ran here: one that did ended with its attempt): not the task's end. It goes back to
    // the stream for another node (or this one once it is back, or the pool that replaced
    // it), and no attempt is counted.
    const bool shutdown =
        (r.state == TaskState::kDeadLettered &&
         (r.reason == DeadReason::kShutdown || r.reason == DeadReason::kPoolRemoved ||
          r.reason == DeadReason::kCrashLoop)) ||
        (r.state == TaskState::kCancelled && r.cancel_reason == CancelReason::kShutdown);
    MutexLock lk(sh->mu);
    if (sh->dead) return;
    sh->ends.push_back({entry, r, shutdown});
    sh->cv.notify_all();
  };
  const EntryKey entry_key = key_of(entry);
  const std::uint64_t task_id = entry.task_id;
  auto ticket = pool_.submit(entry.task.type, entry.task.payload, std::move(o));
  if (ticket) {
    MutexLock lk(sh_->mu);
    // Unless it ended already (its end written and the entry let go).
    if (sh_->held.count(entry_key) != 0) {
      sh_->running.emplace(entry_key, std::pair(task_id, *ticket));
    }
  }
  if (!ticket) {
    const Code code = ticket.status().code();
    if (code == Code::kInvalidArgument || code == Code::kTooLarge) {
      // The task itself (its type, timeout or payload is not one this node's pool accepts):
      // handed back and counted, at no pause, as the pool takes other tasks.
      return hand_back(std::move(entry), ticket.status().to_string(), true);
    }
    // Draining, stopping, its queue full: another node (or this one later) runs it. This
    // node reads nothing for a while.
    {
      MutexLock lk(sh_->mu);
      sh_->paused_until = Clock::now() + kRefusedPause;
    }
    hand_back(std::move(entry), ticket.status().to_string());
  }
}

bool RedisFeeder::pass_limits(Connection& c, const StreamEntry& entry, bool may_wait) {
  std::vector<TaskStream::Bucket> buckets;
  std::optional<TaskStream::Cap> cap;
  {
    MutexLock lk(sh_->mu);
    if (!sh_->limits.any()) return true;  // the common case: no key built, no round trip
    const auto add = [&](std::string key, const RateLimit& r) {
      if (r.tasks == 0) return;
      buckets.push_back({std::move(key), r.tasks, r.per.count(), r.burst != 0 ? r.burst : r.tasks});
    };
    add(stream_.rate_key("pool", ""), sh_->limits.pool);
    if (auto it = sh_->limits.task_types.find(entry.task.type);
        it != sh_->limits.task_types.end()) {
      add(stream_.rate_key("type", entry.task.type), it->second);
    }
    if (auto it = sh_->limits.tenants.find(entry.task.tenant); it != sh_->limits.tenants.end()) {
      add(stream_.rate_key("tenant", entry.task.tenant), it->second);
    }
    if (auto it = sh_->limits.type_concurrency.find(entry.task.type);
        it != sh_->limits.type_concurrency.end()) {
      cap = TaskStream::Cap{stream_.cap_key(entry.task.type), it->second, entry.task_id};
    }
  }
  if (buckets.empty() && !cap) return true;
  const bool pool_limited = !buckets.empty() && buckets.front().key == stream_.rate_key("pool", "");
  // A task over its type's cap is tried again from 100 ms later, a backlog spread over
  // 100 ms per `max` tasks (the throttle's spacing, on a bucket-like key of the cap's own).
  const TaskStream::Bucket cap_bucket{cap ? stream_.rate_key("cap", entry.task.type) : "",
                                      cap ? cap->max : 1, 100, 1};
  for (;;) {
    auto taken = stream_.take_tokens(c, buckets, cap, &entry, opts_.consumer);
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
    if (taken->taken) return true;
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
    const TaskStream::Bucket& worst =
        taken->worst < buckets.size() ? buckets[taken->worst] : cap_bucket;
    auto due = stream_.throttle(c, entry, opts_.consumer, worst, taken->wait_ms, wall_ms());
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
  note(stream_.move_due(c, now, due + 16).status());
}

void RedisFeeder::hand_back(StreamEntry entry, const std::string& why, bool refused) {
  TaskResult account;
  account.id = entry.task_id;
  account.error = why;
  MutexLock lk(sh_->mu);
  if (sh_->dead) return;
  sh_->stats.last_error = "redis pool " + opts_.pool + ": handed task " +
                          std::to_string(entry.task_id) + " back: " + why;
  sh_->ends.push_back({std::move(entry), std::move(account), true, refused ? why : ""});
  sh_->cv.notify_all();
}

Status RedisFeeder::write_ends(Connection& c, const std::vector<Ended>& batch) {
  std::vector<TaskStream::EndWrite> writes;
  writes.reserve(batch.size());
  std::vector<std::optional<Fenced>> released(batch.size());
  enum class Written : std::uint8_t { kEnd, kDeferred, kFenced };
  std::vector<Written> outcome(batch.size(), Written::kEnd);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const Ended& e = batch[i];
    std::uint32_t refusals = 0;
    if (!e.refused.empty()) {  // counted first: the last refusal ends the task instead
      auto n = stream_.refused(c, e.entry, opts_.consumer);
      if (!n) return n.status();
      if (*n == 0) {
        outcome[i] = Written::kFenced;
        continue;
      }
      refusals = *n;
    }
    if (e.release && refusals < TaskStream::kMaxRefusals) {  // rare: one round trip each
      auto r = stream_.release(c, e.entry, opts_.consumer);
      if (!r) return r.status();
      released[i] = *r;
      continue;
    }
    if (refusals != 0) {  // an end (`finished`), as any other
      TaskStream::EndWrite& w = writes.emplace_back();
      w.entry = &e.entry;
      w.state = std::string(to_string(TaskState::kDeadLettered));
      w.reason = std::string(to_string(DeadReason::kRejected));
      w.error = "refused by nodes " + std::to_string(refusals) + " times; last by " +
                opts_.consumer + ": " + e.refused;
      w.now_ms = wall_ms();
      continue;
    }
    if (e.account.state == TaskState::kDeadLettered &&
        e.account.reason == DeadReason::kRetriesExhausted) {
      // The local attempt failed and may be retried (the local pool has no retries of its
      // own): the next attempt waits in Redis, unless the task used up its retries there.
      std::vector<std::string> attempts;
      for (const Attempt& a : e.account.history) attempts.push_back(encode(a));
      TaskStream::Backoff b;
      std::uint32_t retries = 0;
      {
        MutexLock lk(sh_->mu);
        b.base_ms = sh_->retry.base.count();
        b.multiplier = sh_->retry.multiplier;
        b.max_ms = sh_->retry.max.count();
        retries = e.entry.task.retries.value_or(sh_->default_retries);
      }
      b.jitter = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
      auto r = stream_.retry(c, e.entry, opts_.consumer, attempts, retries, b, wall_ms());
      if (!r) return r.status();
      if (*r == TaskStream::Retried::kDeferred) {
        outcome[i] = Written::kDeferred;
        continue;
      }
      if (*r == TaskStream::Retried::kNotYours) {
        outcome[i] = Written::kFenced;
        continue;
      }
      if (*r == TaskStream::Retried::kCancelled) {  // asked while the attempt ran: no retry
        TaskStream::EndWrite& w = writes.emplace_back();
        w.entry = &e.entry;
        w.attempts = std::move(attempts);
        w.state = std::string(to_string(TaskState::kCancelled));
        w.error = "cancelled; its last attempt failed: " + e.account.error;
        w.reason = std::string(to_string(CancelReason::kUser));
        w.now_ms = wall_ms();
        continue;
      }
    }
    TaskStream::EndWrite& w = writes.emplace_back();
    w.entry = &e.entry;
    for (const Attempt& a : e.account.history) w.attempts.push_back(encode(a));
    w.state = std::string(to_string(e.account.state));
    w.result = e.account.result;
    w.error = e.account.error;
    if (e.account.state == TaskState::kDeadLettered) w.reason = to_string(e.account.reason);
    w.now_ms = wall_ms();
  }
  auto answers = stream_.end_all(c, opts_.consumer, writes);
  if (!answers) return answers.status();
  MutexLock lk(sh_->mu);
  std::size_t next = 0;  // in answers
  for (std::size_t i = 0; i < batch.size(); ++i) {
    sh_->held.erase(key_of(batch[i].entry));
    sh_->running.erase(key_of(batch[i].entry));
    // A batch sent again after a connection broke mid-way finds its first ends written:
    // they count as fenced, and the task still has exactly one end.
    if (outcome[i] == Written::kDeferred) {
      ++sh_->stats.deferred;
      continue;
    }
    if (outcome[i] == Written::kFenced) {
      ++sh_->stats.fenced;
      continue;
    }
    const Fenced answer = released[i] ? *released[i] : (*answers)[next++];
    if (answer == Fenced::kNotYours) {
      ++sh_->stats.fenced;
    } else if (released[i]) {
      ++sh_->stats.released;
    } else {
      ++sh_->stats.finished;
    }
  }
  sh_->cv.notify_all();  // places are free
  return Status::ok();
}

Status RedisFeeder::write_kept_ends(Connection& c) {
  if (opts_.state_dir.empty()) return Status::ok();
  const std::string path = unwritten_ends::path_in(opts_.state_dir, opts_.pool);
  auto kept = unwritten_ends::read(path, opts_.pool, opts_.consumer);
  if (!kept) return kept.status().code() == Code::kNotFound ? Status::ok() : kept.status();
  constexpr std::ptrdiff_t kChunk = 256;
  for (auto at = kept->ends.begin(); at != kept->ends.end();) {
    const auto end = kept->ends.end() - at > kChunk ? at + kChunk : kept->ends.end();
    SP_RETURN_IF_ERROR(write_ends(c, std::vector<Ended>(at, end)));  // the file stays
    at = end;
  }
  if (kept->refused != 0) {
    MutexLock lk(sh_->mu);
    sh_->stats.last_error = "redis pool " + opts_.pool + ": " + std::to_string(kept->refused) +
                            " kept ends refused, the first: " + kept->first_refusal;
  }
  return posix_call("unlink(" + path + ")", [&] { return ::unlink(path.c_str()); }).status();
}

void RedisFeeder::keep_ends() {
  std::deque<Ended> ends;
  {
    MutexLock lk(sh_->mu);
    ends.swap(sh_->ends);
  }
  if (ends.empty() || opts_.state_dir.empty()) return;
  const std::string path = unwritten_ends::path_in(opts_.state_dir, opts_.pool);
  auto kept = unwritten_ends::append(path, opts_.pool, opts_.consumer, ends);
  MutexLock lk(sh_->mu);
  sh_->stats.kept_ends += kept ? *kept : 0;
  if (!kept || *kept < ends.size()) {
    sh_->stats.last_error = "redis pool " + opts_.pool + ": " +
                            std::to_string(ends.size() - (kept ? *kept : 0)) +
                            " ends given up at shutdown (" +
                            (kept ? "over the file's bound" : kept.status().to_string()) + ")";
  }
}

void RedisFeeder::write_loop() {
  constexpr std::size_t kMaxBatch = 256;  // ends per round trip
  // Connecting gives up once the feeder stops: then one attempt, and the ends are kept.
  auto stopped = [this] {
    MutexLock lk(sh_->mu);
    return sh_->dead || sh_->stopping;
  };
  auto noter = [this](const Status& s) { note(s); };
  std::optional<Connection> c;
  std::chrono::milliseconds wait = kRetryFirst;
  for (;;) {
    std::vector<Ended> batch;
    bool stopping = false;
    {
      MutexLock lk(sh_->mu);
      while (!sh_->dead && !sh_->stopping && sh_->ends.empty()) sh_->cv.wait(sh_->mu);
      if (sh_->dead || sh_->ends.empty()) return;
      stopping = sh_->stopping;
      const std::size_t n = std::min(kMaxBatch, sh_->ends.size());
      batch.assign(sh_->ends.begin(), sh_->ends.begin() + static_cast<std::ptrdiff_t>(n));
    }
    if (!c || c->broken()) {
      if (stopping) {
        auto once = Connection::open(opts_.endpoint);
        note(once.status());
        if (once) c.emplace(std::move(once).value());
      } else {
        c = connect(opts_.endpoint, stopped, noter);
      }
      if (!c) {
        if (!stopping) continue;  // it began to stop, or died, meanwhile: the loop's top says
        keep_ends();
        return;
      }
    }
    const Status s = write_ends(*c, batch);
    note(s);
    if (s) {
      MutexLock lk(sh_->mu);
      sh_->ends.erase(sh_->ends.begin(),
                      sh_->ends.begin() + static_cast<std::ptrdiff_t>(batch.size()));
      wait = kRetryFirst;
      continue;
    }
    // Redis away (or an error of the server): the ends wait, in order, and are tried again;
    // stopping, after one attempt they are kept in the state dir for the next start.
    {
      MutexLock lk(sh_->mu);
      if (sh_->stopping) {
        lk.unlock();
        keep_ends();
        return;
      }
      const auto until = Clock::now() + wait;
      while (!sh_->dead && sh_->cv.wait_until(sh_->mu, until) == std::cv_status::no_timeout) {
      }
    }
    wait = std::min(kRetryMax, wait * 2);
  }
}

void RedisFeeder::cancel_asked(Connection& c) {
  std::vector<std::uint64_t> ids;
  std::vector<Ticket> tickets;
  {
    MutexLock lk(sh_->mu);
    for (const auto& [entry, run] : sh_->running) {
      ids.push_back(run.first);
      tickets.push_back(run.second);
    }
  }
  if (ids.empty()) return;
  auto asked = stream_.cancel_asked(c, ids);
  note(asked.status());
  if (!asked) return;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if ((*asked)[i]) (void)tickets[i].cancel();  // its end is written as any other
  }
}

void RedisFeeder::beat_loop() {
  auto stopped = [this] { return stopping(); };
  auto noter = [this](const Status& s) { note(s); };
  std::optional<Connection> c;
  // Claims wait until this node has beaten for claim_after since its start or since a beat
  // that failed or waited over a heartbeat for Redis: a stall of Redis long enough to lapse
  // the keys (three beats) makes every pending entry idle and every key gone at once, and
  // the live nodes set their keys and touch their entries again within a beat of its end,
  // so by then only a dead node's entries are idle and keyless. (The claimant's own stall
  // needs no wait: the other nodes kept their keys.)
  Clock::time_point beating_since{};  // {}: not since a stall
  while (!stopped()) {
    if (!c || c->broken()) {
      c = connect(opts_.endpoint, stopped, noter);
      if (!c) return;
    }
    const auto sent = Clock::now();
    auto beat = TaskStream::beat(*c, opts_.prefix, opts_.consumer, identity_, name_ttl());
    note(beat.status());
    const auto beat_at = Clock::now();
    if (!beat || beat_at - sent > opts_.heartbeat) {
      beating_since = {};
    } else if (beating_since == Clock::time_point{}) {
      beating_since = beat_at;
    }
    if (beat && *beat) {  // thought dead, its name taken: it must not read as that consumer
      MutexLock lk(sh_->mu);
      sh_->stopping = true;
      sh_->stats.last_error = "redis pool " + opts_.pool + ": the node name '" + opts_.consumer +
                              "' was taken by " + **beat + " while this node was away; stopped";
      sh_->cv.notify_all();
      return;
    }
    std::vector<EntryKey> held;
    {
      MutexLock lk(sh_->mu);
      held.assign(sh_->held.begin(), sh_->held.end());
    }
    if (beat) note(stream_.touch(*c, opts_.consumer, held).status());
    if (beat) cancel_asked(*c);
    // A dead node's entries are claimed whether or not a place is free (the reader refills
    // each freed place within a round trip): they wait in the local pool for the tasks that
    // run now, not for the stream's backlog. Up to one capacity beyond it at once. Only once
    // this node has beaten for claim_after since it started or since a beat that failed or
    // stalled (docs/redis-pools.md).
    std::size_t room = 0;
    {
      const std::size_t cap = capacity();
      MutexLock lk(sh_->mu);
      if (sh_->reading) room = 2 * cap - std::min(2 * cap, sh_->held.size());
    }
    room = std::min(room, kMaxClaimsPerBeat);
    const bool settled =
        beating_since != Clock::time_point{} && beat_at - beating_since >= opts_.claim_after;
    if (beat && room > 0 && settled) {
      auto claimed = stream_.claim_idle(*c, opts_.consumer, opts_.claim_after, room);
      note(claimed.status());
      // Each claimed task's attempts so far (the lost one is counted on from there). Broken
      // off: the entries, claimed but not held, go idle again and are claimed later.
      Status took = claimed ? stream_.take(*c, opts_.consumer, *claimed) : claimed.status();
      if (claimed) note(took);
      if (took) {
        for (StreamEntry& e : *claimed) {
          {
            MutexLock lk(sh_->mu);
            ++sh_->stats.claimed;
          }
          run_locally(*c, std::move(e), true);
        }
      }
    }
    // Every task due (a backoff over, a scheduled time come), in chunks (Redis runs other
    // scripts between them), so none is more than a beat late however many fall due at once;
    // for half a heartbeat at most, so the next beat (the heartbeat key, the touch of the
    // entries held) is never late for it: what is left moves at the next beat.
    const auto move_until = Clock::now() + opts_.heartbeat / 2;
    for (Result<std::size_t> moved = kMoveChunk;
         beat && moved && *moved == kMoveChunk && !stopped() && Clock::now() < move_until;) {
      moved = stream_.move_due(*c, wall_ms(), kMoveChunk);
      note(moved.status());
    }
    if (beat) note(stream_.trim_finished(*c, wall_ms(), 1000).status());
    MutexLock lk(sh_->mu);
    const auto until = Clock::now() + opts_.heartbeat;
    while (!sh_->stopping && sh_->cv.wait_until(sh_->mu, until) == std::cv_status::no_timeout) {
    }
  }
}

}  // namespace sandpool::redis
