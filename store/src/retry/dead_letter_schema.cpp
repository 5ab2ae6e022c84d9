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
    // 1 -> 2: the task journal (docs/journal.md). Task ids are uint64 bit-cast to int64, as in
    // dead_letters. finished_ms is NULL while the task is unfinished.
    R"sql(
CREATE TABLE tasks (
  id              INTEGER PRIMARY KEY,
  pool            TEXT    NOT NULL,
  type            TEXT    NOT NULL,
  payload         BLOB    NOT NULL,
  timeout_ms      INTEGER,
  retries         INTEGER,
  priority        INTEGER NOT NULL,
  affinity_key    TEXT    NOT NULL,
  queue_ttl_ms    INTEGER,
  fail_fast       INTEGER NOT NULL,
  idempotency_key TEXT,
  state           TEXT    NOT NULL,
  retry_due_ms    INTEGER,
  running_attempt INTEGER,
  running_pid     INTEGER,
  running_since_ms INTEGER,
  reason          TEXT    NOT NULL DEFAULT '',
  result          BLOB,
  error           TEXT    NOT NULL DEFAULT '',
  letter_id       INTEGER,
  submitted_ms    INTEGER NOT NULL,
  updated_ms      INTEGER NOT NULL,
  finished_ms     INTEGER,
  kept_bytes      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX tasks_unfinished ON tasks (id) WHERE finished_ms IS NULL;
CREATE INDEX tasks_by_finish ON tasks (finished_ms, id) WHERE finished_ms IS NOT NULL;
CREATE INDEX tasks_by_key ON tasks (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE TABLE task_attempts (
  task_id    INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  number     INTEGER NOT NULL,
  outcome    TEXT    NOT NULL,
  error      TEXT    NOT NULL,
  worker_pid INTEGER NOT NULL,
  started_ms INTEGER NOT NULL,
  ended_ms   INTEGER NOT NULL,
  backtrace  TEXT    NOT NULL DEFAULT '',
  PRIMARY KEY (task_id, number)
) WITHOUT ROWID;
CREATE TABLE journal_meta (
  name  TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO journal_meta (name, value) VALUES ('highest_task_id', 0);
)sql",
    // 2 -> 3: the task journal as a log of rounds (docs/journal.md, "The round log"). The
    // rows of version 2's tasks and task_attempts are carried into it, and those tables
    // dropped, by the journal when it next opens (task_journal_reads.cpp): that takes C++.
    R"sql(
CREATE TABLE journal_rounds (
  seq  INTEGER PRIMARY KEY,
  body BLOB    NOT NULL
);
)sql",
    // 3 -> 4: a dead letter keeps its task's tenant (SubmitOptions::tenant; '' the default
    // one), so a replay runs as that tenant. Letters written before have ''.
    R"sql(
ALTER TABLE dead_letters ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
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

Status migrate(sqlite::SqliteDb& db, const std::string& path, int target) {
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
    if (v >= target) return db.exec("COMMIT", "migrate: commit");
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
