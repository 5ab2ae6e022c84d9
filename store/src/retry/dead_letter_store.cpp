#include <sandpool/store/dead_letters.hpp>

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <spdlog/spdlog.h>
#include <algorithm>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/base/thread_name.hpp>
#include <sandpool/base/unique_fd.hpp>

#include <sandpool/store/sqlite_db.hpp>
#include <sandpool/store/task_journal.hpp>
#include <sandpool/task/enum_names.hpp>
#include "retry/dead_letter_rows.hpp"
#include "retry/dead_letter_schema.hpp"
#include "retry/dead_letter_store_impl.hpp"
#include "retry/task_journal_impl.hpp"

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
  " affinity_key, dead_lettered_ms, tenant"

constexpr const char* kList = "SELECT " SP_DL_COLUMNS " FROM dead_letters WHERE " SP_DL_WHERE
                              " AND (?7 IS NULL OR (dead_lettered_ms, letter_id) > (?7, ?8))"
                              " ORDER BY dead_lettered_ms, letter_id LIMIT ?9";
constexpr const char* kGet = "SELECT " SP_DL_COLUMNS " FROM dead_letters WHERE letter_id = ?1";
constexpr const char* kLetterAttempts =
    "SELECT " SP_ATTEMPT_COLUMNS " FROM attempts WHERE letter_id = ?1 ORDER BY seq";
constexpr const char* kDeleteId = "DELETE FROM dead_letters WHERE letter_id = ?1";
// One chunk of a purge: its own short transaction, so the writer's commits (accepted tasks
// waiting for their answer) go between the chunks instead of behind one long delete.
constexpr std::int64_t kPurgeChunk = 256;
constexpr const char* kDeleteFilter =
    "DELETE FROM dead_letters WHERE letter_id IN (SELECT letter_id FROM dead_letters "
    "WHERE " SP_DL_WHERE " LIMIT ?7)";

std::int64_t system_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
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
Status configure(SqliteDb& db, StoreSync sync) {
  return db.exec(sync == StoreSync::kFull ? "PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL"
                                          : "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL",
                 "configure connection");
}

// A new database's page size (an existing one keeps its own): the journal appends bodies of
// hundreds of KiB, and every page of one is a WAL frame of its own, so 16 KiB pages cut the
// writer's and the checkpointer's work per task by a tenth or more (docs/performance.md)
// where 64 KiB ones would slow the small commits of sync: full.
Status set_page_size(SqliteDb& db) { return db.exec("PRAGMA page_size = 16384", "set page_size"); }

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

Result<std::unique_ptr<DeadLetterStoreImpl>> DeadLetterStoreImpl::open(
    DeadLetterStoreOptions options) {
  if (options.state_dir.empty()) return Status::invalid("dead-letter store: empty state_dir");
  if (options.max_batch == 0) options.max_batch = 1;
  const std::string path = options.state_dir + "/dead_letters.db";
  const auto ctx = "dead-letter store " + path;
  SP_RETURN_IF_ERROR(ensure_dir(options.state_dir).with_context(ctx));
  SP_RETURN_IF_ERROR(ensure_file(path).with_context(ctx));
  const int busy_ms = static_cast<int>(options.busy_timeout.count());
  auto writer = SqliteDb::open(path, busy_ms);
  if (!writer) return writer.status();
  SP_RETURN_IF_ERROR(set_page_size(*writer).with_context(ctx));
  SP_RETURN_IF_ERROR(enable_wal(*writer).with_context(ctx));
  SP_RETURN_IF_ERROR(configure(*writer, options.sync).with_context(ctx));
  SP_RETURN_IF_ERROR(dead_letter_schema::migrate(*writer, path));
  auto query = SqliteDb::open(path, busy_ms);
  if (!query) return query.status();
  SP_RETURN_IF_ERROR(configure(*query, options.sync).with_context(ctx));
  std::unique_ptr<DeadLetterStoreImpl> store(new DeadLetterStoreImpl(
      std::move(options), path, std::make_unique<SqliteDb>(std::move(writer).value()),
      std::make_unique<SqliteDb>(std::move(query).value())));
  if (store->opts_.journal) {
    auto journal = TaskJournalImpl::open(*store, *store->opts_.journal);
    if (!journal) return journal.status().with_context(ctx);
    store->journal_ = journal->get();
    store->journal_owner_ = std::make_unique<TaskJournal>(std::move(journal).value());
  }
  store->start_writer();
  return store;
}

