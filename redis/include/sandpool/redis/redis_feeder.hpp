// RedisFeeder: one node's side of a Redis pool (docs/redis-pools.md): it reads the pool's
// stream as one consumer of the group, runs each task in a local Pool through its public API,
// and writes each task's attempts and end back to Redis, fenced. It also beats: the node's
// heartbeat key, its running entries kept fresh, and the entries of dead nodes claimed.
//
// Threads: a reader (XREADGROUP, never more than the free places: `capacity` minus what the
// local pool holds, or twice `capacity` while the tasks are short: kReadAhead; a place is free
// once its task ends locally, its end not written yet), a writer (attempts and ends, in order;
// while Redis is away they wait in memory and are retried; past kMaxUnwrittenWindows of them
// the reader waits), and a beat thread; each with its own connection.
//
// A lone task (read alone while the node holds nothing else, its tasks short, no rate limit)
// takes a shorter way: the reader hands it to the local pool with Pool::submit (the direct
// hand-off to an idle worker), reads its result itself (Ticket::read_here, the direct end),
// and writes its end on its own connection: reader -> worker -> reader, where the batch path
// is reader -> loop -> worker -> loop -> writer (docs/redis-pools.md, "A lone task"). A lone
// task that does not end within kLoneWait ends the batch path's way, by the writer.
//
// What a node that dies leaves: entries pending for its consumer, whose idle time stops being
// refreshed. Another node claims them once they are idle for `claim_after` and its heartbeat
// key expired (and the claimant has beaten for `claim_after` since it started or since a
// beat that failed or waited over a heartbeat: after a stall of Redis, every node's entries
// are idle and keys lapsed until the live ones beat again), records a `lost` attempt ("node <name>
// died") and runs them again, or dead-letters them (`retries_exhausted`) past the task's retries.
//
// Thread-safety: stats() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>

#include <sandpool/base/status.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/pool/pool.hpp>

#include <sandpool/redis/batch_stream.hpp>
#include <sandpool/redis/redis_client.hpp>
#include <sandpool/redis/task_consumer.hpp>
#include <sandpool/redis/task_upkeep.hpp>
#include <sandpool/redis/unwritten_ends.hpp>

