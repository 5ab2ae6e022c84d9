// DeadLetterStoreImpl: what stands behind DeadLetterStore (<sandpool/dead_letters.hpp>, whose
// comments are the contract): the SQLite connections, the writer thread and the state it
// shares with enqueue(), flush() and close(). Private to the store's and the journal's sources
// (the journal's writes ride the same writer thread and transactions: task_journal_impl.hpp).
//
// Thread-safety: as DeadLetterStore's, every public member from any thread. mu_ guards the
// writer's state here and the journal's queue and health there, so the writer waits on one
// condition; query_mu_ the query connection; close_mu_ serialises close().
// Lifetime: ~DeadLetterStoreImpl() calls close(); it owns its thread, connections and journal.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/store/dead_letters.hpp>

namespace spdlog {
class logger;
}

namespace sandpool {
namespace sqlite {
class SqliteDb;
class SqliteStmt;
}  // namespace sqlite

class TaskJournalImpl;

class DeadLetterStoreImpl {
 public:
  // As DeadLetterStore::open() (the store's public object wraps what it returns).
  static Result<std::unique_ptr<DeadLetterStoreImpl>> open(DeadLetterStoreOptions options);
  ~DeadLetterStoreImpl();
  DeadLetterStoreImpl(const DeadLetterStoreImpl&) = delete;
  DeadLetterStoreImpl& operator=(const DeadLetterStoreImpl&) = delete;

  // DeadLetterStore's members, which forward here.
  Status enqueue(DeadLetter letter, LetterWritten on_written);
  Status flush(std::chrono::milliseconds timeout) EXCLUDES(mu_);
  Status close() EXCLUDES(close_mu_, mu_);
  Result<DeadLetterImport> import_letters(const std::vector<DeadLetter>& letters)
      EXCLUDES(query_mu_);
  Result<DeadLetterList> list(const DeadLetterFilter& filter, const DeadLetterPage& page)
      EXCLUDES(query_mu_);
  Result<DeadLetter> get(std::uint64_t letter_id) EXCLUDES(query_mu_);
  Result<std::uint64_t> purge(std::uint64_t letter_id) EXCLUDES(query_mu_);
  Result<std::uint64_t> purge(const DeadLetterFilter& filter) EXCLUDES(query_mu_);
  Result<std::uint64_t> purge_older_than(std::int64_t dead_lettered_before_ms);
  Status remove_replayed(std::uint64_t letter_id);
  Result<DeadLetter> claim(std::uint64_t letter_id) EXCLUDES(query_mu_);
  Status restore(const DeadLetter& letter) EXCLUDES(query_mu_);
  DeadLetterStoreStats stats() const EXCLUDES(mu_);
  TaskJournal* journal() const { return journal_owner_.get(); }
  const std::string& path() const { return path_; }

 private:
  friend class TaskJournalImpl;  // queues its writes for the writer, under mu_

  // A letter in memory until it is committed or spilled.
  struct PendingLetter {
    DeadLetter letter;
    LetterWritten on_written;
    std::chrono::steady_clock::time_point since;  // when enqueue() took it
    std::uint64_t seq = 0;                        // enqueue order, from 1
    bool journaled = false;  // TaskJournal::dead_letter(): also ends the journaled task
  };
  // A receipt to hand to a letter's on_written, with no lock held.
  struct Delivery {
    LetterWritten on_written;
    LetterReceipt receipt;
  };
  struct WriteRound;   // dead_letter_writer.cpp
  struct Transaction;  // dead_letter_writer.cpp

  DeadLetterStoreImpl(DeadLetterStoreOptions options, std::string path,
                      std::unique_ptr<sqlite::SqliteDb> writer_db,
                      std::unique_ptr<sqlite::SqliteDb> query_db);
  void start_writer();
  // A connection to `path` configured as the store's (busy timeout, sync, foreign keys).
  static Result<sqlite::SqliteDb> open_connection(const std::string& path,
                                                  const DeadLetterStoreOptions& options);

  Status enqueue_letter(DeadLetter letter, LetterWritten on_written, bool journaled) EXCLUDES(mu_);

