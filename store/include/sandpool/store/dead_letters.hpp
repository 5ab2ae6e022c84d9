// DeadLetterStore: the durable record of dead-lettered tasks (docs/architecture.md,
// "Life of a task"; schema, durability and spill files in docs/dead-letters.md). One SQLite
// database, `<state_dir>/dead_letters.db`, WAL journal, mode 0600.
//
// Writes are asynchronous and batched: enqueue() only appends to an in-memory list; a
// background writer thread owned by the store commits everything pending in one
// transaction per batch (group commit) and then applies the retention bound. A letter counts
// as written once its transaction committed: only then is its on_written callback called,
// with the letter's id. While the store is open it never refuses or drops a letter: a failed
// write (busy, disk full, I/O error, read-only or corrupt file, ...) keeps the letters in
// memory and is retried with exponential backoff until it succeeds or the store closes (the
// memory is bounded by the callers: each pending letter belongs to a task its pool still
// holds). A letter the database refuses for good on its own (too big, a constraint) is
// written alone to a spill file instead. close() spills whatever is still unwritten after
// close_timeout; `poolctl dlq import` loads a spill file back (import_letters()).
//
// Thread-safety: every member may be called from any thread, concurrently.
// Lifetime: ~DeadLetterStore() calls close(). The store owns its thread and connections.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/store/task_journal_options.hpp>
#include <sandpool/task/store_stats.hpp>  // DeadLetterStoreStats
#include <sandpool/task/task.hpp>
#include <sandpool/task/task_options.hpp>

namespace spdlog {
class logger;
}

namespace sandpool {

class TaskJournal;
class DeadLetterStoreImpl;  // dead_letter_store_impl.hpp

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
  // For its replay: the options a letter keeps (kept_options(): timeout, retries, priority,
  // key, tenant; its columns). The rest of a task's options do not outlive its letter.
  TaskOptions options;
  std::int64_t dead_lettered_ms = 0;  // wall clock; 0 at enqueue: the store's now_ms()

  // The options of `task` a letter keeps; the others are left at their defaults.
  static TaskOptions kept_options(const TaskOptions& task) {
    TaskOptions o;
    o.timeout = task.timeout;
    o.retries = task.retries;
    o.priority = task.priority;
    o.key = task.key;
    o.tenant = task.tenant;
    return o;
  }
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
  std::size_t max_batch = 1000;                                    // letters per transaction
  std::chrono::milliseconds busy_timeout{1000};
  std::chrono::milliseconds retry_base{50};       // write retry backoff: base * 2^(n-1) ...
  std::chrono::milliseconds retry_max{5000};      // ... up to this
  std::chrono::milliseconds close_timeout{5000};  // close() spills what is unwritten after this
  std::shared_ptr<spdlog::logger> logger;         // null: spdlog's default logger
  // Wall clock in ms; null: the system clock. Called from the writer thread and from
  // enqueue() callers, so it must be thread-safe.
  std::function<std::int64_t()> now_ms;
  // PRAGMA synchronous on the store's connections (task_journal_options.hpp).
  StoreSync sync = StoreSync::kFull;
  // The task journal (task_journal.hpp) in the same file, written by the same writer thread
  // in the same transactions as the letters; empty: none (journal() returns null).
  std::optional<TaskJournalOptions> journal;
};

// What became of one letter handed to enqueue(): committed to the database (letter_id > 0),
// or appended whole to spill_file (letter_id == 0) because the store closed before it could
// be written or the database refused it for good. Both empty: the letter is lost (even its
// spill failed); `lost` says why, and the store logged it as an error.
struct LetterReceipt {
  std::uint64_t letter_id = 0;
  std::string spill_file;
  std::string lost;
};
using LetterWritten = std::function<void(const LetterReceipt&)>;

// What import_letters() did.
struct DeadLetterImport {
  std::uint64_t imported = 0;         // letters committed
  std::uint64_t already_present = 0;  // letters skipped: the store already holds them
  // Letters skipped because the store's journal holds their task (open: it runs again, or
  // ended: its end or letter is written), except a `dead_lettered` end without a letter.
  std::uint64_t journaled = 0;
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

  // Takes responsibility for `letter`; never touches SQLite. While the store is open it never
  // refuses one (no queue bound: the memory is the callers' task records, bounded by them).
  // on_written (may be empty) is called exactly once per letter: on the store's writer thread
  // after the commit (or after a refused letter's spill file was fsync'd), or in close() after
  // the spill; with no store lock held. It must not block, throw, or call flush() or close()
  // (on the writer thread they would wait for themselves). After close(), enqueue() appends
  // the letter to a spill file itself and calls on_written before returning; it returns an
  // error only if even that fails (logged; the receipt says `lost` too).
  Status enqueue(DeadLetter letter, LetterWritten on_written = {});
  // Blocks until every letter enqueued before the call is committed (or spilled). Returns
  // kTimeout if that takes longer than `timeout`, kClosed if the store closed first.
  Status flush(std::chrono::milliseconds timeout);
  // Stops the writer once nothing is pending, retrying failed writes for up to close_timeout;
  // then writes every letter still pending to a new spill file in state_dir (docs/
  // dead-letters.md, "Spill files"), logs its name, calls their on_written with it, and closes
  // the writer's connection. Returns ok iff every letter was committed; otherwise kTimeout
  // naming the spill file, or kSystem when the spill failed too (the letters are lost, logged
  // as an error). Idempotent (later calls return the first call's result). list(), get(), the
  // purges and import_letters() keep working after close(), until destruction.
  Status close();

  // Commits `letters` in one transaction, all or none, skipping each letter the store already
  // holds (the same pool, task id, type and dead_lettered_ms), so importing a spill file twice
  // stores its letters once. Synchronous (on the query connection, beside the writer); no
  // retention is applied. Works after close(). Errors: the SQLite error; nothing imported.
  Result<DeadLetterImport> import_letters(const std::vector<DeadLetter>& letters);

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
  // The task journal opened with the store (DeadLetterStoreOptions::journal), or null. It
  // lives as long as the store.
  TaskJournal* journal() const;
  // The database file: <state_dir>/dead_letters.db.
  const std::string& path() const;

  // open()'s: the state and the writer thread (dead_letter_store_impl.hpp, the store's sources).
  explicit DeadLetterStore(std::unique_ptr<DeadLetterStoreImpl> impl);

 private:
  std::unique_ptr<DeadLetterStoreImpl> impl_;
};

}  // namespace sandpool