namespace sandpool::redis {

// Which of a pool's layouts a node reads (docs/redis-batch-layout.md).
enum class Layout : std::uint8_t {
  kTask,   // the per-task layout only (every pool's until the batch layout is complete)
  kBatch,  // the batch streams too (slice 2): per-task streams first, then whole batches
};

struct FeederOptions {
  Endpoint endpoint;
  // kBatch (slice 2, opt-in): the node also reads the pool's batch entries (BatchStream),
  // runs each batch's tasks that have no end record, and writes their ends per batch. What
  // slice 2 does not run is refused at start(), never half-done: a pool with retries
  // (default_retries > 0: a failed attempt would move its task out, slice 3) or rate limits.
  // A batch's task runs once; one whose attempt fails ends dead_lettered (its end record
  // and a letter). A batch task cannot be cancelled once read, nor awaited (slice 3).
  Layout layout = Layout::kTask;
  std::string prefix = "sandpool:";
  std::string pool;      // the pool's name in Redis (its keys)
  std::string consumer;  // this node's name: unique in the cluster, stable across restarts
  // Whose the name is (its heartbeat key's value). Empty: the feeder's own (host, pid, a
  // random number). A node's feeders share one (poold's RedisPools gives it), so that one
  // node serves several Redis pools under its one name.
  std::string identity;
  std::size_t capacity = 1;  // tasks held at once (the local pool's workers x concurrency)
  // Set: the capacity follows the local pool, its target workers (scale, reload) x this
  // (its concurrency), at least 1; `capacity` is then unused.
  std::uint32_t per_worker = 0;
  // Workers' worth of entries read beyond the target (an autoscaled pool: its scale_up_step),
  // so that a backlog shows in the local queue's wait and the autoscaler sees it.
  std::uint32_t headroom_workers = 0;
  std::uint32_t default_retries = 3;  // for tasks that carry none
  // The backoff between attempts. Each attempt runs alone in the local pool (no local
  // retries): a failed one that may be retried waits in Redis's later set, so any node can
  // run the next attempt, and a backoff survives the node that began it.
  RetryPolicy retry;
  std::chrono::milliseconds heartbeat{1000};    // the beat thread's period
  std::chrono::milliseconds claim_after{3000};  // idle time that marks a dead node's entry
  // What the pool keeps in Redis (service.redis.finished, dead_letters, ...): the ends this
  // node writes evict past them, and its beat trims the finished tasks by age and bytes.
  PoolLimits stream_limits;
  // The pool's rate limits (pool, task_types, tenants), cluster-wide: every node takes from
  // the same buckets in Redis before it runs a task (docs/redis-pools.md, "Rate limits").
  // type_concurrency is not the feeder's (the local pool caps its own dispatch).
  FlowLimits limits;
  // Set (poold's state dir): the ends Redis cannot take when the feeder stops are kept there
  // (unwritten_ends.hpp) and written, fenced, by the next start() of this pool and node,
  // before it reads or claims anything. Empty: they are given up (their entries stay
  // pending: the task runs again on whichever node claims it).
  std::string state_dir;
};

struct FeederStats {
  std::uint64_t read = 0;       // entries taken with XREADGROUP
  std::uint64_t claimed = 0;    // entries taken from dead nodes
  std::uint64_t finished = 0;   // ends written
  std::uint64_t fenced = 0;     // writes refused: the entry was no longer this node's
  std::uint64_t malformed = 0;  // entries that were not tasks, discarded
  std::uint64_t released = 0;   // entries handed back unrun (refused here, or a shutdown)
  std::uint64_t deferred = 0;   // failed attempts whose task waits out a backoff in Redis
  std::uint64_t held = 0;       // entries this node holds now
  std::uint64_t throttled = 0;  // entries over a type's or tenant's rate, sent to the later set
  std::uint64_t throttle_waits = 0;  // times reading waited for the pool's rate
  std::uint64_t kept_ends = 0;       // ends Redis could not take at a stop, kept in the state dir
  // Lone tasks whose end the reader wrote itself (the class comment): of `finished`,
  // `deferred`, `fenced` or `released`, as any end.
  std::uint64_t lone_ends = 0;
  // Heartbeats whose whole round (beat, touch, cancels asked, claims, due tasks) is done.
  std::uint64_t beats = 0;
  // The batch layout (FeederOptions::layout): batch entries read and claimed, and their
  // tasks' end records written (also in `finished`) or dropped by a fence (also in `fenced`).
  std::uint64_t batches_read = 0, batches_claimed = 0, batch_ends = 0;
  bool redis_up = false;  // the last call to Redis succeeded
  std::string last_error;
};

class RedisFeeder {
 public:
  // Starts the threads on `pool`, which must outlive the feeder.
  static Result<std::unique_ptr<RedisFeeder>> start(Pool& pool, FeederOptions options);
  // Stops reading and beating; ends already queued are written first (bounded by Redis's
  // reachability: one attempt when it is away, then they are kept in the state dir, see
  // FeederOptions::state_dir). Tasks still running locally keep their entries pending for
  // this node: once it is gone, another claims them.
  ~RedisFeeder();
  RedisFeeder(const RedisFeeder&) = delete;
  RedisFeeder& operator=(const RedisFeeder&) = delete;

  FeederStats stats() const;
  // The host, the pid and a random number: a process's claim to its node's name.
  static std::string new_identity();
  // Stops taking entries (a shutdown begins: what runs here may still end and be written).
  void stop_reading();
  // A reload changed the pool: what the node reads follows its concurrency and autoscale
  // policy (FeederOptions::per_worker, headroom_workers; per_worker 0 is taken as 1; a
  // fixed `capacity` stays), and the attempts it ends from now on follow its retries and
  // backoff.
  void retune(std::uint32_t per_worker, std::uint32_t headroom_workers,
              std::uint32_t default_retries, const RetryPolicy& retry);
  // A reload's rate limits (FeederOptions::limits), from the next task on.
  void set_limits(const FlowLimits& limits);
  // For tests of a node's death: stops every thread at once, writing nothing more, as a
  // SIGKILL would.
  void die();

