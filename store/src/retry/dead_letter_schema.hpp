// The dead-letter database schema and its migrations (documented in docs/dead-letters.md;
// keep the two in step). PRAGMA user_version holds the schema version.
#pragma once

#include <sandpool/base/status.hpp>

#include <sandpool/store/sqlite_db.hpp>

namespace sandpool::dead_letter_schema {

// The version this build writes and understands.
inline constexpr int kVersion = 4;

// Brings the database to kVersion: creates it from nothing (user_version 0) or applies each
// migration step in order, each in its own transaction. Returns kInvalidArgument naming
// both versions when the file is newer than this build, so nothing is written to it.
// `target` below kVersion stops there (tests build files of an older version with it).
Status migrate(sqlite::SqliteDb& db, const std::string& path, int target = kVersion);

}  // namespace sandpool::dead_letter_schema
