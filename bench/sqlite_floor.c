/* What SQLite alone costs per task for the task journal's writes (docs/performance.md, "The
 * journal's floor"), outside poold: one thread, rounds of 4,000 tasks, one transaction per
 * round, retention deleting as many finished tasks as a round adds once 100,000 are kept.
 * Not built by CMake (it measures SQLite, not sandpool); one command:
 *
 *   cc -O2 -o /tmp/sqlite_floor bench/sqlite_floor.c -lsqlite3 && /tmp/sqlite_floor DIR
 *
 * DIR must be on the disk poold's state dir lives on. Each layout is run twice; the figure
 * is microseconds of wall time per task (accept, end and retention included).
 *
 * Layouts:
 * - rows:        schema version 2 as poold writes it (a row per task, its indexes, a row per
 *                attempt, retention deleting task by task), SQLite's checkpoints in the writer;
 * - rows-ckpt:   the same with the checkpoints off the writer (wal_autocheckpoint = 0);
 * - rows-lean:   no tasks_unfinished / tasks_by_finish index, the attempt in the task's row,
 *                retention in one range DELETE, checkpoints off the writer;
 * - log:         one blob row per round holding every accept (110 bytes a task) and every
 *                end (60 bytes a task), retention deleting whole rounds, checkpoints off;
 * - log-ckpt-in: the log with SQLite's checkpoints in the writer. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kTasks = 300000, kRound = 4000, kKeep = 100000 };

static const char* kRowsSchema =
    "CREATE TABLE tasks (id INTEGER PRIMARY KEY, pool TEXT NOT NULL, type TEXT NOT NULL,"
    " payload BLOB NOT NULL, priority INTEGER NOT NULL, affinity_key TEXT NOT NULL,"
    " fail_fast INTEGER NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',"
    " result BLOB, error TEXT NOT NULL DEFAULT '', submitted_ms INTEGER NOT NULL,"
    " updated_ms INTEGER NOT NULL, finished_ms INTEGER, kept_bytes INTEGER NOT NULL DEFAULT 0,"
    " first_attempt BLOB);"
    "CREATE TABLE task_attempts (task_id INTEGER NOT NULL REFERENCES tasks (id) ON DELETE"
    " CASCADE, number INTEGER NOT NULL, outcome TEXT NOT NULL, error TEXT NOT NULL,"
    " worker_pid INTEGER NOT NULL, started_ms INTEGER NOT NULL, ended_ms INTEGER NOT NULL,"
    " backtrace TEXT NOT NULL DEFAULT '', PRIMARY KEY (task_id, number)) WITHOUT ROWID;";
static const char* kRowsIndexes =
    "CREATE INDEX tasks_unfinished ON tasks (id) WHERE finished_ms IS NULL;"
    "CREATE INDEX tasks_by_finish ON tasks (finished_ms, id) WHERE finished_ms IS NOT NULL;";
static const char* kLogSchema =
    "CREATE TABLE rounds (seq INTEGER PRIMARY KEY, body BLOB NOT NULL);";

static sqlite3* db;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void check(int rc, const char* what) {
  if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW) return;
  fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
  exit(1);
}

static sqlite3_stmt* prepare(const char* sql) {
  sqlite3_stmt* s = NULL;
  check(sqlite3_prepare_v2(db, sql, -1, &s, NULL), sql);
  return s;
}

static void run(sqlite3_stmt* s, const char* what) {
  check(sqlite3_step(s), what);
  sqlite3_reset(s);
}

static void open_db(const char* dir, int checkpoint_in_writer) {
  char path[4096];
  snprintf(path, sizeof path, "%s/sqlite_floor.db", dir);
  unlink(path);
  snprintf(path + strlen(path), sizeof path - strlen(path), "-wal");
  unlink(path);
  path[strlen(path) - 4] = '\0';
  check(sqlite3_open(path, &db), "open");
  check(sqlite3_exec(db,
                     "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
                     " PRAGMA foreign_keys = ON",
                     NULL, NULL, NULL),
        "pragmas");
  if (!checkpoint_in_writer)
    check(sqlite3_exec(db, "PRAGMA wal_autocheckpoint = 0", NULL, NULL, NULL), "ckpt");
}

/* One round of the row layouts: accept `kRound` tasks, end them, delete as many of the oldest. */
static void rows_round(int first, int lean, sqlite3_stmt* const* st) {
  static const char payload[64] = {0};
  for (int id = first; id < first + kRound; ++id) {
    sqlite3_stmt* s = st[0];
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_text(s, 2, "echo", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, "echo", -1, SQLITE_STATIC);
    sqlite3_bind_blob(s, 4, payload, sizeof payload, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, 1700000000000);
    run(s, "insert");
  }
  for (int id = first; id < first + kRound; ++id) {
    sqlite3_stmt* s = st[1];
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_blob(s, 2, payload, sizeof payload, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, 1700000000001);
    if (lean) sqlite3_bind_blob(s, 4, payload, 40, SQLITE_STATIC);
    run(s, "finish");
    if (lean) continue;
    sqlite3_bind_int64(st[2], 1, id);
    run(st[2], "attempt");
  }
  const int oldest = first + kRound - kKeep;
  if (oldest <= 0) return;
  if (lean) {
    sqlite3_bind_int64(st[3], 1, oldest);
    run(st[3], "range delete");
    return;
  }
  for (int id = oldest - kRound; id < oldest; ++id) {
    if (id < 0) continue;
    sqlite3_bind_int64(st[3], 1, id);
    run(st[3], "delete");
  }
}

