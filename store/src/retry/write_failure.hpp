// Whose fault a failed dead-letter write is, judged from SQLite's result code: the writer
// keeps letters pending through the database's bad conditions and spills only the letters
// the database refuses on their own (docs/dead-letters.md, "When a write fails").
#pragma once

namespace sandpool {

enum class WriteFailure {
  kCondition,  // the database or its disk: busy, locked, full, I/O, read-only, corrupt, ...
  kLetter,     // the letter itself: too big, a constraint, a type mismatch, a range
  kUnclear,    // anything else: a letter failing alone while others commit is the offender
};

// Returns the kind of failure for a (primary or extended) SQLite result code.
WriteFailure classify_write_failure(int sqlite_rc);

}  // namespace sandpool