 private:
  // An entry, by its band and id (an id is unique within its band's stream only).
  using EntryKey = std::pair<Band, std::string>;
  static EntryKey key_of(const StreamEntry& e) { return {e.band, e.entry_id}; }
  struct EntryKeyHash {
    std::size_t operator()(const EntryKey& k) const noexcept {
      return std::hash<std::string>{}(k.second) ^ static_cast<std::size_t>(k.first + 1);
    }
  };
  // An entry pending for this node, and (running in the local pool) its task id and ticket,
  // which a cancel reaches.
  struct Held {
    std::uint64_t task_id = 0;
    std::optional<Ticket> ticket{};
  };
  using Ended = UnwrittenEnd;  // release: not an end, the entry goes back to the stream, unrun
  RedisFeeder(Pool& pool, FeederOptions options);
  void read_loop();
  void write_loop();
  void beat_loop();
  // Cancels the local tasks whose hash says a cancel was asked (TaskProducer::cancel).
  void cancel_asked(Connection& c);
  // The beat's claims of dead nodes' idle entries, run here (run_locally), within the room
  // the local pool has for them.
  void claim_dead_entries(Connection& c);
  // The beat's move of the due tasks (backoffs over, scheduled times come) to their streams.
  void move_due_tasks(Connection& c);
  // Runs the entries in the local pool, handed over in one batch (or, for a claimed one past
  // its retries, ends it). `claimed`: a dead node's, whose `lost` attempt
  // (feeder::lost_error) the beat recorded.
  void run_locally(Connection& c, std::vector<StreamEntry> entries, bool claimed);
  // redis_feeder_batch.cpp, the batch layout. Hands the tasks of `entries` with no end
  // record to the local pool in one batch (`claimed`: a dead node's batches, whose tasks
  // each get a `lost` attempt first in their log); a malformed entry is discarded.
  void run_batches(Connection& c, std::vector<BatchEntry> entries, bool claimed);
  // The reader's read of the batch streams (after the per-task streams: nothing there).
  void read_batches(Connection& c, std::size_t free, std::chrono::milliseconds block);
  // The beat's claims of dead nodes' idle batch entries: a few per beat while the local pool
  // holds `in_pool` tasks, under a few batches' worth.
  void claim_dead_batches(Connection& c, std::size_t in_pool);
  // The beat's touch of the batch entries held (those not let go).
  void touch_batches(Connection& c);
  // The writer's write of the batch ends queued: one batch_end per batch, pipelined, then
  // the letters of the dead-lettered. Put back when Redis fails (unless the feeder stops:
  // then given up, the batches stay pending and another node runs their tasks again).
  Status write_batch_ends(Connection& c);
  // The letters of the batch tasks `calls` ended dead_lettered (`answers`: what batch_end
  // answered each; `entries`: each call's batch), XADDed to the pool's letter stream as the
  // per-task layout's, pipelined in one round trip.
  Status write_letters(Connection& c, const std::vector<BatchStream::BatchEnds>& calls,
                       const std::vector<BatchStream::Ended>& answers,
                       const std::vector<const BatchEntry*>& entries);
  // The writer, stopping while Redis is away: the batch ends queued are given up (their
  // batches stay pending for this node: once it is gone, another runs those tasks again).
  void give_up_batch_ends();
  struct Shared;
  // The on_done of a task run here (its entry `e`): its end queued for the writer, or, for
  // the `lone` task while the reader still waits for it, left for the reader (lone_end).
  static std::function<void(const TaskResult&)> on_end(std::shared_ptr<Shared> sh,
                                                       std::shared_ptr<StreamEntry> e, bool lone);
  // The on_done of task `index` of the batch held as `key`: its end kept with its batch for
  // the writer, or (stopped here, not ended) its batch let go.
  static std::function<void(const TaskResult&)> on_batch_end(std::shared_ptr<Shared> sh,
                                                             EntryKey key, std::uint32_t index);
  // The local pool's tickets of `tasks` (one each, in order): one batch, or (`lone`, a batch
  // of one) one submit that may hand the task to an idle worker itself.
  std::vector<Result<Ticket>> submit_locally(std::vector<BatchTask> tasks, bool lone);
  // redis_feeder_lone.cpp. Returns true iff a batch of one read now may take the lone
  // task's way (the class comment); then arms Shared::lone_armed.
  bool arm_lone();
  // The reader, its lone task handed to the local pool (`ticket`; a refused one: nullopt):
  // waits for its end at most kLoneWait, then writes it on `c`, or leaves it to the writer.
  void finish_lone(Connection& c, const std::optional<Ticket>& ticket);
  // One entry's way to the local pool: its options there, or an error when it is not to run
  // here (discarded as malformed, ended past its retries, throttled, handed back, fenced).
  Result<SubmitOptions> prepare(Connection& c, StreamEntry& entry, bool claimed);
  // Takes the tokens of the rate limits that apply to `entry`: true, run it. Over one, the
  // reader (`may_wait`) waits for the pool's own bucket, holding the entry (nothing of the
  // pool's may start anywhere then); a type's or tenant's sends it to the later set
  // (throttle), so it holds up no other task. False: it is not this node's to run now
  // (throttled, handed back, or the feeder stops).
  // Sets `entry.leased` when it took a lease of the type's cap.
  bool pass_limits(Connection& c, StreamEntry& entry, bool may_wait);
  // Moves back to the stream the tasks this node throttled once they are due (the beat moves
  // everyone's, but only once a beat).
  void move_throttled(Connection& c);
  // Hands an entry back, unrun (the writer does it, in order with the ends). `refused`: the
  // local pool refused the task itself (Ended::refused), for the reason `why`.
  void hand_back(StreamEntry entry, const std::string& why, bool refused = false);
  // Writes a batch of ends (their attempts first) in one round trip.
  // `lone`: the reader's write of its lone task's end (Shared::lone_writing), else the
  // writer's batch (Shared::writing).
  Status write_ends(Connection& c, const std::vector<Ended>& batch, bool lone = false);
  // start(): writes the ends the last run of this pool and node kept (state_dir), then
  // removes their file.
  Status write_kept_ends(Connection& c);
  // The writer, stopping while Redis is away: keeps every queued end in the state dir (the
  // batch layout's are given up: give_up_batch_ends()).
  void keep_ends();
  void note(const Status& s);
  // How many entries the reader reads now (0: it waits): Shared::to_read().
  std::size_t to_read();
  // The tasks the local pool runs at once (workers x concurrency, or FeederOptions::capacity);
  // 0 while it takes none (draining, failed, ...).
  std::size_t capacity() const;
  // The read-ahead: a node whose tasks are short reads up to kReadAhead x its capacity, so
  // that its workers do not idle through a read's round trip and it reads in batches; a task
  // read ahead waits about one short run for a place. Long tasks: no read-ahead (a task read
  // ahead would wait a long run here while another node may idle).
  static constexpr std::size_t kReadAhead = 2;
  static constexpr double kShortRunMs = 10;
  // Unwritten ends (queued or being written), in windows, that stop the reading.
  static constexpr std::size_t kMaxUnwrittenWindows = 2;
  // The lone task's way: taken while the tasks' mean run is under kLoneRunMs (the reader
  // spins for the end, reading nothing meanwhile), for at most kLoneWait.
  static constexpr double kLoneRunMs = 0.5;
  static constexpr std::chrono::microseconds kLoneWait{500};
  bool stopping() const;
  // Holds the node's name (its heartbeat key) for this process, or says whose it is.
  Status take_name(Connection& c);
  std::chrono::milliseconds name_ttl() const;

