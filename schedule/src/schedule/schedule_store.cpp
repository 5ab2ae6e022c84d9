// SqliteScheduleStore: one row per schedule, its last fired slot and that slot's task.
#include <sandpool/schedule/schedule_store.hpp>

#include <sqlite3.h>

#include <sandpool/store/sqlite_db.hpp>

namespace sandpool {

namespace {

// Long enough to wait out the journal writer's group commit; short enough for a tick.
constexpr int kBusyTimeoutMs = 5000;

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS schedule_slots ("
    " name TEXT PRIMARY KEY,"
    " slot_s INTEGER NOT NULL,"
    " task_id INTEGER NOT NULL,"
    " fired_ms INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS "
    "INTEGER)));"
    "CREATE TABLE IF NOT EXISTS schedule_defs ("
    " name TEXT PRIMARY KEY,"
    " definition TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS schedule_pauses ("
    " name TEXT PRIMARY KEY,"
    " paused INTEGER NOT NULL,"
    " declared INTEGER NOT NULL)";

// Prepared once each (SqliteDb caches statements by their literal's address).
constexpr const char* kForgetSlot = "DELETE FROM schedule_slots WHERE name = ?";
constexpr const char* kForgetPause = "DELETE FROM schedule_pauses WHERE name = ?";
constexpr const char* kDropDefinition = "DELETE FROM schedule_defs WHERE name = ?";

}  // namespace

struct SqliteScheduleStore::Db {
  sqlite::SqliteDb db;
};

SqliteScheduleStore::SqliteScheduleStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}
SqliteScheduleStore::~SqliteScheduleStore() = default;

Result<std::unique_ptr<SqliteScheduleStore>> SqliteScheduleStore::open(const std::string& path) {
  auto db = sqlite::SqliteDb::open(path, kBusyTimeoutMs);
  if (!db) return db.status();
  if (Status st = db->exec(kSchema, "create the schedules' tables"); !st) return st;
  auto holder = std::make_unique<Db>();
  holder->db = std::move(*db);
  return std::unique_ptr<SqliteScheduleStore>(new SqliteScheduleStore(std::move(holder)));
}

Result<std::optional<FiredSlot>> SqliteScheduleStore::last_fired(const std::string& name) {
  MutexLock lock(mu_);
  static const char* const kSql = "SELECT slot_s, task_id FROM schedule_slots WHERE name = ?";
  auto stmt = db_->db.prepare(kSql, "read schedule_slots");
  if (!stmt) return stmt.status();
  sqlite::StmtRef ref(*stmt);
  ref->bind_text(1, name);
  const int rc = ref->step();
  if (rc == SQLITE_DONE) return std::optional<FiredSlot>{};
  if (rc != SQLITE_ROW) return db_->db.error(rc, "read schedule_slots");
  // The file is the state dir's: a row is checked like any input.
  const std::int64_t slot = ref->int64(0);
  const std::int64_t task = ref->int64(1);
  if (slot < 0 || task < 0) {
    return Status::error(Code::kInternal, "schedule_slots row of " + name + " is corrupt");
  }
  return std::optional<FiredSlot>(FiredSlot{slot, static_cast<std::uint64_t>(task)});
}

Status SqliteScheduleStore::record_fired(const std::string& name, const FiredSlot& fired) {
  MutexLock lock(mu_);
  static const char* const kSql =
      "INSERT INTO schedule_slots (name, slot_s, task_id) VALUES (?, ?, ?)"
      " ON CONFLICT (name) DO UPDATE SET slot_s = excluded.slot_s, task_id = excluded.task_id,"
      " fired_ms = excluded.fired_ms WHERE excluded.slot_s >= schedule_slots.slot_s";
  auto stmt = db_->db.prepare(kSql, "write schedule_slots");
  if (!stmt) return stmt.status();
  sqlite::StmtRef ref(*stmt);
  ref->bind_text(1, name);
  ref->bind(2, fired.slot_s);
  ref->bind(3, static_cast<std::int64_t>(fired.task_id));
  return db_->db.step_done(**stmt, "write schedule_slots");
}

Result<std::optional<KeptPause>> SqliteScheduleStore::kept_pause(const std::string& name) {
  MutexLock lock(mu_);
  static const char* const kSql = "SELECT paused, declared FROM schedule_pauses WHERE name = ?";
  auto stmt = db_->db.prepare(kSql, "read schedule_pauses");
  if (!stmt) return stmt.status();
  sqlite::StmtRef ref(*stmt);
  ref->bind_text(1, name);
  const int rc = ref->step();
  if (rc == SQLITE_DONE) return std::optional<KeptPause>{};
  if (rc != SQLITE_ROW) return db_->db.error(rc, "read schedule_pauses");
  const std::int64_t paused = ref->int64(0);
  const std::int64_t declared = ref->int64(1);
  if ((paused != 0 && paused != 1) || (declared != 0 && declared != 1)) {
    return Status::error(Code::kInternal, "schedule_pauses row of " + name + " is corrupt");
  }
  return std::optional<KeptPause>(KeptPause{paused == 1, declared == 1});
}

Status SqliteScheduleStore::keep_pause(const std::string& name, const KeptPause& pause) {
  MutexLock lock(mu_);
  static const char* const kSql =
      "INSERT INTO schedule_pauses (name, paused, declared) VALUES (?, ?, ?)"
      " ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, declared = excluded.declared";
  auto stmt = db_->db.prepare(kSql, "write schedule_pauses");
  if (!stmt) return stmt.status();
  sqlite::StmtRef ref(*stmt);
  ref->bind_text(1, name);
  ref->bind(2, std::int64_t{pause.paused ? 1 : 0});
  ref->bind(3, std::int64_t{pause.declared ? 1 : 0});
  return db_->db.step_done(**stmt, "write schedule_pauses");
}

Status SqliteScheduleStore::forget_pause(const std::string& name) {
  MutexLock lock(mu_);
  return delete_named(kForgetPause, "forget schedule_pauses", name);
}

Status SqliteScheduleStore::forget(const std::string& name) {
  MutexLock lock(mu_);
  if (Status st = delete_named(kForgetSlot, "forget schedule_slots", name); !st) return st;
  return delete_named(kForgetPause, "forget schedule_pauses", name);
}

Status SqliteScheduleStore::delete_named(const char* sql, std::string_view op,
                                         const std::string& name) {
  auto stmt = db_->db.prepare(sql, op);
  if (!stmt) return stmt.status();
  sqlite::StmtRef ref(*stmt);
  ref->bind_text(1, name);
  return db_->db.step_done(**stmt, op);
}

Result<std::vector<SqliteScheduleStore::Definition>> SqliteScheduleStore::definitions() {
  MutexLock lock(mu_);
  static const char* const kSql = "SELECT name, definition FROM schedule_defs ORDER BY name";
  auto stmt = db_->db.prepare(kSql, "read schedule_defs");
  if (!stmt) return stmt.status();
  sqlite::StmtRef ref(*stmt);
  std::vector<Definition> out;
  for (;;) {
    const int rc = ref->step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return db_->db.error(rc, "read schedule_defs");
    out.push_back({ref->text(0), ref->text(1)});
  }
}

Status SqliteScheduleStore::put_definition(const Definition& d) {
  MutexLock lock(mu_);
  static const char* const kSql =
      "INSERT INTO schedule_defs (name, definition) VALUES (?, ?)"
      " ON CONFLICT (name) DO UPDATE SET definition = excluded.definition";
  auto stmt = db_->db.prepare(kSql, "write schedule_defs");
  if (!stmt) return stmt.status();
  sqlite::StmtRef ref(*stmt);
  ref->bind_text(1, d.name);
  ref->bind_text(2, d.json);
  return db_->db.step_done(**stmt, "write schedule_defs");
}

Status SqliteScheduleStore::drop_definition(const std::string& name) {
  MutexLock lock(mu_);
  return delete_named(kDropDefinition, "drop schedule_defs", name);
}

}  // namespace sandpool