static double rows(const char* dir, int checkpoint_in_writer, int lean) {
  open_db(dir, checkpoint_in_writer);
  check(sqlite3_exec(db, kRowsSchema, NULL, NULL, NULL), "schema");
  if (!lean) check(sqlite3_exec(db, kRowsIndexes, NULL, NULL, NULL), "indexes");
  sqlite3_stmt* st[4] = {
      prepare("INSERT INTO tasks (id, pool, type, payload, priority, affinity_key, fail_fast,"
              " state, submitted_ms, updated_ms) VALUES (?1, ?2, ?3, ?4, 0, '', 0, 'queued', ?5,"
              " ?5)"),
      prepare(lean ? "UPDATE tasks SET state = 'completed', result = ?2, payload = x'',"
                     " updated_ms = ?3, finished_ms = ?3, kept_bytes = 100, first_attempt = ?4"
                     " WHERE id = ?1 AND finished_ms IS NULL"
                   : "UPDATE tasks SET state = 'completed', result = ?2, payload = x'',"
                     " updated_ms = ?3, finished_ms = ?3, kept_bytes = 100"
                     " WHERE id = ?1 AND finished_ms IS NULL"),
      prepare("INSERT OR REPLACE INTO task_attempts (task_id, number, outcome, error,"
              " worker_pid, started_ms, ended_ms) VALUES (?1, 1, 'ok', '', 1234, 1700000000000,"
              " 1700000000001)"),
      prepare(lean ? "DELETE FROM tasks WHERE id < ?1 AND finished_ms IS NOT NULL"
                   : "DELETE FROM tasks WHERE id = ?1"),
  };
  const double t0 = now();
  for (int first = 1; first <= kTasks; first += kRound) {
    check(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), "begin");
    rows_round(first, lean, st);
    check(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), "commit");
  }
  const double t = now() - t0;
  for (int i = 0; i < 4; ++i) sqlite3_finalize(st[i]);
  sqlite3_close(db);
  return t;
}

static double log_rounds(const char* dir, int checkpoint_in_writer) {
  open_db(dir, checkpoint_in_writer);
  check(sqlite3_exec(db, kLogSchema, NULL, NULL, NULL), "schema");
  sqlite3_stmt* insert = prepare("INSERT INTO rounds (seq, body) VALUES (?1, ?2)");
  sqlite3_stmt* evict = prepare("DELETE FROM rounds WHERE seq = ?1");
  char* body = malloc((size_t)kRound * 170);
  const double t0 = now();
  for (int first = 1, seq = 1; first <= kTasks; first += kRound, ++seq) {
    check(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), "begin");
    for (int i = 0; i < kRound; ++i) memset(body + (size_t)i * 170, 'a' + i % 16, 170);
    sqlite3_bind_int64(insert, 1, seq);
    sqlite3_bind_blob(insert, 2, body, kRound * 170, SQLITE_STATIC);
    run(insert, "insert round");
    if (first + kRound > kKeep) {
      sqlite3_bind_int64(evict, 1, seq - kKeep / kRound);
      run(evict, "evict round");
    }
    check(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), "commit");
  }
  const double t = now() - t0;
  free(body);
  sqlite3_finalize(insert);
  sqlite3_finalize(evict);
  sqlite3_close(db);
  return t;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  for (int pass = 0; pass < 2; ++pass) {
    printf("rows        %6.2f us/task\n", rows(argv[1], 1, 0) / kTasks * 1e6);
    printf("rows-ckpt   %6.2f us/task\n", rows(argv[1], 0, 0) / kTasks * 1e6);
    printf("rows-lean   %6.2f us/task\n", rows(argv[1], 0, 1) / kTasks * 1e6);
    printf("log         %6.2f us/task\n", log_rounds(argv[1], 0) / kTasks * 1e6);
    printf("log-ckpt-in %6.2f us/task\n", log_rounds(argv[1], 1) / kTasks * 1e6);
  }
  return 0;
}
