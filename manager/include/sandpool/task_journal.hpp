// TaskJournal: accepted tasks, their attempts and their ends, kept durably in the dead-letter
// store's database and written by its one writer thread (docs/journal.md). A Pool whose
// dead_letter_store has one journals its tasks (manager/core/pool_loop_journal.cpp); poold
// does not use it yet.
//
// A journal is opened with its store (DeadLetterStoreOptions::journal) and lives as long as
// it; DeadLetterStore::journal() returns it. Every write goes through the store's writer
// thread: accept(), the records, finish() and dead_letter() only queue the write and return;
// the writer commits everything waiting (journal writes and dead letters alike) in one
// transaction per round (group commit), then calls each write's callback. A callback runs on
// the writer thread, after the commit, with no lock held; it must not block, throw, or call
// flush() or the store's close(). Two exceptions run it in the caller's thread before the
// call returns: an empty accept() batch (ok), and any write after the store closed (kClosed).
//
// What a caller may rely on:
// - accept(batch, cb): cb(ok) only once every task of the batch is committed, all or none;
//   cb(error) when the journal refuses the batch (the database cannot take it now: a full
//   disk, an I/O error, a lock held too long; a duplicate id; closed). An error's message
//   starts with "storage: ". A refused batch is not retried.
// - Failing (docs/journal.md, "A failing disk"): a write the database cannot take now (full,
//   I/O error, ...) or a transaction running past sync_timeout turns the journal failing.
//   Then accept() answers cb(error) at once, in the caller's thread, and the accepts that
//   waited are answered too (kTimeout after a stuck commit; should that commit land after
//   all, the journal ends its tasks itself, cancelled: an accept answered with an error
//   never leaves an open task). The writer tries a small write every probe_interval;
//   the first commit that succeeds ends the failing state. So every accept is answered
//   within about sync_timeout, whatever the disk does.
// - finish(task, cb): cb(ok) once the end is committed. While the database cannot take it,
//   the write waits in memory and is retried (like a dead letter) until it commits or the
//   store closes (then cb gets kClosed); cb(error) only for an end refused on its own (a
//   result too big for SQLite).
// - record_start(), record_requeue() and record_attempt() have no callback: they are retried like
// finish(), and
//   a pool never waits for them. What a crash between a record and its commit means for the
//   attempt count is in docs/journal.md.
// - dead_letter(letter, cb): the letter and the end of its journaled task in one transaction;
//   the receipt is the store's (dead_letters.hpp).
// - reopen(task, letter, cb): the letter's deletion and the task's reopening in one
//   transaction (a replay); answered like accept().
//
// Thread-safety: every member may be called from any thread, concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/dead_letters.hpp>
#include <sandpool/status.hpp>
#include <sandpool/task.hpp>
#include <sandpool/task_journal_options.hpp>

namespace sandpool {
namespace sqlite {
class WalCheckpointer;
}
class JournalState;

// Every submit option a task keeps across a restart (SubmitOptions without its callbacks),
// and the idempotency key it was submitted under.
struct JournalTaskOptions {
  std::optional<std::chrono::milliseconds> timeout;  // empty: the pool's default
  std::optional<std::uint32_t> retries;              // empty: the pool's default
  std::int32_t priority = 0;
  std::string key;                                     // affinity key
  std::optional<std::chrono::milliseconds> queue_ttl;  // empty: the pool's default
  bool fail_fast = false;
  std::string idempotency_key;     // empty: none
  std::int64_t not_before_ms = 0;  // wall clock ms; 0: not scheduled
  std::string tenant;              // empty: the default tenant