  // A batch entry this node holds (the batch layout): its tasks that have no end record run
  // in the local pool, their ends wait here until the writer writes them per batch.
  struct HeldBatch {
    BatchEntry entry;       // its tasks (payloads copied to the local pool: kept for letters)
    bool claimed = false;   // a dead node's: each run's log starts with its `lost` attempt
    std::size_t local = 0;  // tasks in the local pool, not ended there yet
    // Ended locally, not written yet (index in the batch, the local pool's end); `writing`
    // of them are being written (taken from the front).
    std::vector<std::pair<std::uint32_t, TaskResult>> ends;
    std::size_t writing = 0;
    // A task was stopped here, not ended (a shutdown, the pool refused it): the beat stops
    // touching the entry, so that it goes idle and is claimed (by any node, this one too)
    // once its ends here are written: only its tasks with no record run again.
    bool let_go = false;
    // Not this node's any more (a fence refused its ends): what ends here is dropped.
    bool fenced = false;
    bool acked = false;  // every task has a record
  };

  // What the pool's on_done callbacks reach: they may run after the feeder is gone.
  struct Shared {
    Mutex mu;
    // Each thread waits on its own, so that an end (one per task) wakes only the thread that
    // has something to do: `cv` the reader (places freed, a pause over, stop), `ends_cv` the
    // writer (ends queued, stop), `beat_cv` the beat (stop).
    CondVar cv, ends_cv, beat_cv;
    std::deque<Ended> ends GUARDED_BY(mu);
    // The ends the writer took from `ends` and writes now (they are back in front of `ends`
    // when the write fails).
    std::size_t writing GUARDED_BY(mu) = 0;
    // The lone task's way (arm_lone, finish_lone): while armed, the lone task's on_done
    // leaves its end in lone_end for the reader instead of queueing it for the writer; the
    // reader writes it (lone_writing) or, past kLoneWait, disarms. The writer does not stop
    // while one of the three is set (lone_busy()).
    bool lone_armed GUARDED_BY(mu) = false;
    std::optional<Ended> lone_end GUARDED_BY(mu);
    bool lone_writing GUARDED_BY(mu) = false;
    bool lone_busy() const REQUIRES(mu) { return lone_armed || lone_end || lone_writing; }
    // The entries pending for this node (one hash map: an entry is found once per read, run
    // and end; its ticket is set while it runs in the local pool).
    std::unordered_map<EntryKey, Held, EntryKeyHash> held GUARDED_BY(mu);
    FeederStats stats GUARDED_BY(mu);
    // The batch layout: the batch entries held, the tasks they have in the local pool, and
    // their ends unwritten (queued or being written) and queued (not being written).
    bool batch_layout = false;  // set before the threads start
    std::map<EntryKey, HeldBatch> batches GUARDED_BY(mu);
    std::size_t batch_local GUARDED_BY(mu) = 0;
    std::size_t batch_unwritten GUARDED_BY(mu) = 0;
    std::size_t batch_queued GUARDED_BY(mu) = 0;
    // Forgets the batch of `it` once nothing of it is here any more: no task in the local
    // pool, no end to write, and acked, fenced or let go.
    void drop_if_done(std::map<EntryKey, HeldBatch>::iterator it) REQUIRES(mu);
    // FeederOptions::default_retries and retry as they are now (retune()).
    std::uint32_t default_retries GUARDED_BY(mu) = 0;
    RetryPolicy retry GUARDED_BY(mu);
    bool stopping GUARDED_BY(mu) = false;
    bool dead GUARDED_BY(mu) = false;
    bool reading GUARDED_BY(mu) = true;
    // The reader waits for places, for a capacity of `reader_cap`: an end wakes it only
    // once it would read.
    bool reader_waits GUARDED_BY(mu) = false;
    std::size_t reader_cap GUARDED_BY(mu) = 0;
    // The mean run of the tasks the local pool ended (ms, a moving average; < 0: none yet).
    double mean_run_ms GUARDED_BY(mu) = -1;
    // The local pool refused a task (draining, stopping): no reading before this.
    std::chrono::steady_clock::time_point paused_until GUARDED_BY(mu){};
    FlowLimits limits GUARDED_BY(mu);  // FeederOptions::limits, or a reload's
    // The due times (wall ms) of what it throttled.
    std::multiset<std::int64_t> throttle_due GUARDED_BY(mu);

