#include <sandpool/store/sqlite_db.hpp>

#include <sqlite3.h>

#include <cstring>
#include <utility>

namespace sandpool::sqlite {

SqliteStmt::~SqliteStmt() { sqlite3_finalize(stmt_); }

SqliteStmt& SqliteStmt::operator=(SqliteStmt&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    stmt_ = std::exchange(other.stmt_, nullptr);
  }
  return *this;
}

// Bind errors (a bad index, SQLITE_TOOBIG) surface from the following step().
void SqliteStmt::bind(int index, std::int64_t value) { sqlite3_bind_int64(stmt_, index, value); }

void SqliteStmt::bind_text(int index, std::string_view text) {
  sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
}

void SqliteStmt::bind_blob(int index, std::string_view bytes) {
  // A zero-length blob, not NULL: the column is NOT NULL and an empty payload is valid.
  sqlite3_bind_blob64(stmt_, index, bytes.empty() ? "" : bytes.data(), bytes.size(),
                      SQLITE_TRANSIENT);
}

void SqliteStmt::bind_null(int index) { sqlite3_bind_null(stmt_, index); }

void SqliteStmt::bind_optional(int index, std::optional<std::int64_t> value) {
  if (value) {
    bind(index, *value);
  } else {
    bind_null(index);
  }
}

void SqliteStmt::bind_optional_text(int index, const std::optional<std::string>& text) {
  if (text) {
    bind_text(index, *text);
  } else {
    bind_null(index);
  }
}

int SqliteStmt::step() { return sqlite3_step(stmt_); }

void SqliteStmt::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool SqliteStmt::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::int64_t SqliteStmt::int64(int column) const { return sqlite3_column_int64(stmt_, column); }

std::string SqliteStmt::text(int column) const {
  const auto* p = sqlite3_column_text(stmt_, column);
  const int n = sqlite3_column_bytes(stmt_, column);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n)) : "";
}

std::string SqliteStmt::blob(int column) const {
  const void* p = sqlite3_column_blob(stmt_, column);
  const int n = sqlite3_column_bytes(stmt_, column);
  return p ? std::string(static_cast<const char*>(p), static_cast<std::size_t>(n)) : "";
}

Result<SqliteDb> SqliteDb::open(const std::string& path, int busy_timeout_ms) {
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  SqliteDb db(raw);  // owns the handle even when the open failed
  if (rc != SQLITE_OK) {
    return raw ? db.error(rc, "sqlite3_open_v2(" + path + ")")
               : Status::error(Code::kInternal, "sqlite3_open_v2(" + path + "): out of memory");
  }
  sqlite3_extended_result_codes(raw, 1);
  const int brc = sqlite3_busy_timeout(raw, busy_timeout_ms);
  if (brc != SQLITE_OK) return db.error(brc, "sqlite3_busy_timeout");
  return db;
}

SqliteDb::~SqliteDb() { close(); }

SqliteDb::SqliteDb(SqliteDb&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), cache_(std::move(other.cache_)) {}

SqliteDb& SqliteDb::operator=(SqliteDb&& other) noexcept {
  if (this != &other) {
    close();
    db_ = std::exchange(other.db_, nullptr);
    cache_ = std::move(other.cache_);
  }
  return *this;
}

void SqliteDb::close() {
  cache_.clear();  // statements first: close_v2 would otherwise defer the close
  sqlite3_close_v2(db_);
  db_ = nullptr;
}

Status SqliteDb::exec(const char* sql, std::string_view op) {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? Status::ok() : error(rc, op);
}

Status SqliteDb::step_done(SqliteStmt& stmt, std::string_view op) {
  const int rc = stmt.step();
  return rc == SQLITE_DONE ? Status::ok() : error(rc, op);
}

Result<SqliteStmt*> SqliteDb::prepare(const char* sql, std::string_view op) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) return it->second.get();
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  if (rc != SQLITE_OK) return error(rc, std::string(op) + ": prepare");
  auto stmt = std::make_unique<SqliteStmt>(raw);
  SqliteStmt* p = stmt.get();
  cache_.emplace(sql, std::move(stmt));
  return p;
}

Status SqliteDb::error(int rc, std::string_view op) const {
  std::string msg(op);
  msg += ": ";
  // errmsg describes the connection's last error; errstr is the fallback for codes that
  // did not come from this connection (or when there is none).
  msg += db_ && sqlite3_extended_errcode(db_) == rc ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  msg += " (sqlite code " + std::to_string(rc) + ")";
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::error(Code::kTimeout, std::move(msg));
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_NOMEM:
    case SQLITE_PROTOCOL: {
      const int err = db_ ? sqlite3_system_errno(db_) : 0;
      if (err != 0) msg += std::string(" [") + std::strerror(err) + "]";
      return Status::error(Code::kSystem, std::move(msg));
    }
    default:
      return Status::error(Code::kInternal, std::move(msg));
  }
}

int SqliteDb::errcode() const { return db_ ? sqlite3_extended_errcode(db_) : SQLITE_NOMEM; }

std::int64_t SqliteDb::changes() const { return sqlite3_changes64(db_); }

std::int64_t SqliteDb::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

}  // namespace sandpool::sqlite
