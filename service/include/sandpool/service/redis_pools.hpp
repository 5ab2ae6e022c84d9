// RedisPools: poold's side of the Redis pools (docs/redis-pools.md). For each pool with
// `backend: redis` it runs a RedisFeeder over the pool's local Pool (reading the pool's stream
// as this node's consumer, running what it reads, writing the ends back), and it answers the
// cluster-wide operations on the pools' tasks from Redis: submit and batch, task, wait, and
// the `redis` part of `status`.
//
// Threads: submit() and submit_many() run on the service's request thread (and a schedule's
// run-now on its job thread: a lane's mutex makes that safe), task() on its reads thread, the
// dead letters' replay and purge on its job thread, claim_slot() and task_open() on its
// schedules' thread; each of those lanes has a connection of its own. Waits are answered by a
// thread of their own (sp-redis-waits) on a connection of its own: it registers each awaited
// task's wait in its hash (the script that writes the end, on whichever node, then pushes to
// the task's end list) and blocks in one BLPOP on every awaited task's end list and this
// node's wake list, at most kWaitBlock (redis_pools_waits.cpp; a new wait asks a thread of its
// own, sp-redis-wake, to push to that list). That thread also reads the
// pools' summaries for status(), which any thread may call. The feeders have their own threads
// (redis_feeder.hpp). attach() and detach() run on the thread that starts, reloads or stops the
// service.
//
// Failures: a call that cannot reach Redis answers kUnavailable naming the pool and the
// server (nothing was sent: the submitter may submit again); a submit sent whose reply was
// lost (a reply timeout, a connection broken after the send) answers kTimeout, "outcome
// unknown": it may have run, and only a resubmit under the same idempotency key (or request
// token) is safe. A
// lane's connection is opened again on its next call, at most once per kReconnectGap.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/config/config.hpp>
#include <sandpool/control/ops/reads.hpp>
#include <sandpool/pool/pool.hpp>
#include <sandpool/store/dead_letters.hpp>

#include <sandpool/redis/redis_client.hpp>
#include <sandpool/redis/redis_feeder.hpp>
#include <sandpool/redis/task_producer.hpp>

namespace spdlog {
class logger;
}

namespace sandpool::poold {

class RedisPools {
 public:
  using Clock = std::chrono::steady_clock;
  // The waits thread's BLPOP blocks at most this long (below the connection's 2 s reply
  // timeout); it registers every wait again each kWaitRenew (an end another node's waiter
  // popped, a push lost with a Redis restart, is told again); at most kMaxWaits waits at once.
  static constexpr std::chrono::milliseconds kWaitBlock{500};
  static constexpr std::chrono::milliseconds kWaitRenew{1000};
  static constexpr std::size_t kMaxWaits = 4096;
  static constexpr std::chrono::milliseconds kReconnectGap{250};
  static constexpr std::chrono::milliseconds kSummaryEvery{1000};

  struct Options {
    std::string address;  // as configured (status, errors)
    redis::Endpoint endpoint;
    std::string prefix = "sandpool:";
    std::string node;          // this node's consumer name
    redis::PoolLimits limits;  // finished tasks and dead letters kept per pool
    std::chrono::milliseconds heartbeat{1000};
    std::shared_ptr<spdlog::logger> log;
    // Where a feeder keeps the ends Redis could not take when it stopped (FeederOptions).
    std::string state_dir;
  };
  // The options service.redis and service.node give: the password read from its file (mode
  // 0600), and the node's name, or else the host's name and `state_id` (the state
  // directory's id).
  static Result<Options> options_from(const ServiceConfig& service, const std::string& state_id);
  // Checks that Redis answers (a node that cannot reach it at start does not start).
  static Result<std::unique_ptr<RedisPools>> start(Options options);
  ~RedisPools();  // detaches every pool
  RedisPools(const RedisPools&) = delete;
  RedisPools& operator=(const RedisPools&) = delete;