  // dead_letter_writer.cpp: the writer thread.
  void run_writer() EXCLUDES(mu_);
  // Under mu_ (released around the journal's probe and retention transactions): waits until
  // letters or journal writes wait, or close; runs the journal's retention chunks while idle.
  // Returns false when the writer should exit.
  bool wait_for_work() REQUIRES(mu_);
  bool has_work_locked() const REQUIRES(mu_);
  // Tries to write `batch`; leaves in it, in order, the letters that stay pending.
  WriteRound write_round(std::vector<PendingLetter>& batch);
  // write_round's last resort: the letters the database refuses (batch[i] for each `refused`)
  // go to a spill file and are done; when the file cannot be written they stay pending.
  void spill_refused(std::vector<PendingLetter>& batch,
                     std::vector<std::pair<std::size_t, Status>>& refused, std::vector<bool>& done,
                     WriteRound& round);
  // Commits batch[begin, end) and the retention bound in one transaction.
  // The round's first transaction: the journal's taken writes, then batch; the journal
  // learns how it went.
  Transaction write_whole(const std::vector<PendingLetter>& batch);
  // With `with_journal`, the journal's taken writes go first in the same transaction.
  Transaction write_transaction(const std::vector<PendingLetter>& batch, std::size_t begin,
                                std::size_t end, bool with_journal = false);
  Status apply_retention(std::uint64_t* evicted);
  // Under mu_: counts a finished round, logs when writes start failing or recover.
  void account_round(const WriteRound& round, std::size_t still_pending) REQUIRES(mu_);

  // dead_letter_spill.cpp: letters that do not go to the database.
  // Writes `letters` to a new spill file; returns its path (counted and logged) or the error.
  Result<std::string> spill(const std::vector<PendingLetter>& letters, const std::string& why);
  // spill(), and when even that fails counts the letters lost and logs it as an error.
  std::vector<Delivery> spill_or_lose(std::vector<PendingLetter> letters, const std::string& why)
      EXCLUDES(mu_);
  // Calls each on_written; no lock may be held.
  void deliver(std::vector<Delivery>& deliveries);

  // Under mu_: the letters held outside pending_ (the writer's batch, close()'s spill).
  void hold(const std::vector<PendingLetter>& letters) REQUIRES(mu_);
  // Under mu_: the seq of the oldest letter not yet committed or spilled.
  std::uint64_t oldest_unresolved() const REQUIRES(mu_);
  Result<DeadLetter> read_letter(sqlite::SqliteStmt& row) REQUIRES(query_mu_);
  // Whether an imported letter of task `task_id` is skipped: the journal holds the task
  // (DeadLetterImport::journaled).
  bool journal_holds(std::uint64_t task_id) const;
  std::int64_t now_ms() const;

  const DeadLetterStoreOptions opts_;
  const std::string path_;
  std::shared_ptr<spdlog::logger> log_;

  // The connections (SQLite stays out of this header: the owners hold them, the
  // references name them).
  std::unique_ptr<sqlite::SqliteDb> writer_owner_, query_owner_;
  sqlite::SqliteDb& writer_db_;  // used only by the writer thread (and open/close)
  Mutex query_mu_;
  sqlite::SqliteDb& query_db_ GUARDED_BY(query_mu_);  // list/get/purge/import

  // The writer's lock: its state here, the journal's queue and health there.
  mutable Mutex mu_;
  CondVar work_cv_;                                    // the writer waits for letters or close
  CondVar done_cv_;                                    // flush() waits for progress
  std::deque<PendingLetter> pending_ GUARDED_BY(mu_);  // enqueued, not yet taken by the writer
  std::size_t held_ GUARDED_BY(mu_) = 0;  // taken by the writer (or close()), not yet resolved
  std::uint64_t held_seq_ GUARDED_BY(mu_) = 0;  // the oldest held letter's seq
  std::chrono::steady_clock::time_point held_since_ GUARDED_BY(mu_);  // and when enqueued
  std::uint64_t next_seq_ GUARDED_BY(mu_) = 1;
  bool closing_ GUARDED_BY(mu_) = false;           // the writer exits once nothing is pending
  bool abort_ GUARDED_BY(mu_) = false;             // close() ran out of time: no more retries
  bool writer_done_ GUARDED_BY(mu_) = false;       // the writer exited; its letters are pending_
  bool spill_on_enqueue_ GUARDED_BY(mu_) = false;  // close() took the last pending letters
  // While stats_.writes_failing: since when, and how many rounds in a row.
  std::chrono::steady_clock::time_point failing_since_ GUARDED_BY(mu_);
  std::uint64_t failed_rounds_ GUARDED_BY(mu_) = 0;
  DeadLetterStoreStats stats_ GUARDED_BY(mu_);
  Mutex close_mu_;  // serialises close()
  bool closed_ GUARDED_BY(close_mu_) = false;
  Status close_status_ GUARDED_BY(close_mu_);
  // The journal opened with the store, set by open() before the writer starts: the object
  // journal() hands out, and the state behind it, which the writer drives.
  std::unique_ptr<TaskJournal> journal_owner_;
  TaskJournalImpl* journal_ = nullptr;
  std::thread writer_;
};

}  // namespace sandpool
