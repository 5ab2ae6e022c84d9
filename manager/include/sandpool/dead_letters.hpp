// DeadLetterStore: the durable record of dead-lettered tasks (design.md, "Supervision,
// timeouts, retry"; schema and inspection in docs/dead-letters.md). One SQLite database,
// `<state_dir>/dead_letters.db`, WAL journal, mode 0600.
//
// Writes are asynchronous and batched: enqueue() only appends to an in-memory list; a
// background writer thread owned by the store commits everything pending in one
// transaction per batch (group commit) and then applies the retention bound. A failed
// write (SQLITE_BUSY, disk full, I/O error) keeps the batch in memory, is logged and
// counted, and is retried with exponential backoff; nothing is dropped while the store is
// open. Reads and purges run on a second connection and see committed letters only; call
// flush() first to read your own enqueues.
//
// Thread-safety: every member may be called from any thread, concurrently.
// Lifetime: ~DeadLetterStore() calls close(). The store owns its thread and connections.
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

#include <sandpool/pool.hpp>
#include <sandpool/status.hpp>
#include <sandpool/task.hpp>

namespace spdlog {
class logger;
}
namespace sandpool::sqlite {
class SqliteDb;
class SqliteStmt;
}  // namespace sandpool::sqlite

namespace sandpool {

// The plain-data part of SubmitOptions, as stored with a dead letter for its replay.
struct DeadLetterOptions {
  std::optional<std::chrono::milliseconds> timeout;  // empty: the pool's default
  std::optional<std::uint32_t> retries;              // empty: the pool's default
  std::int32_t priority = 0;
  std::string key;  // affinity key

  static DeadLetterOptions from(const SubmitOptions& o) {
    return {o.timeout, o.retries, o.priority, o.key};
  }
  // Returns options for resubmitting the task; the callbacks are the replayer's to set.
  SubmitOptions to_submit_options() const {
    SubmitOptions o;
    o.timeout = timeout;
    o.retries = retries;
    o.priority = priority;
    o.key = key;
    return o;
  }
};

// One dead-lettered task: its final account plus what a replay needs.
struct DeadLetter {
  // Assigned by the store when the letter is written (AUTOINCREMENT: never reused); 0 in
  // a letter not yet written. Task ids are not unique across pools or restarts, so the
  // store's operations address letters by this id.
  std::uint64_t letter_id = 0;
  // id, type, reason, error (the last one) and every attempt. Read back with state
  // kDeadLettered; cancel_reason and result are not stored.
  TaskResult task;
  std::string pool;
  std::string payload;  // binary-safe
  DeadLetterOptions options;
  std::int64_t dead_lettered_ms = 0;  // wall clock; 0 at enqueue: the store's now_ms()
};

// Which letters an operation applies to; every field that is set must match.
struct DeadLetterFilter {
  std::optional<std::string> pool;
  std::optional<std::string> type;
  std::optional<DeadReason> reason;
  std::optional<std::uint64_t> task_id;
  std::optional<std::int64_t> from_ms;   // dead_lettered_ms >= from_ms
  std::optional<std::int64_t> until_ms;  // dead_lettered_ms < until_ms
};

// Where a page ends: list() orders by (dead_lettered_ms, letter_id), both ascending.
struct DeadLetterCursor {
  std::int64_t dead_lettered_ms = 0;
  std::uint64_t letter_id = 0;
};

struct DeadLetterPage {
  std::size_t limit = 100;                // letters per page, at least 1
  std::optional<DeadLetterCursor> after;  // empty: from the first letter
};

struct DeadLetterList {
  std::vector<DeadLetter> letters;
  std::optional<DeadLetterCursor> next;  // pass as `after` for the next page; empty: the end
};

struct DeadLetterStoreOptions {
  std::string state_dir;                                           // created 0700 when missing
  std::uint64_t max_count = 100000;                                // letters kept; 0: no bound
  std::chrono::milliseconds max_age{std::chrono::hours(24 * 30)};  // 0: no bound
  std::size_t max_pending = 100000;  // enqueue() refuses beyond this (kQueueFull)
  std::size_t max_batch = 1000;      // letters per transaction
  std::chrono::milliseconds busy_timeout{1000};
  std::chrono::milliseconds retry_base{50};       // write retry backoff: base * 2^(n-1) ...
  std::chrono::milliseconds retry_max{5000};      // ... up to this
  std::chrono::milliseconds close_timeout{5000};  // close() gives up writing after this
  std::shared_ptr<spdlog::logger> logger;         // null: spdlog's default logger
  // Wall clock in ms; null: the system clock. Called from the writer thread and from
  // enqueue() callers, so it must be thread-safe.
  std::function<std::int64_t()> now_ms;
};

struct DeadLetterStoreStats {
  std::uint64_t written = 0;       // letters committed
  std::uint64_t pending = 0;       // enqueued, not yet committed (including a failing batch)
  std::uint64_t write_errors = 0;  // failed write transactions
  std::uint64_t transactions = 0;  // committed write transactions
  std::uint64_t evicted = 0;       // letters deleted by the retention bound
  std::uint64_t refused = 0;       // enqueues refused (full or closed)
  std::uint64_t dropped = 0;       // letters SQLite rejected for good, or left at close
};

class DeadLetterStore {
 public:
  // Creates state_dir (0700) and dead_letters.db (0600) when missing, switches the
  // journal to WAL, migrates the schema and starts the writer. Errors: kSystem (directory
  // or file), kInvalidArgument (a schema newer than this build), kInternal (SQLite).
  static Result<std::unique_ptr<DeadLetterStore>> open(DeadLetterStoreOptions options);
  ~DeadLetterStore();
  DeadLetterStore(const DeadLetterStore&) = delete;
  DeadLetterStore& operator=(const DeadLetterStore&) = delete;

