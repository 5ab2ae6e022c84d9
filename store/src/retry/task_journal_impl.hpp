// TaskJournalImpl: what stands behind TaskJournal (<sandpool/task_journal.hpp>, whose comments
// are the contract): the journal's state, its query connection, the writes queued for the
// store's writer thread and what that thread does with them (task_journal_writes.cpp), the
// health and the sync watch (task_journal_health.cpp), retention and compaction
// (task_journal_retention.cpp), the reads (task_journal_reads.cpp). Private to the journal's
// and the store's sources.
//
// Thread-safety: as TaskJournal's, every public member from any thread. The queue and the
// health are guarded by the store's mu_ (dead_letter_store_impl.hpp), the state by state_mu_,
// the query connection by query_mu_; the rest is the writer thread's own.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/store/dead_letters.hpp>
#include <sandpool/store/task_journal.hpp>

#include "retry/dead_letter_store_impl.hpp"

namespace spdlog {
class logger;
}

namespace sandpool {
namespace sqlite {
class SqliteDb;
class WalCheckpointer;
}  // namespace sqlite
class JournalState;
struct OpenMeta;
struct OpenSnapshot;

class TaskJournalImpl {
 public:
  using Write = TaskJournal::Write;
  using Records = TaskJournal::Records;

  // Opens the journal in `store`'s database (DeadLetterStoreImpl::open, before the writer
  // starts): loads its state and starts the sync watch.
  static Result<std::unique_ptr<TaskJournalImpl>> open(DeadLetterStoreImpl& store,
                                                       TaskJournalOptions options);
  ~TaskJournalImpl();
  TaskJournalImpl(const TaskJournalImpl&) = delete;
  TaskJournalImpl& operator=(const TaskJournalImpl&) = delete;

  // TaskJournal's members that forward here. Its writes (accept(), the records, finish(),
  // hand_over()) are built there, in Records, and queued with queue_chunk().
  Status dead_letter(DeadLetter letter, LetterWritten on_written);
  Status flush(std::chrono::milliseconds timeout) EXCLUDES(store_.mu_);
  Result<std::vector<JournalTask>> unfinished(const std::optional<std::string>& pool);
  Result<std::vector<std::string>> unfinished_pools();
  Result<std::uint64_t> highest_task_id();
  Result<JournalTask> find(std::uint64_t task_id);
  Result<JournalTask> find_by_key(const std::string& idempotency_key);
  TaskJournalStats stats() const EXCLUDES(store_.mu_, state_mu_);
  // Queues one chunk of writes (seq numbers given here) and empties `writes`; `reuse`: give
  // it a spare chunk's storage. Answers the writes with kClosed once the store closed.
  void queue_chunk(std::vector<Write>& writes, bool reuse) EXCLUDES(store_.mu_);
  // Tells the checker that the store's mu_ is held: store_ is the store calling (its writer),
  // which holds its own mu_, the same lock under another name.
  void writer_lock_held() const ASSERT_CAPABILITY(store_.mu_) {}

 private:
  friend class DeadLetterStoreImpl;  // its writer thread drives the journal's writes
  struct RoundResult;                // the same
  struct RoundPlan;                  // the same
  struct Tx;                         // the same

  TaskJournalImpl(DeadLetterStoreImpl& store, TaskJournalOptions options,
                  std::unique_ptr<sqlite::SqliteDb> query_db);
  // Opening (task_journal_reads.cpp): rows of the journal's first layout become the log's
  // first round, then the log is replayed into state_.
  Status load();