  // Starts reading the Redis pool `pc` into `local`: at most its target workers x its
  // concurrency tasks held at once (plus one scale_up_step's worth when it autoscales, so a
  // backlog shows in its queue wait), so a scale changes what the node takes; the pool's
  // retries for tasks that carry none, and its retry policy's backoff (kept in Redis between
  // attempts). `local` must outlive detach(pc.name). A pool of that name attached already
  // (a reload replaces it) is retired as retire() does, once the new feeder started; when it
  // cannot start, the old one goes on as it was.
  Status attach(const PoolConfig& pc, Pool& local) EXCLUDES(mu_);
  // A reload replaced or removed the pool `name`, whose local pool drains what it took: its
  // feeder reads and claims nothing more, but keeps what it holds fresh in Redis and writes
  // the ends of what still runs, until retired(that local pool) once it has shut down.
  void retire(const std::string& name) EXCLUDES(mu_);
  // The retired feeders of `local` stop (their queued ends written first): it has shut down.
  void retired(const Pool& local) EXCLUDES(mu_);
  // A reload reconfigured the Redis pool `pc` in place: its feeder follows (its concurrency
  // and autoscale step in what it reads, its retries and backoff in what it ends).
  void reconfigured(const PoolConfig& pc) EXCLUDES(mu_);
  // A reload's rate limits of Redis pool `pc` (cluster-wide: the feeder takes their tokens
  // in Redis; the local pool has none, Service::pool_options()).
  void set_limits(const PoolConfig& pc) EXCLUDES(mu_);
  // A shutdown begins: no pool takes new entries; what runs may still end and be written.
  void stop_reading() EXCLUDES(mu_);
  // Stops the pool's feeder (its queued ends written first; what still runs locally is left
  // pending for this node: another claims it). detach_all(): every pool's, and the retired.
  void detach(const std::string& name) EXCLUDES(mu_);
  void detach_all() EXCLUDES(mu_);
  bool serves(const std::string& pool) const EXCLUDES(mu_);
  static bool is_cluster_id(std::uint64_t id) { return id >= redis::PoolKeys::kFirstId; }