    // Queues an end for the writer (waking it when the queue was empty: else it is busy).
    void push_end(Ended e) REQUIRES(mu);
    // Wakes every thread (a stop, a death).
    void wake_all();
    // A task ended in the local pool: its run counts in mean_run_ms, and its place is free
    // (the reader is woken once it would read).
    void ended_locally(const TaskResult& r) REQUIRES(mu);
    // The held entries the local pool has (queued or running there, or on their way to it):
    // those not in `ends` or being written.
    std::size_t in_pool() const REQUIRES(mu);
    // What the node reads up to for a capacity of `cap`: kReadAhead x cap while its tasks
    // are short (mean_run_ms under kShortRunMs), else `cap`.
    std::size_t window(std::size_t cap) const REQUIRES(mu);
    // The places the reader may fill now: window(cap) less in_pool(), 0 past the bound on
    // unwritten ends.
    std::size_t free_places(std::size_t cap) const REQUIRES(mu);
    // What the reader reads now, of the free places (0: it waits for more).
    std::size_t to_read(std::size_t cap) const REQUIRES(mu);
  };

  Pool& pool_;
  const FeederOptions opts_;
  const PoolKeys keys_;
  const TaskConsumer consumer_;  // the entries this node reads and holds
  const TaskUpkeep upkeep_;      // the beat's chores, the rate limits
  const BatchStream batches_;    // the batch layout's streams (FeederOptions::layout)
  std::shared_ptr<Shared> sh_;
  std::string identity_;  // host, pid and a random number: whose the node's name is
  // Backoff jitter, drawn under sh_->mu (the writer's and the reader's lone end).
  std::mt19937_64 rng_{std::random_device{}()};
  // FeederOptions::per_worker and headroom_workers as they are now (retune()).
  std::atomic<std::uint32_t> per_worker_, headroom_workers_;

  std::thread reader_, writer_, beater_;
};

}  // namespace sandpool::redis
