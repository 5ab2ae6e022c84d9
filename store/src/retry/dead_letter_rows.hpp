// The rows of one dead letter: inserting a letter with its attempts, and finding whether the
// store already holds a letter (for imports). Shared by the writer thread, import_letters()
// and restore() (a refused replay puts its letter back); each runs inside a transaction its
// caller opened on `db`. And reading attempt rows, a letter's or a journaled task's (their
// tables share these columns), for the store's and the journal's reads.
//
// Thread-safety: none; `db` is used by one thread at a time (sqlite_db.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/store/dead_letters.hpp>

#include <sandpool/store/sqlite_db.hpp>

namespace sandpool::dead_letter_rows {

// Which letter id an inserted letter gets.
enum class LetterId : std::uint8_t {
  kNew,   // a new one (AUTOINCREMENT: never one used before)
  kKeep,  // letter.letter_id, which must be free (a restored letter's own)
};

// Inserts the letter and its attempts; returns its letter id.
Result<std::uint64_t> insert(sqlite::SqliteDb& db, const DeadLetter& letter,
                             LetterId id = LetterId::kNew);

// Returns true iff a letter of the same pool, task id, type and dead_lettered_ms is stored:
// the identity of one dead-lettering of one task, kept by a spill file and its import.
Result<bool> exists(sqlite::SqliteDb& db, const DeadLetter& letter);

// The columns read_attempts() reads, in its order.
#define SP_ATTEMPT_COLUMNS "number, outcome, error, worker_pid, started_ms, ended_ms, backtrace"

// Steps `stmt` (a SELECT SP_ATTEMPT_COLUMNS, bound by the caller) to its end, appending each
// attempt to *history. An unknown outcome is kInternal, naming `owner` ("dead letter 7");
// SQLite's errors name `op`.
Status read_attempts(sqlite::SqliteDb& db, sqlite::SqliteStmt& stmt, const std::string& owner,
                     std::string_view op, std::vector<Attempt>* history);

}  // namespace sandpool::dead_letter_rows