  // Called by the store's writer thread (task_journal_writes.cpp). *_locked under the store's
  // mu_; the others with no lock.
  bool has_writes_locked() const REQUIRES(store_.mu_);
  // When the writer should stop waiting for a group commit (now, if nothing waits).
  std::chrono::steady_clock::time_point group_deadline_locked() const REQUIRES(store_.mu_);
  bool group_full_locked() const REQUIRES(store_.mu_);
  void take_locked() REQUIRES(store_.mu_);
  // Writes the taken writes inside the writer's open transaction, as planned by plan_round(),
  // with one step of compaction; on failure sets *rc to SQLite's code.
  Status write_taken(sqlite::SqliteDb& db, int* rc);
  // Marks the taken writes that others of the same round make unneeded (docs/journal.md,
  // "One record per task and round").
  void plan_round();
  // Appends the records of taken_[i, j) to the open transaction's log; `planned`: as
  // plan_round() marked them (else whole, as writes tried alone).
  Status write_range(sqlite::SqliteDb& db, std::size_t i, std::size_t j, bool planned);
  // write_range's parts: an accept (a reopen deletes its letter in the same transaction; a
  // duplicate writes nothing), and a task's end written whole, of the task `meta`.
  Status write_accept(sqlite::SqliteDb& db, std::size_t k, bool planned);
  // The most unfinished tasks held: max_unfinished, bounded by what the state indexes.
  std::uint64_t max_unfinished() const;
  void write_end_whole(const OpenMeta& meta, const Write& end, std::size_t write);
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
  void untake_locked() REQUIRES(store_.mu_);
  // Erases the taken chunks before queue_head_.
  void drop_queue_head_locked() REQUIRES(store_.mu_);
  // The writer's: appends a chunk to the taken writes; after a round, empties the chunks
  // whose writes are all done (no lock), and keeps their storage as spares (under mu_).
  void take_chunk(std::vector<Write>&& chunk);
  void clear_taken_chunks();
  void recycle_taken_chunks_locked() REQUIRES(store_.mu_);
  // After the writer stopped: answers every write still queued with kClosed.
  void abandon(const std::string& why);

  // Upkeep (task_journal_retention.cpp), on the writer thread: retention evicts finished
  // tasks from the state; compaction deletes the log's dead head rounds and carries live
  // tasks forward.
  bool upkeep_due_locked(std::chrono::steady_clock::time_point now) const REQUIRES(store_.mu_);
  // One upkeep step while the writer has nothing else to do: a short transaction.
  void run_retention_chunk(sqlite::SqliteDb& db);
  // Evicts what retention's bounds do not keep (in memory; the log follows by compaction).
  void evict_finished();
  // Compaction inside the open transaction: deletes dead rounds at the head, and carries the
  // head's live tasks into the body being written when the log holds much more than it needs.
  Status compact(sqlite::SqliteDb& db);
  // Compaction's carry: writes round `seq`'s live tasks again whole into the body being
  // written, an unfinished one read back from `seq` (which holds its whole-task record).
  Status carry(sqlite::SqliteDb& db, std::uint64_t seq);
  // The unfinished tasks of `open` read back from the log (the query connection): nullopt
  // when compaction deleted a round they were in since the snapshot (*gone: which; read
  // again once the state has followed, wait_round_gone()).
  Result<std::optional<std::vector<JournalTask>>> read_back(const std::vector<OpenSnapshot>& open,
                                                            std::uint64_t* gone)
      EXCLUDES(state_mu_, query_mu_);
  // Waits until the state no longer holds round `seq` (the writer applies a deletion right
  // after its commit), at most sync_timeout.
  void wait_round_gone(std::uint64_t seq) EXCLUDES(state_mu_);
  // Appends the open transaction's body as round(s) of the log.
  Status flush_body(sqlite::SqliteDb& db);

  // Health (task_journal_health.cpp): the failing state, its probe and the sync watch.
  struct Failing {
    Status why;  // "storage: ...", with the failure's code
    std::chrono::steady_clock::time_point since;
  };
  using Answers = std::vector<JournalCommitted>;
  // Under store_.mu_: the writer begins (true) or ends (false) a transaction.
  void writing_locked(bool writing) REQUIRES(store_.mu_);
  // Under store_.mu_: turns the journal failing (or updates why), and refuses the accepts
  // still queued: their callbacks go to *answers, to be called with refusal() unlocked.
  void turn_failing_locked(const Status& why, Answers* answers) REQUIRES(store_.mu_);
  // Under store_.mu_: a journal transaction committed; ends the failing state.
  void recovered_locked() REQUIRES(store_.mu_);
  // Under store_.mu_: what an accept is answered while failing.
  Status refusal_locked() const REQUIRES(store_.mu_);
  // Under store_.mu_: the accept of write `seq`'s callback, taken (empty once answered).
  JournalCommitted take_answer_locked(std::uint64_t seq) REQUIRES(store_.mu_);
  // Under store_.mu_: whether the writer should run probe() now; else when it is due.
  bool probe_due_locked(std::chrono::steady_clock::time_point now) const REQUIRES(store_.mu_);
  std::chrono::steady_clock::time_point next_probe_locked() const REQUIRES(store_.mu_);
  // The writer's, no lock held: one small write transaction; a commit ends failing.
  void probe(sqlite::SqliteDb& db);
  // The sync watch's thread: turns the journal failing when a transaction passes
  // sync_timeout, and answers every accept waiting.
  void watch_syncs();
  void stop_watch();
  // The writer's, no lock held: ends (cancelled) the tasks of accepts that committed after
  // the sync watch had answered them with a refusal.
  void end_refused_late(const std::vector<std::uint64_t>& ids);

