// TaskJournal: accepted tasks, their attempts and their ends, kept durably in the dead-letter
// store's database and written by its one writer thread (docs/journal.md). A Pool whose
// dead_letter_store has one journals its tasks (pool/src/core/pool_loop_journal.cpp); poold
// opens its store with one (docs/journal.md, "In poold"), so its pools journal theirs, and
// reads it itself for recovery (unfinished_pools(), unfinished(), dead_letter() of a removed
// pool's tasks) and lookups (find(), find_by_key()).
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
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/store/dead_letters.hpp>
#include <sandpool/store/task_journal_options.hpp>
#include <sandpool/task/store_stats.hpp>
#include <sandpool/task/task.hpp>
#include <sandpool/task/task_options.hpp>

namespace sandpool {
class TaskJournalImpl;  // task_journal_impl.hpp

// One journaled task. accept() reads id, pool, task.type, payload, options and submitted_ms;
// the reads fill the rest.
struct JournalTask {
  // id, type, state, reason / cancel_reason, result and error once finished, and every ended
  // attempt in order. state is kQueued, kRunning (a start was journaled and no end),
  // kRetryWait, or terminal.
  TaskResult task;
  std::string pool;
  std::string payload;            // binary-safe; emptied once the task finished (kept bytes)
  TaskOptions options;            // every option the task keeps across a restart
  std::int64_t submitted_ms = 0;  // wall clock; 0 at accept: now
  // kRunning: the journaled start (number, worker_pid, started_ms). Recovery turns it into an
  // attempt with outcome `lost` ("poold restarted").
  std::optional<Attempt> running;
  std::int64_t retry_due_ms = 0;  // kRetryWait: wall clock ms when the retry is due
  std::int64_t finished_ms = 0;   // terminal: wall clock ms of the end; 0 while unfinished
  std::uint64_t letter_id = 0;    // kDeadLettered through dead_letter(): the letter
};

// A batch of accepts that points at its tasks' type and payload bytes where the caller keeps
// them, instead of holding a JournalTask each (over 500 bytes, with a copy of the payload):
// batches queued ahead of the writer then cost ~48 bytes a task, and the writer makes the
// JournalTasks of the one batch it is writing (docs/performance.md, "Memory with the journal
// on: the transient peaks"). `keep` owns what the views point at: the bytes must not change
// while it lives; the journal releases it once the writer copied them, or with the batch.
struct JournalAcceptViews {
  struct Task {
    std::uint64_t id = 0;
    std::string_view type;
    std::string_view payload;
    std::uint32_t options = 0;  // its kept options: options[this]
  };
  std::string pool;
  std::vector<TaskOptions> options;  // the batch's options, each once in a row of equal ones
  std::vector<Task> tasks;
  std::shared_ptr<const void> keep;
};

using JournalCommitted = std::function<void(const Status&)>;

// TaskJournalStats: <sandpool/task/store_stats.hpp>, with the table of its figures.

class TaskJournal {
 public:
  // The store's (DeadLetterStore::journal()): the state and its share of the writer thread
  // (task_journal_impl.hpp, the journal's sources).
  explicit TaskJournal(std::unique_ptr<TaskJournalImpl> impl);
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
  // The same for a batch of views (submitted now, as a JournalTask with submitted_ms 0).
  void accept(JournalAcceptViews tasks, JournalCommitted on_committed);
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
  // start and due time, by id, read back from the log. Errors as find() but kNotFound.
  Result<std::vector<JournalTask>> unfinished(const std::optional<std::string>& pool = {});
  // The pools that unfinished tasks belong to, by name.
  Result<std::vector<std::string>> unfinished_pools();
  // The highest task id ever accepted (0: none); new ids must start above it.
  Result<std::uint64_t> highest_task_id();
  // A task by id, finished or not. An unfinished one is read back from the log
  // (docs/journal.md, "What the state keeps of a task"). Errors: kNotFound (never journaled,
  // or evicted by retention); kUnavailable (compaction deleted the round being read 16 times
  // in a row: try again); kInternal (the log's round is unreadable, or lacks the task's
  // whole-task record); a storage error of the read.
  Result<JournalTask> find(std::uint64_t task_id);
  // The newest task submitted under this idempotency key; errors as find(), kNotFound when
  // no journaled task has the key.
  Result<JournalTask> find_by_key(const std::string& idempotency_key);

  TaskJournalStats stats() const;

 private:
  std::unique_ptr<TaskJournalImpl> impl_;
};

}  // namespace sandpool