  // Queues a letter for writing; never touches SQLite. Returns kQueueFull when max_pending
  // letters are already waiting (the writer is failing) and kClosed after close(); the
  // letter is then not stored and the caller keeps it.
  Status enqueue(DeadLetter letter);
  // Blocks until every letter enqueued before the call is committed (or dropped). Returns
  // kTimeout if that takes longer than `timeout`, kClosed if the store closed first.
  Status flush(std::chrono::milliseconds timeout);
  // Stops accepting letters and writes what is pending, retrying failed writes for up to
  // close_timeout; then stops the writer and closes its connection. Returns ok iff nothing
  // was left unwritten. Idempotent (later calls return the first call's result). list(), get()
  // and the purges keep working after close(), until destruction.
  Status close();

  // Returns committed letters matching `filter`, with their attempts, one page at a time.
  Result<DeadLetterList> list(const DeadLetterFilter& filter, const DeadLetterPage& page);
  // Returns the letter, or kNotFound.
  Result<DeadLetter> get(std::uint64_t letter_id);
  // Deletes letters; each returns how many were deleted (0 when none matched).
  Result<std::uint64_t> purge(std::uint64_t letter_id);
  Result<std::uint64_t> purge(const DeadLetterFilter& filter);
  Result<std::uint64_t> purge_older_than(std::int64_t dead_lettered_before_ms);
  // Deletes a letter once its replay was accepted by a pool (submit succeeded). Returns
  // kNotFound when it is already gone (purged, or replayed by someone else), so a double
  // replay is visible to the caller. Read letters with list()/get() to replay them.
  Status remove_replayed(std::uint64_t letter_id);
  // A replay's claim: returns the letter and deletes it from the store in one transaction,
  // or kNotFound when it is already gone. Of concurrent claims of one letter (threads or
  // processes) exactly one gets it.
  Result<DeadLetter> claim(std::uint64_t letter_id);
  // Puts a claimed letter back unchanged (its letter_id, times, attempts), for a replay
  // that did not happen (its submit was refused).
  Status restore(const DeadLetter& letter);

  DeadLetterStoreStats stats() const;
  // The database file: <state_dir>/dead_letters.db.
  const std::string& path() const { return path_; }

 private:
  DeadLetterStore(DeadLetterStoreOptions options, std::string path,
                  std::unique_ptr<sqlite::SqliteDb> writer_db,
                  std::unique_ptr<sqlite::SqliteDb> query_db);
  struct WriteOutcome;
  void run_writer();
  WriteOutcome write(std::vector<DeadLetter>& batch);
  Status write_one_transaction(const std::vector<DeadLetter>& batch, std::size_t begin,
                               std::size_t end, std::uint64_t* evicted);
  Status insert_letter(const DeadLetter& letter);
  Status apply_retention(std::uint64_t* evicted);
  Result<DeadLetter> read_letter(sqlite::SqliteStmt& row);
  std::int64_t now_ms() const;

  const DeadLetterStoreOptions opts_;
  const std::string path_;
  std::shared_ptr<spdlog::logger> log_;

  // The connections (SQLite stays out of this header: the owners hold them, the
  // references name them).
  std::unique_ptr<sqlite::SqliteDb> writer_owner_, query_owner_;
  sqlite::SqliteDb& writer_db_;  // used only by the writer thread (and open/close)
  std::mutex query_mu_;          // guards query_db_
  sqlite::SqliteDb& query_db_;   // list/get/purge

  mutable std::mutex mu_;            // guards everything below
  std::condition_variable work_cv_;  // the writer waits for letters or close
  std::condition_variable done_cv_;  // flush() waits for progress
  std::deque<DeadLetter> pending_;   // enqueued, not yet taken by the writer
  std::size_t in_batch_ = 0;         // taken by the writer, not yet resolved
  std::uint64_t enqueued_ = 0;       // letters ever accepted
  std::uint64_t resolved_ = 0;       // written + dropped, in FIFO order
  bool closing_ = false;             // no more enqueues; the writer drains and exits
  bool abort_ = false;               // close() ran out of time: give up pending letters
  bool writer_done_ = false;
  DeadLetterStoreStats stats_;
  std::mutex close_mu_;  // serialises close()
  bool closed_ = false;  // guarded by close_mu_
  Status close_status_;  // guarded by close_mu_
  std::thread writer_;
};

}  // namespace sandpool