  static JournalTaskOptions from(const SubmitOptions& o) {
    std::int64_t not_before_ms = 0;
    if (o.not_before) {
      not_before_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(o.not_before->time_since_epoch())
              .count();
    }
    return {o.timeout,   o.retries,         o.priority,    o.key,   o.queue_ttl,
            o.fail_fast, o.idempotency_key, not_before_ms, o.tenant};
  }
  // Returns options for queueing the task again; the callbacks are the caller's to set.
  SubmitOptions to_submit_options() const {
    SubmitOptions o;
    o.timeout = timeout;
    o.retries = retries;
    o.priority = priority;
    o.key = key;
    o.queue_ttl = queue_ttl;
    o.fail_fast = fail_fast;
    o.idempotency_key = idempotency_key;
    if (not_before_ms != 0) {
      o.not_before =
          std::chrono::system_clock::time_point(std::chrono::milliseconds(not_before_ms));
    }
    o.tenant = tenant;
    return o;
  }
};

// One journaled task. accept() reads id, pool, task.type, payload, options and submitted_ms;
// the reads fill the rest.
struct JournalTask {
  // id, type, state, reason / cancel_reason, result and error once finished, and every ended
  // attempt in order. state is kQueued, kRunning (a start was journaled and no end),
  // kRetryWait, or terminal.
  TaskResult task;
  std::string pool;
  std::string payload;  // binary-safe; emptied once the task finished (kept bytes)
  JournalTaskOptions options;
  std::int64_t submitted_ms = 0;  // wall clock; 0 at accept: now
  // kRunning: the journaled start (number, worker_pid, started_ms). Recovery turns it into an
  // attempt with outcome `lost` ("poold restarted").
  std::optional<Attempt> running;
  std::int64_t retry_due_ms = 0;  // kRetryWait: wall clock ms when the retry is due
  std::int64_t finished_ms = 0;   // terminal: wall clock ms of the end; 0 while unfinished
  std::uint64_t letter_id = 0;    // kDeadLettered through dead_letter(): the letter
};

using JournalCommitted = std::function<void(const Status&)>;

struct TaskJournalStats {
  std::uint64_t pending = 0;          // writes queued or being written, not yet committed
  std::uint64_t pending_tasks = 0;    // tasks in accept() batches among them
  std::uint64_t tasks_accepted = 0;   // tasks committed by accept()
  std::uint64_t batches_refused = 0;  // accept() batches answered with an error
  std::uint64_t records_written = 0;  // starts, requeues, attempt ends, finishes committed
  std::uint64_t commits = 0;          // transactions that carried journal writes
  std::uint64_t last_commit_us = 0;   // the last such transaction, BEGIN to COMMIT
  std::uint64_t max_commit_us = 0;
  std::uint64_t total_commit_us = 0;  // / commits: the mean
  // The journal is failing (a write refused by the database's condition, or a commit past
  // sync_timeout): submits are refused at once, records wait for a retry, a probe retries.
  bool writes_failing = false;
  std::uint64_t failing_ms = 0;         // for how long, while writes_failing
  std::uint64_t probes = 0;             // probe writes tried while failing
  std::string last_error;               // why the last failed journal write failed
  std::uint64_t finished_kept = 0;      // finished tasks in the journal
  std::uint64_t finished_bytes = 0;     // their kept bytes (result, errors, attempts)
  std::uint64_t evicted = 0;            // finished tasks dropped by retention
  std::uint64_t retention_chunks = 0;   // upkeep transactions (compaction while idle)
  std::uint64_t log_rounds = 0;         // rounds in the log (docs/journal.md, "The round log")
  std::uint64_t log_bytes = 0;          // their bodies
  std::uint64_t log_live_bytes = 0;     // of those, the records the journal still needs
  std::uint64_t rounds_deleted = 0;     // by compaction
  std::uint64_t tasks_carried = 0;      // live tasks compaction copied forward
  std::uint64_t file_bytes = 0;         // the database file and its -wal
  std::uint64_t wal_checkpoints = 0;    // WAL checkpoints run off the writer's thread
  std::uint64_t wal_checkpoint_us = 0;  // their total time
};

class TaskJournal {
 public:
  ~TaskJournal();
  TaskJournal(const TaskJournal&) = delete;
  TaskJournal& operator=(const TaskJournal&) = delete;

  struct Write;  // one queued write (task_journal_write.hpp)

  // The records (starts, requeues, attempt ends, finishes) a pool loop gathers during one
  // turn and queues at once with hand_over(): one lock, one clock read and at most one wake
  // of the writer for all of them, where the single calls below pay each per record. Their
  // times are the hand-over's. Not thread-safe: one owner.
  class Records {
   public:
    Records();
    ~Records();
    Records(Records&&) noexcept;
    Records& operator=(Records&&) noexcept;
    // As record_start(), record_requeue(), record_attempt() and finish() below.
    void start(std::uint64_t task_id, const Attempt& start);
    void requeue(std::uint64_t task_id);
    void attempt(std::uint64_t task_id, const Attempt& ended, TaskState next,
                 std::int64_t retry_due_ms = 0);
    // The account is shared, not copied: it must be final (nothing writes it again) and is
    // read on the writer thread.
    void finish(std::shared_ptr<const TaskResult> final_account, JournalCommitted on_committed);
    bool empty() const;