Result<SqliteDb> DeadLetterStoreImpl::open_connection(const std::string& path,
                                                      const DeadLetterStoreOptions& o) {
  auto db = SqliteDb::open(path, static_cast<int>(o.busy_timeout.count()));
  if (!db) return db.status();
  SP_RETURN_IF_ERROR(configure(*db, o.sync).with_context(path));
  return db;
}

DeadLetterStoreImpl::DeadLetterStoreImpl(DeadLetterStoreOptions options, std::string path,
                                         std::unique_ptr<SqliteDb> writer_db,
                                         std::unique_ptr<SqliteDb> query_db)
    : opts_(std::move(options)),
      path_(std::move(path)),
      log_(opts_.logger ? opts_.logger : spdlog::default_logger()),
      writer_owner_(std::move(writer_db)),
      query_owner_(std::move(query_db)),
      writer_db_(*writer_owner_),
      query_db_(*query_owner_) {}

void DeadLetterStoreImpl::start_writer() {
  writer_ = std::thread([this] { run_writer(); });
  name_thread(writer_.native_handle(), "sp-dlq");
}

DeadLetterStoreImpl::~DeadLetterStoreImpl() { (void)close(); }

std::int64_t DeadLetterStoreImpl::now_ms() const {
  return opts_.now_ms ? opts_.now_ms() : system_now_ms();
}

Status DeadLetterStoreImpl::enqueue(DeadLetter letter, LetterWritten on_written) {
  return enqueue_letter(std::move(letter), std::move(on_written), false);
}

Status DeadLetterStoreImpl::enqueue_letter(DeadLetter letter, LetterWritten on_written,
                                           bool journaled) {
  if (letter.dead_lettered_ms == 0) letter.dead_lettered_ms = now_ms();
  PendingLetter p{std::move(letter), std::move(on_written), std::chrono::steady_clock::now(), 0,
                  journaled};
  {
    MutexLock lk(mu_);
    if (!spill_on_enqueue_) {
      p.seq = next_seq_++;
      pending_.push_back(std::move(p));
      work_cv_.notify_one();
      return Status::ok();
    }
  }
  // Closed: the letter goes to a spill file of its own, now.
  std::vector<PendingLetter> one;
  one.push_back(std::move(p));
  auto deliveries = spill_or_lose(std::move(one), "enqueued after the store closed");
  const std::string lost = deliveries.front().receipt.lost;
  deliver(deliveries);
  if (!lost.empty()) return Status::error(Code::kSystem, "dead letter lost: " + lost);
  return Status::ok();
}

void DeadLetterStoreImpl::hold(const std::vector<PendingLetter>& letters) {
  held_ = letters.size();
  if (!letters.empty()) {
    held_seq_ = letters.front().seq;
    held_since_ = letters.front().since;
  }
}

std::uint64_t DeadLetterStoreImpl::oldest_unresolved() const {
  if (held_ > 0) return held_seq_;
  return pending_.empty() ? next_seq_ : pending_.front().seq;
}

Status DeadLetterStoreImpl::flush(std::chrono::milliseconds timeout) {
  MutexLock lk(mu_);
  const std::uint64_t target = next_seq_;
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (oldest_unresolved() < target && !writer_done_ &&
         done_cv_.wait_until(mu_, until) == std::cv_status::no_timeout) {
  }
  if (oldest_unresolved() >= target) return Status::ok();
  if (writer_done_) return Status::error(Code::kClosed, "dead-letter store closed before flush");
  return Status::error(Code::kTimeout,
                       "dead-letter store: letters still unwritten after flush timeout (" +
                           std::to_string(pending_.size() + held_) + " pending)");
}

