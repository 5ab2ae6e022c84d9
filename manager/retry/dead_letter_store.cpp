#include <sandpool/dead_letters.hpp>

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <spdlog/spdlog.h>
#include <algorithm>

#include <sandpool/posix_call.hpp>
#include <sandpool/unique_fd.hpp>

#include "retry/dead_letter_schema.hpp"
#include "retry/sqlite_db.hpp"

namespace sandpool {
namespace {

using sqlite::SqliteDb;
using sqlite::SqliteStmt;
using sqlite::StmtRef;

// The filter's parameters are ?1..?6; an unset one is bound NULL and matches everything,
// so each statement is prepared once whatever the filter.
#define SP_DL_WHERE                                                                         \
  "(?1 IS NULL OR pool = ?1) AND (?2 IS NULL OR type = ?2) AND (?3 IS NULL OR reason = ?3)" \
  " AND (?4 IS NULL OR task_id = ?4) AND (?5 IS NULL OR dead_lettered_ms >= ?5)"            \
  " AND (?6 IS NULL OR dead_lettered_ms < ?6)"
#define SP_DL_COLUMNS                                                                      \
  "letter_id, task_id, pool, type, reason, error, payload, timeout_ms, retries, priority," \
  " affinity_key, dead_lettered_ms"

constexpr const char* kInsertLetter =
    "INSERT INTO dead_letters (task_id, pool, type, reason, error, payload, timeout_ms,"
    " retries, priority, affinity_key, dead_lettered_ms)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";
constexpr const char* kInsertAttempt =
    "INSERT INTO attempts (letter_id, seq, number, outcome, error, worker_pid, started_ms,"
    " ended_ms, backtrace) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
constexpr const char* kList = "SELECT " SP_DL_COLUMNS " FROM dead_letters WHERE " SP_DL_WHERE
                              " AND (?7 IS NULL OR (dead_lettered_ms, letter_id) > (?7, ?8))"
                              " ORDER BY dead_lettered_ms, letter_id LIMIT ?9";
constexpr const char* kGet = "SELECT " SP_DL_COLUMNS " FROM dead_letters WHERE letter_id = ?1";
constexpr const char* kAttempts =
    "SELECT number, outcome, error, worker_pid, started_ms, ended_ms, backtrace FROM attempts"
    " WHERE letter_id = ?1 ORDER BY seq";
constexpr const char* kDeleteId = "DELETE FROM dead_letters WHERE letter_id = ?1";
constexpr const char* kDeleteFilter = "DELETE FROM dead_letters WHERE " SP_DL_WHERE;
constexpr const char* kDeleteOlder = "DELETE FROM dead_letters WHERE dead_lettered_ms < ?1";
constexpr const char* kDeleteBeyondCount =
    "DELETE FROM dead_letters WHERE letter_id IN (SELECT letter_id FROM dead_letters"
    " ORDER BY dead_lettered_ms DESC, letter_id DESC LIMIT -1 OFFSET ?1)";

// Worth retrying later: busy/locked (kTimeout), disk full or I/O (kSystem).
bool is_transient(const Status& s) {
  return s.code() == Code::kTimeout || s.code() == Code::kSystem;
}

std::int64_t system_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Returns the enumerator whose to_string() is `name`; enumerators run from 0 to `last`.
template <typename E>
std::optional<E> parse_enum(std::string_view name, E last) {
  for (int i = 0; i <= static_cast<int>(last); ++i) {
    if (to_string(static_cast<E>(i)) == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

void bind_filter(SqliteStmt& s, const DeadLetterFilter& f) {
  s.bind_optional_text(1, f.pool);
  s.bind_optional_text(2, f.type);
  if (f.reason) s.bind_text(3, to_string(*f.reason));
  if (f.task_id) s.bind(4, static_cast<std::int64_t>(*f.task_id));
  s.bind_optional(5, f.from_ms);
  s.bind_optional(6, f.until_ms);
}

// Runs a statement that returns no rows to completion.
Status run(SqliteDb& db, SqliteStmt& s, std::string_view op) {
  const int rc = s.step();
  return rc == SQLITE_DONE ? Status::ok() : db.error(rc, op);
}

// Applies the per-connection settings; the journal mode is stored in the file.
Status configure(SqliteDb& db) {
  return db.exec("PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL", "configure connection");
}

Status enable_wal(SqliteDb& db) {
  auto stmt = db.prepare("PRAGMA journal_mode = WAL", "set journal_mode");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  const int rc = s->step();
  if (rc != SQLITE_ROW) return db.error(rc, "set journal_mode");
  const std::string mode = s->text(0);
  if (mode != "wal") return Status::error(Code::kInternal, "journal_mode stays '" + mode + "'");
  return Status::ok();
}

// Creates `dir` (0700) unless it exists as a directory.
Status ensure_dir(const std::string& dir) {
  auto made = posix_call("mkdir(" + dir + ")", [&] { return ::mkdir(dir.c_str(), 0700); });
  if (made || made.status().sys_errno() != EEXIST) return made.status();
  struct stat st {};
  SP_RETURN_IF_ERROR(
      posix_call("stat(" + dir + ")", [&] { return ::stat(dir.c_str(), &st); }).status());
  if (!S_ISDIR(st.st_mode)) return Status::invalid("state_dir " + dir + " is not a directory");
  return Status::ok();
}

// Creates the database file with mode 0600 before SQLite opens it: SQLite would create it
// with 0644 & ~umask, and gives its -wal and -shm files the main file's mode.
Status ensure_file(const std::string& path) {
  auto fd = posix_call("open(" + path + ")", [&] {
    return ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  });
  if (!fd) return fd.status();
  UniqueFd owned(*fd);
  return Status::ok();
}

}  // namespace

struct DeadLetterStore::WriteOutcome {
  std::size_t resolved = 0;  // the prefix of the batch that was written or dropped
  std::uint64_t written = 0, dropped = 0, transactions = 0, evicted = 0, errors = 0;
  Status last_error;
};

Result<std::unique_ptr<DeadLetterStore>> DeadLetterStore::open(DeadLetterStoreOptions options) {
  if (options.state_dir.empty()) return Status::invalid("dead-letter store: empty state_dir");
  if (options.max_batch == 0) options.max_batch = 1;
  const std::string path = options.state_dir + "/dead_letters.db";
  const auto ctx = "dead-letter store " + path;
  SP_RETURN_IF_ERROR(ensure_dir(options.state_dir).with_context(ctx));
  SP_RETURN_IF_ERROR(ensure_file(path).with_context(ctx));
  const int busy_ms = static_cast<int>(options.busy_timeout.count());
  auto writer = SqliteDb::open(path, busy_ms);
  if (!writer) return writer.status();
  SP_RETURN_IF_ERROR(enable_wal(*writer).with_context(ctx));
  SP_RETURN_IF_ERROR(configure(*writer).with_context(ctx));
  SP_RETURN_IF_ERROR(dead_letter_schema::migrate(*writer, path));
  auto query = SqliteDb::open(path, busy_ms);
  if (!query) return query.status();
  SP_RETURN_IF_ERROR(configure(*query).with_context(ctx));
  return std::unique_ptr<DeadLetterStore>(new DeadLetterStore(
      std::move(options), path, std::make_unique<SqliteDb>(std::move(writer).value()),
      std::make_unique<SqliteDb>(std::move(query).value())));
}

DeadLetterStore::DeadLetterStore(DeadLetterStoreOptions options, std::string path,
                                 std::unique_ptr<SqliteDb> writer_db,
                                 std::unique_ptr<SqliteDb> query_db)
    : opts_(std::move(options)),
      path_(std::move(path)),
      log_(opts_.logger ? opts_.logger : spdlog::default_logger()),
      writer_owner_(std::move(writer_db)),
      query_owner_(std::move(query_db)),
      writer_db_(*writer_owner_),
      query_db_(*query_owner_) {
  writer_ = std::thread([this] { run_writer(); });
}

DeadLetterStore::~DeadLetterStore() { (void)close(); }

std::int64_t DeadLetterStore::now_ms() const {
  return opts_.now_ms ? opts_.now_ms() : system_now_ms();
}

Status DeadLetterStore::enqueue(DeadLetter letter) {
  if (letter.dead_lettered_ms == 0) letter.dead_lettered_ms = now_ms();
  {
    std::lock_guard lk(mu_);
    if (closing_) {
      ++stats_.refused;
      return Status::error(Code::kClosed, "dead-letter store is closed");
    }
    if (pending_.size() + in_batch_ >= opts_.max_pending) {
      ++stats_.refused;
      return Status::error(Code::kQueueFull,
                           "dead-letter store: " + std::to_string(opts_.max_pending) +
                               " letters already wait to be written");
    }
    pending_.push_back(std::move(letter));
    ++enqueued_;
  }
  work_cv_.notify_one();
  return Status::ok();
}

Status DeadLetterStore::flush(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  const std::uint64_t target = enqueued_;
  done_cv_.wait_for(lk, timeout, [&] { return resolved_ >= target || writer_done_; });
  if (resolved_ >= target) return Status::ok();
  if (writer_done_) return Status::error(Code::kClosed, "dead-letter store closed before flush");
  return Status::error(Code::kTimeout, "dead-letter store: " + std::to_string(target - resolved_) +
                                           " letters still unwritten after flush timeout");
}

Status DeadLetterStore::close() {
  std::lock_guard close_lk(close_mu_);
  if (closed_) return close_status_;
  closed_ = true;
  std::uint64_t dropped_before = 0;
  {
    std::unique_lock lk(mu_);
    closing_ = true;
    dropped_before = stats_.dropped;
    work_cv_.notify_all();
    if (!done_cv_.wait_for(lk, opts_.close_timeout, [&] { return writer_done_; })) {
      abort_ = true;  // the writer drops what is left after its current attempt
      work_cv_.notify_all();
    }
  }
  writer_.join();
  writer_db_ = SqliteDb();
  std::lock_guard lk(mu_);
  if (stats_.dropped > dropped_before) {
    close_status_ = Status::error(
        Code::kTimeout, "dead-letter store: " + std::to_string(stats_.dropped - dropped_before) +
                            " letters could not be written before close");
  }
  return close_status_;
}

DeadLetterStoreStats DeadLetterStore::stats() const {
  std::lock_guard lk(mu_);
  DeadLetterStoreStats s = stats_;
  s.pending = pending_.size() + in_batch_;
  return s;
}

void DeadLetterStore::run_writer() {
  std::vector<DeadLetter> batch;  // taken from pending_, kept until written or dropped
  std::uint32_t failures = 0;
  std::unique_lock lk(mu_);
  for (;;) {
    if (abort_) {
      const std::size_t left = batch.size() + pending_.size();
      stats_.dropped += left;
      resolved_ += left;
      pending_.clear();
      in_batch_ = 0;
      if (left > 0) log_->error("dead-letter store {}: {} letters dropped at close", path_, left);
      break;
    }
    if (batch.empty()) {
      work_cv_.wait(lk, [&] { return closing_ || !pending_.empty(); });
      if (pending_.empty()) break;  // closing, and everything is written
    }
    // Group commit: whatever waits joins the batch, up to max_batch.
    while (batch.size() < opts_.max_batch && !pending_.empty()) {
      batch.push_back(std::move(pending_.front()));
      pending_.pop_front();
    }
    in_batch_ = batch.size();
    lk.unlock();
    WriteOutcome out = write(batch);
    lk.lock();
    stats_.written += out.written;
    stats_.dropped += out.dropped;
    stats_.transactions += out.transactions;
    stats_.evicted += out.evicted;
    stats_.write_errors += out.errors;
    resolved_ += out.resolved;
    in_batch_ = batch.size();
    if (out.resolved > 0) done_cv_.notify_all();
    if (batch.empty()) {
      failures = 0;
      continue;
    }
    ++failures;
    const auto shift = std::min<std::uint32_t>(failures - 1, 20);
    const std::chrono::milliseconds delay =
        std::min(opts_.retry_max, opts_.retry_base * (std::int64_t{1} << shift));
    log_->warn(
        "dead-letter store {}: writing {} letters failed ({} in a row), retrying in {} ms: {}",
        path_, batch.size(), failures, delay.count(), out.last_error.to_string());
    work_cv_.wait_for(lk, delay, [&] { return abort_; });
  }
  writer_done_ = true;
  done_cv_.notify_all();
}

DeadLetterStore::WriteOutcome DeadLetterStore::write(std::vector<DeadLetter>& batch) {
  WriteOutcome out;
  Status s = write_one_transaction(batch, 0, batch.size(), &out.evicted);
  if (s.is_ok()) {
    out.resolved = out.written = batch.size();
    out.transactions = 1;
  } else if (is_transient(s)) {
    out.errors = 1;
    out.last_error = s;
  } else {
    // Something in the batch is refused for good (SQLite says it is not a passing
    // condition): write one letter per transaction so only the bad one is dropped.
    out.errors = 1;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Status one = write_one_transaction(batch, i, i + 1, &out.evicted);
      if (!one.is_ok()) {
        ++out.errors;
        out.last_error = one;
        if (is_transient(one)) break;
        log_->error("dead-letter store {}: task {} of pool {} dropped: {}", path_, batch[i].task.id,
                    batch[i].pool, one.to_string());
        ++out.dropped;
      } else {
        ++out.written;
        ++out.transactions;
      }
      out.resolved = i + 1;
    }
  }
  batch.erase(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(out.resolved));
  return out;
}

Status DeadLetterStore::write_one_transaction(const std::vector<DeadLetter>& batch,
                                              std::size_t begin, std::size_t end,
                                              std::uint64_t* evicted) {
  SP_RETURN_IF_ERROR(writer_db_.exec("BEGIN IMMEDIATE", "dead-letter write: begin"));
  Status s;
  for (std::size_t i = begin; i < end && s.is_ok(); ++i) s = insert_letter(batch[i]);
  std::uint64_t evicted_here = 0;
  if (s.is_ok()) s = apply_retention(&evicted_here);
  if (s.is_ok()) s = writer_db_.exec("COMMIT", "dead-letter write: commit");
  if (!s.is_ok()) {
    (void)writer_db_.exec("ROLLBACK", "dead-letter write: rollback");
    return s;
  }
  *evicted += evicted_here;
  return Status::ok();
}

Status DeadLetterStore::insert_letter(const DeadLetter& l) {
  auto stmt = writer_db_.prepare(kInsertLetter, "insert dead letter");
  if (!stmt) return stmt.status();
  {
    StmtRef s(*stmt);
    s->bind(1, static_cast<std::int64_t>(l.task.id));
    s->bind_text(2, l.pool);
    s->bind_text(3, l.task.type);
    s->bind_text(4, to_string(l.task.reason));
    s->bind_text(5, l.task.error);
    s->bind_blob(6, l.payload);
    if (l.options.timeout) s->bind(7, l.options.timeout->count());
    if (l.options.retries) s->bind(8, *l.options.retries);
    s->bind(9, l.options.priority);
    s->bind_text(10, l.options.key);
    s->bind(11, l.dead_lettered_ms);
    SP_RETURN_IF_ERROR(run(writer_db_, **stmt, "insert dead letter"));
  }
  const std::int64_t letter_id = writer_db_.last_insert_rowid();
  auto att = writer_db_.prepare(kInsertAttempt, "insert attempt");
  if (!att) return att.status();
  for (std::size_t seq = 0; seq < l.task.history.size(); ++seq) {
    const Attempt& a = l.task.history[seq];
    StmtRef s(*att);
    s->bind(1, letter_id);
    s->bind(2, static_cast<std::int64_t>(seq));
    s->bind(3, a.number);
    s->bind_text(4, to_string(a.outcome));
    s->bind_text(5, a.error);
    s->bind(6, a.worker_pid);
    s->bind(7, a.started_ms);
    s->bind(8, a.ended_ms);
    s->bind_text(9, a.backtrace);
    SP_RETURN_IF_ERROR(run(writer_db_, **att, "insert attempt"));
  }
  return Status::ok();
}

Status DeadLetterStore::apply_retention(std::uint64_t* evicted) {
  if (opts_.max_age.count() > 0) {
    auto stmt = writer_db_.prepare(kDeleteOlder, "retention by age");
    if (!stmt) return stmt.status();
    StmtRef s(*stmt);
    s->bind(1, now_ms() - opts_.max_age.count());
    SP_RETURN_IF_ERROR(run(writer_db_, **stmt, "retention by age"));
    *evicted += static_cast<std::uint64_t>(writer_db_.changes());
  }
  if (opts_.max_count > 0) {
    auto stmt = writer_db_.prepare(kDeleteBeyondCount, "retention by count");
    if (!stmt) return stmt.status();
    StmtRef s(*stmt);
    s->bind(1, static_cast<std::int64_t>(opts_.max_count));
    SP_RETURN_IF_ERROR(run(writer_db_, **stmt, "retention by count"));
    *evicted += static_cast<std::uint64_t>(writer_db_.changes());
  }
  return Status::ok();
}

Result<DeadLetter> DeadLetterStore::read_letter(SqliteStmt& row) {
  DeadLetter l;
  l.letter_id = static_cast<std::uint64_t>(row.int64(0));
  l.task.id = static_cast<std::uint64_t>(row.int64(1));
  l.task.state = TaskState::kDeadLettered;
  l.pool = row.text(2);
  l.task.type = row.text(3);
  const std::string reason = row.text(4);
  const auto parsed = parse_enum(reason, DeadReason::kPoolRemoved);
  if (!parsed) {
    return Status::error(Code::kInternal, "dead letter " + std::to_string(l.letter_id) +
                                              ": unknown reason '" + reason + "'");
  }
  l.task.reason = *parsed;
  l.task.error = row.text(5);
  l.payload = row.blob(6);
  if (!row.is_null(7)) l.options.timeout = std::chrono::milliseconds(row.int64(7));
  if (!row.is_null(8)) l.options.retries = static_cast<std::uint32_t>(row.int64(8));
  l.options.priority = static_cast<std::int32_t>(row.int64(9));
  l.options.key = row.text(10);
  l.dead_lettered_ms = row.int64(11);

  auto stmt = query_db_.prepare(kAttempts, "read attempts");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, static_cast<std::int64_t>(l.letter_id));
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) {
    Attempt a;
    a.number = static_cast<std::uint32_t>(s->int64(0));
    const std::string outcome = s->text(1);
    const auto o = parse_enum(outcome, Outcome::kCancelled);
    if (!o) {
      return Status::error(Code::kInternal, "dead letter " + std::to_string(l.letter_id) +
                                                ": unknown outcome '" + outcome + "'");
    }
    a.outcome = *o;
    a.error = s->text(2);
    a.worker_pid = static_cast<std::int32_t>(s->int64(3));
    a.started_ms = s->int64(4);
    a.ended_ms = s->int64(5);
    a.backtrace = s->text(6);
    l.task.history.push_back(std::move(a));
  }
  if (rc != SQLITE_DONE) return query_db_.error(rc, "read attempts");
  return l;
}

Result<DeadLetterList> DeadLetterStore::list(const DeadLetterFilter& filter,
                                             const DeadLetterPage& page) {
  if (page.limit == 0) return Status::invalid("dead-letter list: page limit must be at least 1");
  std::lock_guard lk(query_mu_);
  auto stmt = query_db_.prepare(kList, "list dead letters");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  bind_filter(**stmt, filter);
  if (page.after) {
    s->bind(7, page.after->dead_lettered_ms);
    s->bind(8, static_cast<std::int64_t>(page.after->letter_id));
  }
  // One row more than asked tells whether another page follows.
  s->bind(9, static_cast<std::int64_t>(std::min<std::size_t>(page.limit, INT32_MAX) + 1));
  DeadLetterList out;
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) {
    if (out.letters.size() == page.limit) {
      const DeadLetter& last = out.letters.back();
      out.next = DeadLetterCursor{last.dead_lettered_ms, last.letter_id};
      return out;
    }
    auto letter = read_letter(**stmt);
    if (!letter) return letter.status();
    out.letters.push_back(std::move(letter).value());
  }
  if (rc != SQLITE_DONE) return query_db_.error(rc, "list dead letters");
  return out;
}

