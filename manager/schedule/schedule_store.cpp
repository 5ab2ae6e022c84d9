// SqliteScheduleStore: one row per schedule, its last fired slot and that slot's task.
#include <sandpool/schedule_store.hpp>

#include <sqlite3.h>

#include "retry/sqlite_db.hpp"

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
    " definition TEXT NOT NULL)";

}  // namespace

struct SqliteScheduleStore::Db {
  sqlite::SqliteDb db;
};

SqliteScheduleStore::SqliteScheduleStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}
SqliteScheduleStore::~SqliteScheduleStore() = default;

Result<std::unique_ptr<SqliteScheduleStore>> SqliteScheduleStore::open(const std::string& path) {
  auto db = sqlite::SqliteDb::open(path, kBusyTimeoutMs);
  if (!db) return db.status();
  if (Status st = db->exec(kSchema, "create schedule_slots and schedule_defs"); !st) return st;
  auto holder = std::make_unique<Db>();
  holder->db = std::move(*db);
  return std::unique_ptr<SqliteScheduleStore>(new SqliteScheduleStore(std::move(holder)));
}

Result<std::optional<FiredSlot>> SqliteScheduleStore::last_fired(const std::string& name) {
  std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
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

Status SqliteScheduleStore::forget(const std::string& name) {
  std::lock_guard lock(mu_);
  static const char* const kSql = "DELETE FROM schedule_slots WHERE name = ?";
  auto stmt = db_->db.prepare(kSql, "forget schedule_slots");
  if (!stmt) return stmt.status();
  sqlite::StmtRef ref(*stmt);
  ref->bind_text(1, name);
  return db_->db.step_done(**stmt, "forget schedule_slots");
}

Result<std::vector<SqliteScheduleStore::Definition>> SqliteScheduleStore::definitions() {
  std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
  static const char* const kSql = "DELETE FROM schedule_defs WHERE name = ?";
  auto stmt = db_->db.prepare(kSql, "drop schedule_defs");
  if (!stmt) return stmt.status();
  sqlite::StmtRef ref(*stmt);
  ref->bind_text(1, name);
  return db_->db.step_done(**stmt, "drop schedule_defs");
}

}  // namespace sandpool