   private:
    friend class TaskJournal;
    std::vector<Write> writes_;
  };

  // Queues the batch's tasks (ids unique in the journal) for one all-or-none commit shared
  // with whatever else waits; on_committed as above. Never blocks on the disk.
  void accept(std::vector<JournalTask> tasks, JournalCommitted on_committed);
  // A replay: reopens `task` (its id, pool, type, payload and options, as its letter has
  // them) as queued, with no history, and deletes dead letter `letter_id`, in one
  // transaction: before its commit the task is in the letter, after it open in the journal.
  // on_committed(ok) after the commit; kNotFound when the letter is gone (purged, or
  // replayed already: of two reopens of one letter one commits); kInvalidArgument when the
  // journal holds the task open; a storage error as for accept(). Never blocks on the disk.
  void reopen(JournalTask task, std::uint64_t letter_id, JournalCommitted on_committed);
  // Queues what `records` holds, in order, and empties it. When the store has closed, each
  // finish's on_committed is called at once with kClosed.
  // The records' storage comes back emptied with the capacity of a chunk the writer is done
  // with, so that a loop's records reuse warm memory turn after turn.
  void hand_over(Records& records);
  // The task started an attempt: `start` carries number, worker_pid and started_ms.
  void record_start(std::uint64_t task_id, const Attempt& start);
  // A started task goes back to waiting without an attempt (its start never became one: a
  // shutdown that keeps it stopped it, or its worker died before it began): a `running` row
  // becomes `queued`, its start cleared. Any other row is left as it is.
  void record_requeue(std::uint64_t task_id);
  // An attempt ended and the task goes on: `next` is kQueued or kRetryWait (due then).
  void record_attempt(std::uint64_t task_id, const Attempt& ended, TaskState next,
                      std::int64_t retry_due_ms = 0);
  // The task ended (completed, cancelled, or dead-lettered without a letter): its final
  // account, history included.
  void finish(TaskResult final_account, JournalCommitted on_committed);
  // Dead-letters a journaled task: the letter and the task's end in one transaction.
  Status dead_letter(DeadLetter letter, LetterWritten on_written);
  // Blocks until every journal write queued before the call is committed or answered.
  // kTimeout after `timeout`; kClosed when the store closed first.
  Status flush(std::chrono::milliseconds timeout);

  // Recovery: every unfinished task (of `pool` only, when given) with its history, state,
  // start and due time, by id.
  Result<std::vector<JournalTask>> unfinished(const std::optional<std::string>& pool = {});
  // The pools that unfinished tasks belong to, by name.
  Result<std::vector<std::string>> unfinished_pools();
  // The highest task id ever accepted (0: none); new ids must start above it.
  Result<std::uint64_t> highest_task_id();
  // A task by id, finished or not (kNotFound: never journaled, or evicted by retention).
  Result<JournalTask> find(std::uint64_t task_id);
  // The newest task submitted under this idempotency key, or kNotFound.
  Result<JournalTask> find_by_key(const std::string& idempotency_key);

  TaskJournalStats stats() const;

 private:
  friend class DeadLetterStore;
  struct RoundResult;  // the same
  struct RoundPlan;    // the same
  struct Tx;           // the same

  TaskJournal(DeadLetterStore& store, TaskJournalOptions options,
              std::unique_ptr<sqlite::SqliteDb> query_db);
  static Result<std::unique_ptr<TaskJournal>> open(DeadLetterStore& store,
                                                   TaskJournalOptions options);
  // Opening (task_journal_reads.cpp): rows of the journal's first layout become the log's
  // first round, then the log is replayed into state_.
  Status load();