  // The task's id, and `existing` when its idempotency key named an earlier task.
  Result<redis::TaskProducer::Submitted> submit(const std::string& pool,
                                                const redis::StreamTask& task);
  Result<std::vector<Result<redis::TaskProducer::Submitted>>> submit_many(
      const std::string& pool, const std::vector<redis::StreamTask>& tasks);
  // The schedules' thread (sp-sched), on a connection of its own: a schedule's slot claimed
  // and, when the claim is won, submitted (redis::TaskProducer::claim_slot), as this node.
  Result<redis::TaskProducer::SlotClaim> claim_slot(const std::string& pool,
                                                    const redis::StreamTask& task,
                                                    const std::string& schedule,
                                                    std::int64_t slot_s);
  // The service's job thread: pauses or resumes schedule `schedule` on every node
  // (redis::TaskProducer::set_schedule_paused), as this node.
  Status set_schedule_paused(const std::string& schedule, bool paused);
  // The schedules' thread: true iff cluster task `id` has not ended (false when Redis does
  // not know it, evicted after its end).
  Result<bool> task_open(std::uint64_t id);
  // Cancels a cluster task wherever it is (redis::TaskProducer::cancel).
  Result<redis::TaskProducer::Cancelled> cancel(std::uint64_t id);
  // The dead letters of Redis pool `pool` that match `filter` (its pool member aside), newest
  // first, at most `limit`, from the one after `after` (a page's `next`; "": the newest);
  // each with its task's id as letter id (cluster ids are unique). A page looks at
  // kLetterScan letters at most: it may hold fewer than `limit` and still have a `next`.
  // `next`: the dead-letter stream's entry id to go on after; none on the last page.
  static constexpr std::size_t kLetterScan = 10000;
  struct LetterPage {
    std::vector<DeadLetter> letters;
    std::optional<std::string> next;
  };
  Result<LetterPage> dead_letters(const std::string& pool, const DeadLetterFilter& filter,
                                  std::size_t limit, const std::string& after = "");
  // The dead letter of cluster task `id`, in whichever Redis pool has it (kNotFound: none).
  Result<DeadLetter> dead_letter(std::uint64_t id);
  // Replay and purge of the dead letters in Redis (redis::TaskProducer::replay_letters), on the
  // service's job thread (a connection of its own), in chunks. By `filter` (its pool member
  // aside) in Redis pool `pool`: what was replayed, purged and left.
  Result<redis::TaskProducer::LetterSweep> replay_letters(const std::string& pool,
                                                          const DeadLetterFilter& filter);
  Result<redis::TaskProducer::LetterSweep> purge_letters(const std::string& pool,
                                                         const DeadLetterFilter& filter);
  // The letter of cluster task `id`, in the Redis pool its hash names (or, its hash evicted,
  // whichever pool this node serves has it): replayed (the task keeps its id), or kNotFound
  // (no such letter: never, or replayed or purged meanwhile), or kInvalidArgument (it was
  // left: why).
  Result<std::uint64_t> replay_letter(std::uint64_t id);
  // Purges it; how many letters were (0 or 1).
  Result<std::uint64_t> purge_letter(std::uint64_t id);
  // The task's account from its hash (kNotFound: Redis does not know it).
  Result<TaskResult> task(std::uint64_t id);
  // Calls `done` once, on the waits thread: with the task's account once it ends, or as it is
  // when `deadline` passes first (nullopt: no deadline), or with the error that kept it from
  // being read at that point; at once (on the caller's thread) with kQueueFull when
  // kMaxWaits waits are held, or kClosed when poold stops. A node's shutdown answers every
  // wait held (kClosed). Never waits for Redis (the wake of the waits thread's BLPOP is
  // pushed by a thread of its own).
  void wait(std::uint64_t id, std::optional<Clock::time_point> deadline,
            std::function<void(const Result<TaskResult>&)> done) EXCLUDES(wait_mu_);
  // Never waits for Redis: the cluster's figures are those the waits thread read last (every
  // kSummaryEvery).
  ops::RedisStatus status() const EXCLUDES(mu_, summary_mu_);
  // Per pool: this node's figures (the metrics).
  std::vector<std::pair<std::string, redis::FeederStats>> feeder_stats() const EXCLUDES(mu_);
  // This node's counts of a feeder's figures (the `status` reply's and the metrics'): the one
  // conversion from the redis library's FeederStats.
  static RedisNodeCounts node_counts(const redis::FeederStats& s);
  // nullopt: Redis answers (the last call of every feeder and lane succeeded).
  std::optional<std::string> problem() const;
  const std::string& node() const { return opts_.node; }

 private:
  // A connection owned by one of the service's threads, opened on demand.
  class Lane {
   public:
    explicit Lane(const redis::Endpoint& e) : endpoint_(e) {}
    // Runs `f` with the connection (opening it first when needed).
    template <class F>
    std::invoke_result_t<F&, redis::Connection&> with(F&& f) EXCLUDES(mu_);
    Status last() const EXCLUDES(mu_);

   private:
    Result<redis::Connection*> open() REQUIRES(mu_);
    const redis::Endpoint& endpoint_;
    // Held across the call `with` runs: one thread's call at a time on the connection.
    mutable Mutex mu_;
    std::optional<redis::Connection> c_ GUARDED_BY(mu_);
    Clock::time_point failed_at_ GUARDED_BY(mu_){};
    Status last_ GUARDED_BY(mu_) = Status::ok();
  };
  struct Attached {
    redis::TaskProducer producer;  // the pool's submits, cancels and reads
    std::unique_ptr<redis::RedisFeeder> feeder;
    Pool* local = nullptr;  // its max_timeout bounds a replay
  };
  struct Waiter {
    std::uint64_t id = 0;
    std::optional<Clock::time_point> deadline;
    std::function<void(const Result<TaskResult>&)> done;
    bool registered = false;  // its wait is in the task's hash (await_end.lua)
    bool told = false;        // its end list was popped: answered once its account says ended
  };
  // One round of the waits thread: what it registers and waits on, and for how long.
  struct WaitRound {
    std::vector<std::uint64_t> fresh, awaited;
    std::chrono::milliseconds block{1};
  };