Status DeadLetterStoreImpl::close() {
  MutexLock close_lk(close_mu_);
  if (closed_) return close_status_;
  closed_ = true;
  if (!writer_.joinable()) return close_status_;  // open() failed before the writer started
  {
    MutexLock lk(mu_);
    closing_ = true;
    work_cv_.notify_all();
    const auto until = std::chrono::steady_clock::now() + opts_.close_timeout;
    while (!writer_done_ && done_cv_.wait_until(mu_, until) == std::cv_status::no_timeout) {
    }
    if (!writer_done_) {
      abort_ = true;  // the writer stops after its current attempt
      work_cv_.notify_all();
    }
  }
  writer_.join();
  writer_db_ = SqliteDb();
  if (journal_) journal_->abandon("the store closed before it was written");
  std::vector<PendingLetter> left;
  std::string last_error;
  {
    MutexLock lk(mu_);
    spill_on_enqueue_ = true;  // from now on enqueue() spills by itself
    left.assign(std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.end()));
    pending_.clear();
    hold(left);
    last_error = stats_.last_write_error;
  }
  if (left.empty()) return close_status_;
  const std::size_t n = left.size();
  auto deliveries = spill_or_lose(
      std::move(left), "still unwritten " + std::to_string(opts_.close_timeout.count()) +
                           " ms after close began (last write error: " + last_error + ")");
  const LetterReceipt& r = deliveries.front().receipt;
  if (!r.spill_file.empty()) {
    close_status_ = Status::error(Code::kTimeout,
                                  "dead-letter store: " + std::to_string(n) +
                                      " letters could not be written before close; spilled to " +
                                      r.spill_file + " (load it with `poolctl dlq import`)");
  } else {
    close_status_ = Status::error(
        Code::kSystem, "dead-letter store: " + std::to_string(n) + " letters lost: " + r.lost);
  }
  deliver(deliveries);
  {
    MutexLock lk(mu_);
    held_ = 0;
  }
  done_cv_.notify_all();
  return close_status_;
}

DeadLetterStoreStats DeadLetterStoreImpl::stats() const {
  MutexLock lk(mu_);
  DeadLetterStoreStats s = stats_;
  s.pending = pending_.size() + held_;
  std::optional<std::chrono::steady_clock::time_point> oldest;
  if (held_ > 0) {
    oldest = held_since_;
  } else if (!pending_.empty()) {
    oldest = pending_.front().since;
  }
  if (oldest) {
    s.oldest_pending_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - *oldest)
                              .count();
  }
  return s;
}

bool DeadLetterStoreImpl::journal_holds(std::uint64_t task_id) const {
  if (!journal_) return false;
  auto t = journal_->find(task_id);
  if (!t) return false;  // never journaled, or evicted by retention
  return !(t->task.state == TaskState::kDeadLettered && t->letter_id == 0);
}

Result<DeadLetterImport> DeadLetterStoreImpl::import_letters(
    const std::vector<DeadLetter>& letters) {
  MutexLock lk(query_mu_);
  SP_RETURN_IF_ERROR(query_db_.exec("BEGIN IMMEDIATE", "dead-letter import: begin"));
  DeadLetterImport out;
  Status s;
  for (const DeadLetter& l : letters) {
    if (journal_holds(l.task.id)) {
      ++out.journaled;
      continue;
    }
    auto present = dead_letter_rows::exists(query_db_, l);
    if (!present) {
      s = present.status();
      break;
    }
    if (*present) {
      ++out.already_present;
      continue;
    }
    auto id = dead_letter_rows::insert(query_db_, l);
    if (!id) {
      s = id.status().with_context("task " + std::to_string(l.task.id) + " of pool " + l.pool);
      break;
    }
    ++out.imported;
  }
  if (s) s = query_db_.exec("COMMIT", "dead-letter import: commit");
  if (!s) {
    (void)query_db_.exec("ROLLBACK", "dead-letter import: rollback");
    return s.with_context("import dead letters (nothing imported)");
  }
  return out;
}

Result<DeadLetter> DeadLetterStoreImpl::read_letter(SqliteStmt& row) {
  DeadLetter l;
  l.letter_id = static_cast<std::uint64_t>(row.int64(0));
  l.task.id = static_cast<std::uint64_t>(row.int64(1));
  l.task.state = TaskState::kDeadLettered;
  l.pool = row.text(2);
  l.task.type = row.text(3);
  const std::string reason = row.text(4);
  const auto parsed = parse_enum(reason, DeadReason::kRejected);
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
  l.options.tenant = row.text(12);
  l.task.tenant = l.options.tenant;

  auto stmt = query_db_.prepare(kLetterAttempts, "read attempts");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, static_cast<std::int64_t>(l.letter_id));
  SP_RETURN_IF_ERROR(dead_letter_rows::read_attempts(query_db_, **stmt,
                                                     "dead letter " + std::to_string(l.letter_id),
                                                     "read attempts", &l.task.history));
  return l;
}

