// RedisPools (redis_pools.hpp): the feeders, the pools attached and detached, the requests
// that write (submit, schedule slots, cancel) and the status; the reads and the waits are in
// redis_pools_reads.cpp, the dead letters' replay and purge in redis_pools_letters.cpp.
#include <sandpool/service/redis_pools.hpp>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <random>
#include <set>
#include <utility>

#include <spdlog/logger.h>
#include <nlohmann/json.hpp>
#include <sandpool/base/secret_file.hpp>
#include <sandpool/base/thread_name.hpp>
#include <sandpool/base/wall_clock.hpp>

namespace sandpool::poold {
namespace {

// A short, stable id of the state directory: FNV-1a of its path, 8 hex digits.
std::string state_id_of(const std::string& path) {
  std::uint32_t h = 2166136261u;
  for (const char c : path) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  char out[9];
  std::snprintf(out, sizeof out, "%08x", h);
  return out;
}

}  // namespace

Result<RedisPools::Options> RedisPools::options_from(const ServiceConfig& service,
                                                     const std::string& state_dir) {
  const RedisConfig& rc = service.redis;
  Options o;
  o.address = rc.address;
  auto endpoint = redis::Endpoint::parse(rc.address);
  if (!endpoint) return endpoint.status().with_context("service.redis.address");
  o.endpoint = std::move(endpoint).value();
  if (!rc.password_file.empty()) {
    auto password =
        read_secret_file(rc.password_file, "service.redis.password_file " + rc.password_file);
    if (!password) return password.status();
    o.endpoint.password = std::move(password).value();
  }
  o.endpoint.db = static_cast<int>(rc.db);
  o.prefix = rc.prefix;
  o.limits.finished = rc.finished;
  o.limits.finished_max_age_ms = rc.finished_max_age.count();
  o.limits.finished_max_bytes = rc.finished_max_bytes;
  o.limits.letters = rc.dead_letters;
  o.heartbeat = rc.heartbeat;
  o.state_dir = state_dir;
  o.node = service.node;
  if (o.node.empty()) {
    char host[256] = "localhost";
    (void)::gethostname(host, sizeof host - 1);
    o.node = std::string(host) + "-" + state_id_of(state_dir);
  }
  return o;
}

RedisPools::RedisPools(Options options)
    : opts_(std::move(options)),
      identity_(redis::RedisFeeder::new_identity()),
      any_(redis::PoolKeys(opts_.prefix, "")),
      wake_key_(opts_.prefix + "wake:" + identity_) {}

Result<std::unique_ptr<RedisPools>> RedisPools::start(Options options) {
  std::unique_ptr<RedisPools> p(new RedisPools(std::move(options)));
  auto ping = p->requests_.with([](redis::Connection& c) { return c.command({"PING"}); });
  if (!ping) return p->unavailable("", ping.status());
  if (ping->is_error()) return ping->status().with_context("redis at " + p->opts_.address);
  p->waiter_ = std::thread([raw = p.get()] { raw->wait_loop(); });
  name_thread(p->waiter_.native_handle(), "sp-redis-waits");
  p->waker_ = std::thread([raw = p.get()] { raw->wake_loop(); });
  name_thread(p->waker_.native_handle(), "sp-redis-wake");
  return p;
}

RedisPools::~RedisPools() {
  detach_all();
  bool wake = false;
  {
    MutexLock lk(wait_mu_);
    stopping_ = true;
    wake = blocked_;
  }
  wait_cv_.notify_all();
  wake_cv_.notify_all();
  if (wake) wake_waits();  // its BLPOP ends now, not after kWaitBlock
  if (waiter_.joinable()) waiter_.join();
  if (waker_.joinable()) waker_.join();
  for (const Waiter& w : waiters_) w.done(Status::error(Code::kClosed, "poold is shutting down"));
}

// Lane --------------------------------------------------------------------------------------

Result<redis::Connection*> RedisPools::Lane::open() {
  if (c_ && !c_->broken()) return &*c_;
  c_.reset();
  const auto now = Clock::now();
  if (!last_ && now - failed_at_ < kReconnectGap) return last_;
  auto c = redis::Connection::open(endpoint_);
  if (!c) {
    failed_at_ = now;
    last_ = c.status();
    return last_;
  }
  c_.emplace(std::move(c).value());
  return &*c_;
}

Status RedisPools::Lane::last() const {
  MutexLock lk(mu_);
  return last_;
}

// Pools -------------------------------------------------------------------------------------

Status RedisPools::attach(const PoolConfig& pc, Pool& local) {
  const std::string& name = pc.name;
  redis::FeederOptions fo;
  fo.endpoint = opts_.endpoint;
  fo.prefix = opts_.prefix;
  fo.pool = name;
  fo.consumer = opts_.node;
  fo.identity = identity_;  // every pool of this node holds the one name
  fo.per_worker = std::max<std::uint32_t>(1, pc.concurrency);
  fo.headroom_workers = pc.autoscale.enabled ? pc.autoscale.scale_up_step : 0;
  fo.default_retries = pc.retries;
  fo.retry = pc.retry;
  fo.heartbeat = opts_.heartbeat;
  fo.claim_after = 3 * opts_.heartbeat;
  fo.stream_limits = opts_.limits;
  fo.limits = pc.flow;
  fo.state_dir = opts_.state_dir;
  auto feeder = redis::RedisFeeder::start(local, std::move(fo));
  if (!feeder) return unavailable(name, feeder.status());
  auto a = std::make_unique<Attached>(Attached{
      redis::TaskProducer(redis::PoolKeys(opts_.prefix, name)), std::move(feeder).value(), &local});
  redis::RedisFeeder* replaced = nullptr;
  {
    MutexLock lk(mu_);
    std::unique_ptr<Attached>& slot = pools_[name];
    if (slot) {
      replaced = slot->feeder.get();
      retired_.push_back(std::move(slot));
    }
    slot = std::move(a);
  }
  // Outside mu_ (a reader may sit in a read for a while); only this thread ends retired_'s
  // feeders (retired() runs after the reload that retired them).
  if (replaced != nullptr) replaced->stop_reading();
  return Status::ok();
}

void RedisPools::retire(const std::string& name) {
  redis::RedisFeeder* feeder = nullptr;
  {
    MutexLock lk(mu_);
    auto it = pools_.find(name);
    if (it == pools_.end()) return;
    feeder = it->second->feeder.get();
    retired_.push_back(std::move(it->second));
    pools_.erase(it);
  }
  feeder->stop_reading();
}

void RedisPools::retired(const Pool& local) {
  std::vector<std::unique_ptr<Attached>> done;
  {
    MutexLock lk(mu_);
    for (auto it = retired_.begin(); it != retired_.end();) {
      if ((*it)->local == &local) {
        done.push_back(std::move(*it));
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
  }
  done.clear();  // outside mu_: each feeder writes what it still holds
}

void RedisPools::reconfigured(const PoolConfig& pc) {
  MutexLock lk(mu_);
  auto it = pools_.find(pc.name);
  if (it == pools_.end()) return;
  it->second->feeder->retune(std::max<std::uint32_t>(1, pc.concurrency),
                             pc.autoscale.enabled ? pc.autoscale.scale_up_step : 0, pc.retries,
                             pc.retry);
}

void RedisPools::set_limits(const PoolConfig& pc) {
  const FlowLimits& limits = pc.flow;
  MutexLock lk(mu_);
  auto it = pools_.find(pc.name);
  if (it != pools_.end()) it->second->feeder->set_limits(limits);
}

void RedisPools::stop_reading() {
  // Joined outside mu_ (a reader may sit in a read for a second), so status, metrics and
  // /healthz never wait for it. The feeders live on: only the job thread, which calls this,
  // detaches them.
  std::vector<redis::RedisFeeder*> feeders;
  {
    MutexLock lk(mu_);
    for (const auto& [name, a] : pools_) feeders.push_back(a->feeder.get());
  }
  for (redis::RedisFeeder* f : feeders) f->stop_reading();
}

void RedisPools::detach(const std::string& name) {
  std::unique_ptr<Attached> a;
  {
    MutexLock lk(mu_);
    auto it = pools_.find(name);
    if (it == pools_.end()) return;
    a = std::move(it->second);
    pools_.erase(it);
  }
  a.reset();  // outside mu_: its feeder writes what it still holds
}

void RedisPools::detach_all() {
  std::map<std::string, std::unique_ptr<Attached>> all;
  std::vector<std::unique_ptr<Attached>> retired;
  {
    MutexLock lk(mu_);
    all.swap(pools_);
    retired.swap(retired_);
  }
  all.clear();
  retired.clear();
}

bool RedisPools::serves(const std::string& pool) const {
  MutexLock lk(mu_);
  return pools_.count(pool) != 0;
}

Result<redis::TaskProducer> RedisPools::producer_of(const std::string& pool) const {
  MutexLock lk(mu_);
  auto it = pools_.find(pool);
  if (it == pools_.end()) {
    return Status::error(Code::kNotFound, "no redis pool named '" + pool + "'");
  }
  return it->second->producer;
}

Status RedisPools::unavailable(const std::string& pool, const Status& why) const {
  if (why.code() == Code::kTimeout) {  // a submit sent, its reply lost (outcome_lost)
    return Status::error(Code::kTimeout,
                         "redis pool " + pool + ": redis at " + opts_.address +
                             " did not answer the submit (" + why.message() +
                             "); it may have been accepted: a resubmit with the same "
                             "request_token or idempotency_key is safe, one without may run "
                             "the task twice");
  }
  if (why.code() != Code::kUnavailable) return why;
  return Status::error(Code::kUnavailable,
                       (pool.empty() ? std::string("redis") : "redis pool " + pool + ": redis") +
                           " at " + opts_.address + " unreachable (" + why.message() + ")");
}

// Requests ----------------------------------------------------------------------------------

Result<redis::TaskProducer::Submitted> RedisPools::submit(const std::string& pool,
                                                          const redis::StreamTask& task) {
  auto stream = producer_of(pool);
  if (!stream) return stream.status();
  auto id = requests_.with(
      [&](redis::Connection& c) { return stream->submit(c, task, wall_clock_ms()); });
  if (!id) return unavailable(pool, id.status());
  return id;
}

Result<std::vector<Result<redis::TaskProducer::Submitted>>> RedisPools::submit_many(
    const std::string& pool, const std::vector<redis::StreamTask>& tasks) {
  auto stream = producer_of(pool);
  if (!stream) return stream.status();
  auto ids = requests_.with(
      [&](redis::Connection& c) { return stream->submit_many(c, tasks, wall_clock_ms()); });
  if (!ids) return unavailable(pool, ids.status());
  for (Result<redis::TaskProducer::Submitted>& id : *ids) {
    if (!id) id = unavailable(pool, id.status());
  }
  return ids;
}

Result<redis::TaskProducer::SlotClaim> RedisPools::claim_slot(const std::string& pool,
                                                              const redis::StreamTask& task,
                                                              const std::string& schedule,
                                                              std::int64_t slot_s) {
  auto stream = producer_of(pool);
  if (!stream) return stream.status();
  auto claim = schedules_.with([&](redis::Connection& c) {
    return stream->claim_slot(c, task, schedule, slot_s, opts_.node, wall_clock_ms());
  });
  if (!claim) return unavailable(pool, claim.status());
  return claim;
}

Status RedisPools::set_schedule_paused(const std::string& schedule, bool paused) {
  Status st = jobs_
                  .with([&](redis::Connection& c) -> Result<bool> {
                    if (Status set = any_.set_schedule_paused(c, schedule, paused, opts_.node,
                                                              wall_clock_ms());
                        !set) {
                      return set;
                    }
                    return true;
                  })
                  .status();
  if (!st) return unavailable("", st);
  return Status::ok();
}

Result<redis::TaskProducer::Cancelled> RedisPools::cancel(std::uint64_t id) {
  auto r = requests_.with([&](redis::Connection& c) -> Result<redis::TaskProducer::Cancelled> {
    auto pool = c.command({"HGET", opts_.prefix + "task:" + std::to_string(id), "pool"});
    if (!pool) return pool.status();
    if (pool->is_nil()) {
      return Status::error(Code::kNotFound, "task " + std::to_string(id) + " is not in redis");
    }
    const redis::TaskProducer stream(redis::PoolKeys(opts_.prefix, pool->str));
    return stream.cancel(c, id, wall_clock_ms());
  });
  if (!r) return unavailable("", r.status());
  return r;
}

// Status ------------------------------------------------------------------------------------

std::vector<std::pair<std::string, redis::FeederStats>> RedisPools::feeder_stats() const {
  std::vector<std::pair<std::string, redis::FeederStats>> out;
  MutexLock lk(mu_);
  for (const auto& [name, a] : pools_) out.emplace_back(name, a->feeder->stats());
  return out;
}

std::optional<std::string> RedisPools::problem() const {
  for (const auto& [name, s] : feeder_stats()) {
    if (!s.redis_up) {
      return "redis pool " + name + ": redis at " + opts_.address + " unreachable (" +
             s.last_error + ")";
    }
  }
  return std::nullopt;
}

RedisNodeCounts RedisPools::node_counts(const redis::FeederStats& s) {
  RedisNodeCounts c;
  c.held = s.held;
  c.read = s.read;
  c.claimed = s.claimed;
  c.finished_here = s.finished;
  c.fenced = s.fenced;
  c.released = s.released;
  c.malformed = s.malformed;
  c.deferred = s.deferred;
  c.throttled = s.throttled;
  c.throttle_waits = s.throttle_waits;
  return c;
}

ops::RedisStatus RedisPools::status() const {
  ops::RedisStatus out;
  out.address = opts_.address;
  out.node = opts_.node;
  const auto problem_now = problem();
  out.up = !problem_now;
  if (problem_now) out.last_error = *problem_now;
  std::map<std::string, Result<redis::TaskProducer::Summary>> sums;
  {
    MutexLock lk(summary_mu_);
    sums = summaries_;
  }
  for (const auto& [name, s] : feeder_stats()) {
    ops::RedisPoolStatus& p = out.pools.emplace_back();
    p.name = name;
    static_cast<RedisNodeCounts&>(p) = node_counts(s);
    auto it = sums.find(name);
    if (it == sums.end() || !it->second) continue;  // not read yet, or Redis away
    const redis::TaskProducer::Summary& sum = *it->second;
    p.stream_length = sum.length;
    p.pending = sum.pending;
    p.later = sum.later;
    p.finished = sum.finished;
    p.dead_letters = sum.dead_letters;
    for (const auto& c : sum.consumers) {
      p.consumers.push_back({c.name, c.pending, c.idle_ms, c.alive});
    }
  }
  return out;
}

}  // namespace sandpool::poold
