#include "retry/dead_letter_schema.hpp"

#include <sqlite3.h>

#include <string>

namespace sandpool::dead_letter_schema {
namespace {

// Step i takes the schema from version i to i + 1. Never edit a released step: add one.
// task_id holds the uint64 task id bit-cast to a signed 64-bit integer.
constexpr const char* kSteps[] = {
    // 0 -> 1
    R"sql(
CREATE TABLE dead_letters (
  letter_id        INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id          INTEGER NOT NULL,
  pool             TEXT    NOT NULL,
  type             TEXT    NOT NULL,
  reason           TEXT    NOT NULL,
  error            TEXT    NOT NULL,
  payload          BLOB    NOT NULL,
  timeout_ms       INTEGER,
  retries          INTEGER,
  priority         INTEGER NOT NULL,
  affinity_key     TEXT    NOT NULL,
  dead_lettered_ms INTEGER NOT NULL
);
CREATE INDEX dead_letters_by_time ON dead_letters (dead_lettered_ms, letter_id);
CREATE INDEX dead_letters_by_task ON dead_letters (task_id);
CREATE TABLE attempts (
  letter_id  INTEGER NOT NULL REFERENCES dead_letters (letter_id) ON DELETE CASCADE,
  seq        INTEGER NOT NULL,
  number     INTEGER NOT NULL,
  outcome    TEXT    NOT NULL,
  error      TEXT    NOT NULL,
  worker_pid INTEGER NOT NULL,
  started_ms INTEGER NOT NULL,
  ended_ms   INTEGER NOT NULL,
  backtrace  TEXT    NOT NULL DEFAULT '',
  PRIMARY KEY (letter_id, seq)
) WITHOUT ROWID;
)sql",
};
constexpr int kStepCount = static_cast<int>(sizeof(kSteps) / sizeof(kSteps[0]));
static_assert(kStepCount == kVersion, "one migration step per schema version");

Result<int> read_version(sqlite::SqliteDb& db) {
  auto stmt = db.prepare("PRAGMA user_version", "read schema version");
  if (!stmt) return stmt.status();
  sqlite::StmtRef s(*stmt);
  const int rc = s->step();
  if (rc != SQLITE_ROW) return db.error(rc, "read schema version");
  return static_cast<int>(s->int64(0));
}

}  // namespace

Status migrate(sqlite::SqliteDb& db, const std::string& path) {
  // BEGIN IMMEDIATE before reading the version, so two processes opening the same fresh
  // file cannot both run step 0.
  for (;;) {
    SP_RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE", "migrate: begin"));
    auto version = read_version(db);
    if (!version) {
      (void)db.exec("ROLLBACK", "migrate: rollback");
      return version.status();
    }
    const int v = *version;
    if (v > kVersion || v < 0) {
      (void)db.exec("ROLLBACK", "migrate: rollback");
      return Status::invalid(path + " has dead-letter schema version " + std::to_string(v) +
                             ", but this sandpool understands versions up to " +
                             std::to_string(kVersion) +
                             "; run a newer sandpool or move the file away");
    }
    if (v == kVersion) return db.exec("COMMIT", "migrate: commit");
    Status s = db.exec(kSteps[v], "migrate to schema version " + std::to_string(v + 1));
    if (s.is_ok()) {
      const std::string set = "PRAGMA user_version = " + std::to_string(v + 1);
      s = db.exec(set.c_str(), "migrate: set user_version");
    }
    if (s.is_ok()) s = db.exec("COMMIT", "migrate: commit");
    if (!s.is_ok()) {
      (void)db.exec("ROLLBACK", "migrate: rollback");
      return s.with_context(path);
    }
  }
}

}  // namespace sandpool::dead_letter_schema