  // Called by the store's writer thread (task_journal_writes.cpp). *_locked under the store's
  // mu_; the others with no lock.
  bool has_writes_locked() const;
  // When the writer should stop waiting for a group commit (now, if nothing waits).
  std::chrono::steady_clock::time_point group_deadline_locked() const;
  bool group_full_locked() const;
  void take_locked();
  // Writes the taken writes inside the writer's open transaction, as planned by plan_round(),
  // with one step of compaction; on failure sets *rc to SQLite's code.
  Status write_taken(sqlite::SqliteDb& db, int* rc);
  // Marks the taken writes that others of the same round make unneeded (docs/journal.md,
  // "One record per task and round").
  void plan_round();
  // Appends the records of taken_[i, j) to the open transaction's log; `planned`: as
  // plan_round() marked them (else whole, as writes tried alone).
  Status write_range(sqlite::SqliteDb& db, std::size_t i, std::size_t j, bool planned);
  // Commits taken_[i, j) in a transaction of its own.
  Status commit_alone(sqlite::SqliteDb& db, std::size_t i, std::size_t j, int* rc);
  // The whole round committed (or failed with SQLite code `rc`: then the writes are tried in
  // transactions of their own, accepts refused, and what the database cannot take now stays
  // taken for a retry).
  void round_committed(std::chrono::steady_clock::duration took);
  void round_failed(sqlite::SqliteDb& db, const Status& why, int rc);
  // Counts taken_[i] as committed (s ok) or refused, and queues its callback.
  void resolve(std::size_t i, const Status& s);
  // Ends a journaled task in the open transaction, beside its letter.
  Status write_dead_lettered(sqlite::SqliteDb& db, const DeadLetter& letter,
                             std::uint64_t letter_id);
  // The store's transaction that carried journal records ended: they are applied to the
  // state in the order written (committed), or forgotten (rolled back).
  void transaction_ended(bool committed);
  // Delivers the callbacks of the last round; no lock held.
  void deliver();
  // Under mu_: puts what is still taken back at the front of the queue (the writer stops).
  void untake_locked();
  // Erases the taken chunks before queue_head_.
  void drop_queue_head_locked();
  // Queues one chunk of writes (seq numbers given here) and empties `writes`; `reuse`: give
  // it a spare chunk's storage. Answers the writes with kClosed once the store closed.
  void queue_chunk(std::vector<Write>& writes, bool reuse);
  // The writer's: appends a chunk to the taken writes; after a round, empties the chunks
  // whose writes are all done (no lock), and keeps their storage as spares (under mu_).
  void take_chunk(std::vector<Write>&& chunk);
  void clear_taken_chunks();
  void recycle_taken_chunks_locked();
  // After the writer stopped: answers every write still queued with kClosed.
  void abandon(const std::string& why);

  // Upkeep (task_journal_retention.cpp), on the writer thread: retention evicts finished
  // tasks from the state; compaction deletes the log's dead head rounds and carries live
  // tasks forward.
  bool upkeep_due_locked(std::chrono::steady_clock::time_point now) const;
  // One upkeep step while the writer has nothing else to do: a short transaction.
  void run_retention_chunk(sqlite::SqliteDb& db);
  // Evicts what retention's bounds do not keep (in memory; the log follows by compaction).
  void evict_finished();
  // Compaction inside the open transaction: deletes dead rounds at the head, and carries the
  // head's live tasks into the body being written when the log holds much more than it needs.
  Status compact(sqlite::SqliteDb& db);
  // Appends the open transaction's body as round(s) of the log.
  Status flush_body(sqlite::SqliteDb& db);

  // Health (task_journal_health.cpp): the failing state, its probe and the sync watch.
  struct Failing {
    Status why;  // "storage: ...", with the failure's code
    std::chrono::steady_clock::time_point since;
  };
  using Answers = std::vector<JournalCommitted>;
  // Under store_.mu_: the writer begins (true) or ends (false) a transaction.
  void writing_locked(bool writing);
  // Under store_.mu_: turns the journal failing (or updates why), and refuses the accepts
  // still queued: their callbacks go to *answers, to be called with refusal() unlocked.
  void turn_failing_locked(const Status& why, Answers* answers);
  // Under store_.mu_: a journal transaction committed; ends the failing state.
  void recovered_locked();
  // Under store_.mu_: what an accept is answered while failing.
  Status refusal_locked() const;
  // Under store_.mu_: the accept of write `seq`'s callback, taken (empty once answered).
  JournalCommitted take_answer_locked(std::uint64_t seq);
  // Under store_.mu_: whether the writer should run probe() now; else when it is due.
  bool probe_due_locked(std::chrono::steady_clock::time_point now) const;
  std::chrono::steady_clock::time_point next_probe_locked() const;
  // The writer's, no lock held: one small write transaction; a commit ends failing.
  void probe(sqlite::SqliteDb& db);
  // The sync watch's thread: turns the journal failing when a transaction passes
  // sync_timeout, and answers every accept waiting.
  void watch_syncs();
  void stop_watch();
  // The writer's, no lock held: ends (cancelled) the tasks of accepts that committed after
  // the sync watch had answered them with a refusal.
  void end_refused_late(const std::vector<std::uint64_t>& ids);