  DeadLetterStoreImpl& store_;
  const TaskJournalOptions opts_;
  std::shared_ptr<spdlog::logger> log_;
  Mutex query_mu_;
  std::unique_ptr<sqlite::SqliteDb> query_owner_ PT_GUARDED_BY(query_mu_);  // the reads'
  // The WAL's checkpoints, off the writer's thread (wal_checkpointer.hpp).
  std::unique_ptr<sqlite::WalCheckpointer> checkpointer_;
  // The journal's state (journal_state.hpp): written by the writer thread under state_mu_,
  // read by every reader under it.
  mutable Mutex state_mu_;
  std::unique_ptr<JournalState> state_ PT_GUARDED_BY(state_mu_);
  CondVar state_cv_;  // the state deleted rounds (read_back() waits for it)
  // The writer thread's view of the state: it alone writes it, so it reads it without
  // state_mu_ (and writes it under it).
  const JournalState& writer_view() const NO_THREAD_SAFETY_ANALYSIS { return *state_; }

  // Guarded by store_.mu_ (the writer's lock), so the writer waits on one condition.
  // The writes waiting, in the chunks they were queued in (a loop's turn of records, an
  // accept() batch, a single record): queueing moves a chunk, never a write. Oldest first
  // from queue_head_ (the chunks before it were taken: a round may take only the front, whole
  // chunks up to max_batch tasks).
  std::vector<std::vector<Write>> queue_ GUARDED_BY(store_.mu_);
  std::size_t queue_head_ GUARDED_BY(store_.mu_) = 0;
  std::size_t queued_writes_ GUARDED_BY(store_.mu_) = 0;   // in queue_ from queue_head_
  std::uint64_t queued_tasks_ GUARDED_BY(store_.mu_) = 0;  // tasks in accept() writes of queue_
  // Emptied chunks whose storage hand_over() gives back to the pool loops, and their
  // capacity in writes (bounded).
  std::vector<std::vector<Write>> spare_ GUARDED_BY(store_.mu_);
  std::size_t spare_writes_ GUARDED_BY(store_.mu_) = 0;
  std::uint64_t next_seq_ GUARDED_BY(store_.mu_) = 1;
  std::uint64_t taken_seq_ GUARDED_BY(store_.mu_) =
      0;  // the oldest taken write's seq while taken_count_ > 0
  std::size_t taken_count_ GUARDED_BY(store_.mu_) = 0;
  std::uint64_t taken_tasks_ GUARDED_BY(store_.mu_) = 0;
  std::size_t last_round_batches_ GUARDED_BY(store_.mu_) =
      0;  // accept() batches of the last round that had any
  std::chrono::steady_clock::time_point next_age_check_ GUARDED_BY(store_.mu_){};
  std::chrono::steady_clock::time_point retention_paused_until_
      GUARDED_BY(store_.mu_){};  // after a failed chunk
  TaskJournalStats stats_ GUARDED_BY(store_.mu_);

  // The writer thread's own (no lock): the writes of the current round (in order, each in
  // one of the chunks taken), the callbacks to deliver after it, and what the open
  // transaction wrote to the log.
  std::vector<std::vector<Write>> taken_chunks_;
  std::vector<Write*> taken_;
  // The log has rounds compaction can delete (evict_finished(), on the writer, or in open()
  // before the writer starts).
  bool compaction_due_ = false;
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
  std::optional<Failing> failing_ GUARDED_BY(store_.mu_);
  std::optional<std::chrono::steady_clock::time_point> writing_since_ GUARDED_BY(store_.mu_);
  bool stuck_reported_ GUARDED_BY(store_.mu_) =
      false;  // the current transaction passed sync_timeout
  std::chrono::steady_clock::time_point last_probe_ GUARDED_BY(store_.mu_){};
  // The callbacks of the accepts queued or being written, by write seq (ascending): whoever
  // answers first (the writer after its round, a refusal, the sync watch) takes it.
  std::deque<std::pair<std::uint64_t, JournalCommitted>> accept_answers_ GUARDED_BY(store_.mu_);
  CondVar watch_cv_;
  bool watch_stop_ GUARDED_BY(store_.mu_) = false;
  std::thread watch_;
  std::unique_ptr<RoundResult> round_;
  std::unique_ptr<RoundPlan> plan_;
  std::unique_ptr<Tx> tx_;
};

}  // namespace sandpool
