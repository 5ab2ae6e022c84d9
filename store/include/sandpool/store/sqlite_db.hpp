// A small RAII layer over the SQLite C API: SqliteDb owns one connection and a cache of its
// prepared statements; SqliteStmt owns one sqlite3_stmt. Errors become sandpool Status
// values that name the operation and carry SQLite's message.
//
// Thread-safety: none. A SqliteDb and its statements are used by one thread at a time (the
// owner serialises access); connections are opened with SQLITE_OPEN_NOMUTEX for that reason.
// Lifetime: statements handed out by SqliteDb::prepare live as long as the SqliteDb.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <sandpool/base/status.hpp>

struct sqlite3;
struct sqlite3_stmt;

namespace sandpool::sqlite {

// Move-only owner of one prepared statement. Bind indices are 1-based, column indices
// 0-based, as in the C API.
class SqliteStmt {
 public:
  SqliteStmt() = default;
  explicit SqliteStmt(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~SqliteStmt();
  SqliteStmt(SqliteStmt&& other) noexcept : stmt_(std::exchange(other.stmt_, nullptr)) {}
  SqliteStmt& operator=(SqliteStmt&& other) noexcept;
  SqliteStmt(const SqliteStmt&) = delete;
  SqliteStmt& operator=(const SqliteStmt&) = delete;

  void bind(int index, std::int64_t value);
  void bind_text(int index, std::string_view text);
  void bind_blob(int index, std::string_view bytes);
  void bind_null(int index);
  // Binds the value, or NULL when empty.
  void bind_optional(int index, std::optional<std::int64_t> value);
  void bind_optional_text(int index, const std::optional<std::string>& text);

  // Returns SQLITE_ROW, SQLITE_DONE or an error code.
  int step();
  // Resets the statement and clears its bindings, ending any read it holds open.
  void reset();

  bool is_null(int column) const;
  std::int64_t int64(int column) const;
  std::string text(int column) const;
  std::string blob(int column) const;

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// A statement borrowed from SqliteDb's cache; resets it when the borrow ends.
class StmtRef {
 public:
  explicit StmtRef(SqliteStmt* stmt) : stmt_(stmt) {}
  ~StmtRef() { stmt_->reset(); }
  StmtRef(const StmtRef&) = delete;
  StmtRef& operator=(const StmtRef&) = delete;
  SqliteStmt* operator->() const { return stmt_; }

 private:
  SqliteStmt* stmt_;
};

// Move-only owner of one connection (sqlite3_close_v2 in the destructor).
class SqliteDb {
 public:
  // Opens (creating if needed) the database at `path` read-write, without SQLite's own
  // mutexes, and sets the busy timeout. Errors name the path.
  static Result<SqliteDb> open(const std::string& path, int busy_timeout_ms);

  SqliteDb() = default;
  ~SqliteDb();
  SqliteDb(SqliteDb&& other) noexcept;
  SqliteDb& operator=(SqliteDb&& other) noexcept;
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Runs one or more statements that return no rows we need. `op` names the operation.
  Status exec(const char* sql, std::string_view op);
  // Returns the cached prepared statement for `sql` (prepared on first use), reset and
  // unbound, or the prepare error. `sql` must outlive the SqliteDb (a string literal).
  Result<SqliteStmt*> prepare(const char* sql, std::string_view op);
  // Steps `stmt` once, for a statement that returns no row: ok on SQLITE_DONE, else error().
  Status step_done(SqliteStmt& stmt, std::string_view op);
  // Returns the Status for a failed call that returned `rc`: "op: <SQLite message>".
  // The conditions worth retrying later map to kTimeout (BUSY, LOCKED) and kSystem (FULL,
  // IOERR, CANTOPEN, NOMEM, PROTOCOL; the OS errno appended when there is one); the rest,
  // such as a constraint or a corrupt file, to kInternal.
  Status error(int rc, std::string_view op) const;
  // The extended result code of the connection's last failed call (SQLITE_FULL,
  // SQLITE_READONLY_DBMOVED, ...); read it before the next call resets it.
  int errcode() const;
  // Rows changed by the last INSERT/UPDATE/DELETE.
  std::int64_t changes() const;
  std::int64_t last_insert_rowid() const;
  sqlite3* handle() const { return db_; }

 private:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  void close();
  sqlite3* db_ = nullptr;
  // Keyed by the literal's address: each call site prepares its own statement once.
  std::unordered_map<const char*, std::unique_ptr<SqliteStmt>> cache_;
};

}  // namespace sandpool::sqlite