  DeadLetterStore& store_;
  const TaskJournalOptions opts_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<sqlite::SqliteDb> query_owner_;
  std::mutex query_mu_;  // guards the query connection (reads)
  // The WAL's checkpoints, off the writer's thread (wal_checkpointer.hpp).
  std::unique_ptr<sqlite::WalCheckpointer> checkpointer_;
  // The journal's state (journal_state.hpp): written by the writer thread under state_mu_,
  // read by every reader under it.
  mutable std::mutex state_mu_;
  std::unique_ptr<JournalState> state_;

  // Guarded by store_.mu_ (the writer's lock), so the writer waits on one condition.
  // The writes waiting, in the chunks they were queued in (a loop's turn of records, an
  // accept() batch, a single record): queueing moves a chunk, never a write. Oldest first
  // from queue_head_ (the chunks before it were taken: a round may take only the front, whole
  // chunks up to max_batch tasks).
  std::vector<std::vector<Write>> queue_;
  std::size_t queue_head_ = 0;
  std::size_t queued_writes_ = 0;   // in queue_ from queue_head_
  std::uint64_t queued_tasks_ = 0;  // tasks in accept() writes of queue_
  // Emptied chunks whose storage hand_over() gives back to the pool loops, and their
  // capacity in writes (bounded).
  std::vector<std::vector<Write>> spare_;
  std::size_t spare_writes_ = 0;
  std::uint64_t next_seq_ = 1;
  std::uint64_t taken_seq_ = 0;  // the oldest taken write's seq while taken_count_ > 0
  std::size_t taken_count_ = 0;
  std::uint64_t taken_tasks_ = 0;
  std::size_t last_round_batches_ = 0;  // accept() batches of the last round that had any
  std::chrono::steady_clock::time_point next_age_check_{};
  std::chrono::steady_clock::time_point retention_paused_until_{};  // after a failed chunk
  bool compaction_due_ = false;  // the log has rounds compaction can delete
  TaskJournalStats stats_;

  // The writer thread's own (no lock): the writes of the current round (in order, each in
  // one of the chunks taken), the callbacks to deliver after it, and what the open
  // transaction wrote to the log.
  std::vector<std::vector<Write>> taken_chunks_;
  std::vector<Write*> taken_;
  // A callback to run after the round; an accept's (accept_seq != 0) is looked up in
  // accept_answers_ then, since the sync watch may have answered it already.
  struct Delivery {
    JournalCommitted cb;
    Status status;
    std::uint64_t accept_seq = 0;
    std::vector<std::uint64_t> ids;  // a committed accept's tasks
  };
  std::vector<Delivery> deliveries_;

  // Guarded by store_.mu_: health (task_journal_health.cpp).
  std::optional<Failing> failing_;
  std::optional<std::chrono::steady_clock::time_point> writing_since_;
  bool stuck_reported_ = false;  // the current transaction passed sync_timeout
  std::chrono::steady_clock::time_point last_probe_{};
  // The callbacks of the accepts queued or being written, by write seq (ascending): whoever
  // answers first (the writer after its round, a refusal, the sync watch) takes it.
  std::deque<std::pair<std::uint64_t, JournalCommitted>> accept_answers_;
  std::condition_variable watch_cv_;
  bool watch_stop_ = false;
  std::thread watch_;
  std::unique_ptr<RoundResult> round_;
  std::unique_ptr<RoundPlan> plan_;
  std::unique_ptr<Tx> tx_;
};

}  // namespace sandpool
