// TaskJournal's retention: finished tasks beyond the count, age or byte bound are deleted,
// oldest first, in chunks of retention_chunk tasks, each its own short transaction on the
// writer thread, so journal writes and letters go between them (docs/journal.md).
#include <sqlite3.h>

#include <spdlog/spdlog.h>

#include <sandpool/task_journal.hpp>

#include "retry/sqlite_db.hpp"

namespace sandpool {
namespace {

using sqlite::SqliteDb;
using sqlite::StmtRef;

constexpr const char* kTotals =
    "SELECT count(*), coalesce(sum(kept_bytes), 0) FROM tasks WHERE finished_ms IS NOT NULL";
constexpr const char* kOldest =
    "SELECT id, finished_ms, kept_bytes FROM tasks WHERE finished_ms IS NOT NULL"
    " ORDER BY finished_ms, id LIMIT ?1";
constexpr const char* kDelete = "DELETE FROM tasks WHERE id = ?1";

struct Victim {
  std::int64_t id = 0;
  std::uint64_t bytes = 0;
};

}  // namespace

Status TaskJournal::load_totals() {
  std::lock_guard qlk(query_mu_);
  SqliteDb& db = *query_owner_;
  auto stmt = db.prepare(kTotals, "journal: finished totals");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  const int rc = s->step();
  if (rc != SQLITE_ROW) return db.error(rc, "journal: finished totals");
  std::lock_guard lk(store_.mu_);
  stats_.finished_kept = static_cast<std::uint64_t>(s->int64(0));
  stats_.finished_bytes = static_cast<std::uint64_t>(s->int64(1));
  return Status::ok();
}

bool TaskJournal::upkeep_due_locked(std::chrono::steady_clock::time_point now) const {
  if (now < retention_paused_until_) return false;
  if (opts_.max_finished > 0 && stats_.finished_kept > opts_.max_finished) return true;
  if (opts_.max_finished_bytes > 0 && stats_.finished_bytes > opts_.max_finished_bytes) {
    return true;
  }
  return opts_.max_finished_age.count() > 0 && now >= next_age_check_;
}

void TaskJournal::run_retention_chunk(SqliteDb& db) {
  std::uint64_t count = 0, bytes = 0;
  {
    std::lock_guard lk(store_.mu_);
    count = stats_.finished_kept;
    bytes = stats_.finished_bytes;
  }
  const std::int64_t cutoff = opts_.max_finished_age.count() > 0
                                  ? store_.now_ms() - opts_.max_finished_age.count()
                                  : INT64_MIN;
  std::vector<Victim> victims;
  Status s = db.exec("BEGIN IMMEDIATE", "journal retention: begin");
  if (s) {
    auto stmt = db.prepare(kOldest, "journal retention: oldest");
    if (!stmt) {
      s = stmt.status();
    } else {
      StmtRef q(*stmt);
      q->bind(1, static_cast<std::int64_t>(opts_.retention_chunk));
      int rc;
      while ((rc = q->step()) == SQLITE_ROW) {
        const auto kept = static_cast<std::uint64_t>(q->int64(2));
        const bool over_count = opts_.max_finished > 0 && count > opts_.max_finished;
        const bool over_bytes = opts_.max_finished_bytes > 0 && bytes > opts_.max_finished_bytes;
        if (!over_count && !over_bytes && q->int64(1) >= cutoff) break;
        victims.push_back({q->int64(0), kept});
        --count;
        bytes -= std::min(bytes, kept);
      }
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) s = db.error(rc, "journal retention: oldest");
    }
  }
  for (std::size_t i = 0; i < victims.size() && s; ++i) {
    auto del = db.prepare(kDelete, "journal retention: delete");
    if (!del) {
      s = del.status();
      break;
    }
    StmtRef d(*del);
    d->bind(1, victims[i].id);
    const int rc = d->step();
    if (rc != SQLITE_DONE) s = db.error(rc, "journal retention: delete");
  }
  if (s) s = db.exec("COMMIT", "journal retention: commit");
  if (!s) (void)db.exec("ROLLBACK", "journal retention: rollback");
  finish_retention_chunk(s, victims.size(), [&] {
    std::uint64_t b = 0;
    for (const Victim& v : victims) b += v.bytes;
    return b;
  }());
}

void TaskJournal::finish_retention_chunk(const Status& s, std::size_t deleted,
                                         std::uint64_t bytes) {
  const auto now = std::chrono::steady_clock::now();
  bool reload = false;
  {
    std::lock_guard lk(store_.mu_);
    if (!s) {
      stats_.last_error = s.to_string();
      retention_paused_until_ = now + opts_.retention_interval;
    } else {
      ++stats_.retention_chunks;
      stats_.evicted += deleted;
      stats_.finished_kept -= std::min<std::uint64_t>(stats_.finished_kept, deleted);
      stats_.finished_bytes -= std::min(stats_.finished_bytes, bytes);
      // A chunk that found less than it could: the age bound is met until the next check.
      if (deleted < opts_.retention_chunk) next_age_check_ = now + opts_.retention_interval;
      // Nothing to delete although the totals said so (a task finished by hand in the file,
      // say): read them again.
      reload = deleted == 0;
      if (reload) retention_paused_until_ = now + opts_.retention_interval;
    }
  }
  if (!s) {
    log_->warn("task journal {}: retention failed, retried in {} ms: {}", store_.path(),
               opts_.retention_interval.count(), s.to_string());
  }
  if (reload) (void)load_totals();
}

}  // namespace sandpool