Result<DeadLetterList> DeadLetterStoreImpl::list(const DeadLetterFilter& filter,
                                                 const DeadLetterPage& page) {
  if (page.limit == 0) return Status::invalid("dead-letter list: page limit must be at least 1");
  MutexLock lk(query_mu_);
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

Result<DeadLetter> DeadLetterStoreImpl::get(std::uint64_t letter_id) {
  MutexLock lk(query_mu_);
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

Result<std::uint64_t> DeadLetterStoreImpl::purge(std::uint64_t letter_id) {
  MutexLock lk(query_mu_);
  auto stmt = query_db_.prepare(kDeleteId, "purge dead letter");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, static_cast<std::int64_t>(letter_id));
  SP_RETURN_IF_ERROR(run(query_db_, **stmt, "purge dead letter"));
  return static_cast<std::uint64_t>(query_db_.changes());
}

Result<std::uint64_t> DeadLetterStoreImpl::purge(const DeadLetterFilter& filter) {
  MutexLock lk(query_mu_);
  auto stmt = query_db_.prepare(kDeleteFilter, "purge dead letters");
  if (!stmt) return stmt.status();
  std::uint64_t purged = 0;
  for (;;) {
    StmtRef s(*stmt);
    bind_filter(**stmt, filter);
    s->bind(7, kPurgeChunk);
    SP_RETURN_IF_ERROR(run(query_db_, **stmt, "purge dead letters"));
    const auto n = static_cast<std::uint64_t>(query_db_.changes());
    purged += n;
    if (n < static_cast<std::uint64_t>(kPurgeChunk)) return purged;
  }
}

Result<std::uint64_t> DeadLetterStoreImpl::purge_older_than(std::int64_t dead_lettered_before_ms) {
  DeadLetterFilter f;
  f.until_ms = dead_lettered_before_ms;
  return purge(f);
}

Status DeadLetterStoreImpl::remove_replayed(std::uint64_t letter_id) {
  auto n = purge(letter_id);
  if (!n) return n.status().with_context("remove replayed dead letter");
  if (*n == 0) {
    return Status::error(Code::kNotFound, "dead letter " + std::to_string(letter_id) +
                                              " is already gone (purged or replayed)");
  }
  return Status::ok();
}

Result<std::unique_ptr<DeadLetterStore>> DeadLetterStore::open(DeadLetterStoreOptions options) {
  auto impl = DeadLetterStoreImpl::open(std::move(options));
  if (!impl) return impl.status();
  return std::make_unique<DeadLetterStore>(std::move(impl).value());
}

DeadLetterStore::DeadLetterStore(std::unique_ptr<DeadLetterStoreImpl> impl)
    : impl_(std::move(impl)) {}
DeadLetterStore::~DeadLetterStore() = default;

Status DeadLetterStore::enqueue(DeadLetter letter, LetterWritten on_written) {
  return impl_->enqueue(std::move(letter), std::move(on_written));
}
Status DeadLetterStore::flush(std::chrono::milliseconds timeout) { return impl_->flush(timeout); }
Status DeadLetterStore::close() { return impl_->close(); }
Result<DeadLetterImport> DeadLetterStore::import_letters(const std::vector<DeadLetter>& letters) {
  return impl_->import_letters(letters);
}
Result<DeadLetterList> DeadLetterStore::list(const DeadLetterFilter& filter,
                                             const DeadLetterPage& page) {
  return impl_->list(filter, page);
}
Result<DeadLetter> DeadLetterStore::get(std::uint64_t letter_id) { return impl_->get(letter_id); }
Result<std::uint64_t> DeadLetterStore::purge(std::uint64_t letter_id) {
  return impl_->purge(letter_id);
}
Result<std::uint64_t> DeadLetterStore::purge(const DeadLetterFilter& filter) {
  return impl_->purge(filter);
}
Result<std::uint64_t> DeadLetterStore::purge_older_than(std::int64_t dead_lettered_before_ms) {
  return impl_->purge_older_than(dead_lettered_before_ms);
}
Status DeadLetterStore::remove_replayed(std::uint64_t letter_id) {
  return impl_->remove_replayed(letter_id);
}
Result<DeadLetter> DeadLetterStore::claim(std::uint64_t letter_id) {
  return impl_->claim(letter_id);
}
Status DeadLetterStore::restore(const DeadLetter& letter) { return impl_->restore(letter); }
DeadLetterStoreStats DeadLetterStore::stats() const { return impl_->stats(); }
TaskJournal* DeadLetterStore::journal() const { return impl_->journal(); }
const std::string& DeadLetterStore::path() const { return impl_->path(); }

}  // namespace sandpool