  explicit RedisPools(Options options);
  Result<redis::TaskProducer> producer_of(const std::string& pool) const EXCLUDES(mu_);  // a copy
  Status unavailable(const std::string& pool, const Status& why) const;
  // The served pools that may hold the letter of cluster task `id` (jobs lane).
  Result<std::vector<std::string>> letter_pools(std::uint64_t id) EXCLUDES(mu_);
  Result<redis::TaskProducer::LetterSweep> sweep(const std::string& pool,
                                                 const DeadLetterFilter& filter, bool replay)
      EXCLUDES(mu_);
  void wait_loop() EXCLUDES(wait_mu_);
  // The next round's ids, and its block until the first deadline or `until` (kWaitBlock at most).
  WaitRound next_round(Clock::time_point until) REQUIRES(wait_mu_);
  // Takes out of waiters_ those a round answers (their task ended, is unknown, or their
  // deadline passed), or, when the round failed, marks every wait to register again.
  std::vector<Waiter> settle(const WaitRound& round,
                             const Result<redis::TaskProducer::AwaitRound>& got) REQUIRES(wait_mu_);
  // Answers each with its task's account (on the waits thread's connection); a waiter told
  // an end whose account is not an end (a stale push) goes back to waiting.
  // `read`: a task's account the round read already (TaskProducer::AwaitRound::account).
  void answer(std::vector<Waiter> ready, std::optional<redis::StoredTask> read) EXCLUDES(wait_mu_);
  // Ends the waits thread's BLPOP now (a push to wake_key_, on a lane of its own).
  void wake_waits();
  // The wake thread (sp-redis-wake): wake_waits() each time wait() asks (wake_asked_).
  void wake_loop() EXCLUDES(wait_mu_);
  void refresh_summaries() EXCLUDES(mu_, summary_mu_);  // the waits thread

  const Options opts_;
  // This process's claim to the node's name, shared by every pool's feeder (two pools of one
  // node beat one heartbeat key).
  const std::string identity_;
  const redis::TaskProducer any_;  // for what is not per pool (a task's hash)
  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<Attached>> pools_ GUARDED_BY(mu_);
  // retire(): until retired(their local)
  std::vector<std::unique_ptr<Attached>> retired_ GUARDED_BY(mu_);
  Lane requests_{opts_.endpoint}, reads_{opts_.endpoint}, waits_{opts_.endpoint},
      jobs_{opts_.endpoint}, schedules_{opts_.endpoint};

  mutable Mutex summary_mu_;
  std::map<std::string, Result<redis::TaskProducer::Summary>> summaries_ GUARDED_BY(summary_mu_);
  Mutex wait_mu_;
  CondVar wait_cv_;
  std::vector<Waiter> waiters_ GUARDED_BY(wait_mu_);
  bool blocked_ GUARDED_BY(wait_mu_) = false;  // the waits thread is (about to be) in its BLPOP
  const std::string wake_key_;                 // P:wake:<identity_>, this process's
  Lane wakes_{opts_.endpoint};                 // the wake thread, the destructor: wake_waits()
  CondVar wake_cv_;
  bool wake_asked_ GUARDED_BY(wait_mu_) = false;  // wait(): the wake thread is to push
  bool stopping_ GUARDED_BY(wait_mu_) = false;
  std::thread waiter_, waker_;  // last: started once the rest exists
};

template <class F>
std::invoke_result_t<F&, redis::Connection&> RedisPools::Lane::with(F&& f) {
  MutexLock lk(mu_);
  auto c = open();
  if (!c) return c.status();
  auto r = f(**c);
  if ((*c)->broken()) {
    failed_at_ = Clock::now();
    // Unreachable, whatever the call answered. An unknown outcome (kTimeout) is that call's
    // alone: a call that open() refuses within kReconnectGap sent nothing, and is not told
    // that it "may have been accepted".
    const Status& why = r.status();
    last_ = Status::error(Code::kUnavailable,
                          why.is_ok() ? std::string("connection lost")
                          : why.code() == Code::kTimeout
                              ? "connection lost (an earlier call's reply did not come)"
                              : why.message());
  } else {
    last_ = Status::ok();
  }
  return r;
}

// A task's account as Redis keeps it, in the vocabulary of a local one.
TaskResult to_task_result(const redis::StoredTask& t);

}  // namespace sandpool::poold