Result<DeadLetter> DeadLetterStore::get(std::uint64_t letter_id) {
  std::lock_guard lk(query_mu_);
  auto stmt = query_db_.prepare(kGet, "get dead letter");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, static_cast<std::int64_t>(letter_id));
  const int rc = s->step();
  if (rc == SQLITE_DONE) {
    return Status::error(Code::kNotFound, "no dead letter " + std::to_string(letter_id));
  }
  if (rc != SQLITE_ROW) return query_db_.error(rc, "get dead letter");
  return read_letter(**stmt);
}

Result<std::uint64_t> DeadLetterStore::purge(std::uint64_t letter_id) {
  std::lock_guard lk(query_mu_);
  auto stmt = query_db_.prepare(kDeleteId, "purge dead letter");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, static_cast<std::int64_t>(letter_id));
  SP_RETURN_IF_ERROR(run(query_db_, **stmt, "purge dead letter"));
  return static_cast<std::uint64_t>(query_db_.changes());
}

Result<std::uint64_t> DeadLetterStore::purge(const DeadLetterFilter& filter) {
  std::lock_guard lk(query_mu_);
  auto stmt = query_db_.prepare(kDeleteFilter, "purge dead letters");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  bind_filter(**stmt, filter);
  SP_RETURN_IF_ERROR(run(query_db_, **stmt, "purge dead letters"));
  return static_cast<std::uint64_t>(query_db_.changes());
}

Result<std::uint64_t> DeadLetterStore::purge_older_than(std::int64_t dead_lettered_before_ms) {
  DeadLetterFilter f;
  f.until_ms = dead_lettered_before_ms;
  return purge(f);
}

Status DeadLetterStore::remove_replayed(std::uint64_t letter_id) {
  auto n = purge(letter_id);
  if (!n) return n.status().with_context("remove replayed dead letter");
  if (*n == 0) {
    return Status::error(Code::kNotFound, "dead letter " + std::to_string(letter_id) +
                                              " is already gone (purged or replayed)");
  }
  return Status::ok();
}

}  // namespace sandpool
