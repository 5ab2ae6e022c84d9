// TaskJournal's writer side: its writes inside the store writer's transaction, what happens
// when that transaction fails, and the callbacks after it (docs/journal.md, "Writes").
#include <sqlite3.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include <sandpool/task_journal.hpp>

#include "retry/sqlite_db.hpp"
#include "retry/task_journal_write.hpp"
#include "retry/write_failure.hpp"

namespace sandpool {
namespace {

using sqlite::SqliteDb;
using sqlite::SqliteStmt;
using sqlite::StmtRef;

// A new row: queued, or already finished when its end is in the same round (then without
// its payload, like kFinish below).
constexpr const char* kInsertTask =
    "INSERT INTO tasks (id, pool, type, payload, timeout_ms, retries, priority, affinity_key,"
    " queue_ttl_ms, fail_fast, idempotency_key, submitted_ms, updated_ms, state, reason, result,"
    " error, finished_ms, kept_bytes)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
    " ?19)";
constexpr const char* kRaiseHighest =
    "UPDATE journal_meta SET value = max(value, ?1) WHERE name = 'highest_task_id'";
constexpr const char* kStart =
    "UPDATE tasks SET state = 'running', running_attempt = ?2, running_pid = ?3,"
    " running_since_ms = ?4, updated_ms = ?5 WHERE id = ?1 AND finished_ms IS NULL";
// A start that never became an attempt: back to queued, its start cleared. Only a running
// row: a task that ended or waits to retry meanwhile keeps what it has.
constexpr const char* kRequeue =
    "UPDATE tasks SET state = 'queued', running_attempt = NULL, running_pid = NULL,"
    " running_since_ms = NULL, updated_ms = ?2 WHERE id = ?1 AND state = 'running'"
    " AND finished_ms IS NULL";
// Records of a task the journal does not hold unfinished (refused, finished, evicted) are
// no-ops, never errors.
constexpr const char* kRecordAttempt =
    "INSERT OR REPLACE INTO task_attempts (task_id, number, outcome, error, worker_pid,"
    " started_ms, ended_ms, backtrace) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8"
    " WHERE EXISTS (SELECT 1 FROM tasks WHERE id = ?1)";
// An attempt of a task whose row this transaction just wrote.
constexpr const char* kInsertAttempt =
    "INSERT OR REPLACE INTO task_attempts (task_id, number, outcome, error, worker_pid,"
    " started_ms, ended_ms, backtrace) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
constexpr const char* kAttemptEnded =
    "UPDATE tasks SET state = ?2, retry_due_ms = ?3, running_attempt = NULL, running_pid = NULL,"
    " running_since_ms = NULL, updated_ms = ?4 WHERE id = ?1 AND finished_ms IS NULL";
// The payload goes once the task finished: lookups need its account, not its input.
constexpr const char* kFinish =
    "UPDATE tasks SET state = ?2, reason = ?3, result = ?4, error = ?5, payload = x'',"
    " retry_due_ms = NULL, running_attempt = NULL, running_pid = NULL, running_since_ms = NULL,"
    " letter_id = ?6, updated_ms = ?7, finished_ms = ?7, kept_bytes = ?8"
    " WHERE id = ?1 AND finished_ms IS NULL";

std::int64_t as_int(std::uint64_t v) { return static_cast<std::int64_t>(v); }

Status step_done(SqliteDb& db, SqliteStmt& s, std::string_view op) {
  const int rc = s.step();
  return rc == SQLITE_DONE ? Status::ok() : db.error(rc, op);
}

// The reason column: a dead letter's or a cancel's reason, else empty.
std::string_view reason_name(const TaskResult& t) {
  if (t.state == TaskState::kDeadLettered) return to_string(t.reason);
  if (t.state == TaskState::kCancelled) return to_string(t.cancel_reason);
  return "";
}

// What an end sets on its row.
struct End {
  const TaskResult& account;
  std::int64_t at_ms;
  std::uint64_t bytes;
};

Status insert_attempt(SqliteDb& db, const char* sql, std::uint64_t task_id, const Attempt& a) {
  auto stmt = db.prepare(sql, "journal: insert attempt");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, as_int(task_id));
  s->bind(2, a.number);
  s->bind_text(3, to_string(a.outcome));
  s->bind_text(4, a.error);
  s->bind(5, a.worker_pid);
  s->bind(6, a.started_ms);
  s->bind(7, a.ended_ms);
  s->bind_text(8, a.backtrace);
  return step_done(db, **stmt, "journal: insert attempt");
}

Status insert_attempts(SqliteDb& db, const TaskResult& t) {
  for (const Attempt& a : t.history)
    SP_RETURN_IF_ERROR(insert_attempt(db, kInsertAttempt, t.id, a));
  return Status::ok();
}

// A task's row: queued, or finished by `end` (with its attempts).
Status insert_task(SqliteDb& db, const JournalTask& t, std::int64_t now_ms, const End* end) {
  auto stmt = db.prepare(kInsertTask, "journal: insert task");
  if (!stmt) return stmt.status();
  {
    StmtRef s(*stmt);
    s->bind(1, as_int(t.task.id));
    s->bind_text(2, t.pool);
    s->bind_text(3, t.task.type);
    s->bind_blob(4, end != nullptr ? std::string_view() : std::string_view(t.payload));
    if (t.options.timeout) s->bind(5, t.options.timeout->count());
    if (t.options.retries) s->bind(6, *t.options.retries);
    s->bind(7, t.options.priority);
    s->bind_text(8, t.options.key);
    if (t.options.queue_ttl) s->bind(9, t.options.queue_ttl->count());
    s->bind(10, t.options.fail_fast ? 1 : 0);
    if (!t.options.idempotency_key.empty()) s->bind_text(11, t.options.idempotency_key);
    s->bind(12, t.submitted_ms != 0 ? t.submitted_ms : now_ms);
    if (end == nullptr) {
      s->bind(13, now_ms);
      s->bind_text(14, to_string(TaskState::kQueued));
      s->bind_text(15, "");
      s->bind_text(17, "");
      s->bind(19, 0);
    } else {
      const TaskResult& a = end->account;
      s->bind(13, end->at_ms);
      s->bind_text(14, to_string(a.state));
      s->bind_text(15, reason_name(a));
      if (a.state == TaskState::kCompleted) s->bind_blob(16, a.result);
      s->bind_text(17, a.error);
      s->bind(18, end->at_ms);
      s->bind(19, as_int(end->bytes));
    }
    SP_RETURN_IF_ERROR(step_done(db, **stmt, "journal: insert task " + std::to_string(t.task.id)));
  }
  return end != nullptr ? insert_attempts(db, end->account) : Status::ok();
}

Status raise_highest(SqliteDb& db, std::uint64_t id) {
  auto high = db.prepare(kRaiseHighest, "journal: highest id");
  if (!high) return high.status();
  StmtRef h(*high);
  h->bind(1, as_int(id));
  return step_done(db, **high, "journal: highest id");
}

Status write_start(SqliteDb& db, std::uint64_t task_id, const Attempt& a, std::int64_t now_ms) {
  auto stmt = db.prepare(kStart, "journal: attempt start");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, as_int(task_id));
  s->bind(2, a.number);
  s->bind(3, a.worker_pid);
  s->bind(4, a.started_ms);
  s->bind(5, now_ms);
  return step_done(db, **stmt, "journal: attempt start");
}

Status write_requeue(SqliteDb& db, std::uint64_t task_id, std::int64_t now_ms) {
  auto stmt = db.prepare(kRequeue, "journal: requeue");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, as_int(task_id));
  s->bind(2, now_ms);
  return step_done(db, **stmt, "journal: requeue");
}

Status write_attempt_end(SqliteDb& db, std::uint64_t task_id, const Attempt& a, TaskState next,
                         std::int64_t due_ms, std::int64_t now_ms) {
  SP_RETURN_IF_ERROR(insert_attempt(db, kRecordAttempt, task_id, a));
  auto stmt = db.prepare(kAttemptEnded, "journal: attempt end");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, as_int(task_id));
  s->bind_text(2, to_string(next));
  if (next == TaskState::kRetryWait) s->bind(3, due_ms);
  s->bind(4, now_ms);
  return step_done(db, **stmt, "journal: attempt end");
}

// Ends the task unless it already ended; sets *applied when it did.
Status write_finish(SqliteDb& db, const TaskResult& t, std::uint64_t letter_id, std::int64_t now_ms,
                    std::uint64_t bytes, bool* applied) {
  auto stmt = db.prepare(kFinish, "journal: finish");
  if (!stmt) return stmt.status();
  {
    StmtRef s(*stmt);
    s->bind(1, as_int(t.id));
    s->bind_text(2, to_string(t.state));
    s->bind_text(3, reason_name(t));
    if (t.state == TaskState::kCompleted) s->bind_blob(4, t.result);
    s->bind_text(5, t.error);
    if (letter_id != 0) s->bind(6, as_int(letter_id));
    s->bind(7, now_ms);
    s->bind(8, as_int(bytes));
    SP_RETURN_IF_ERROR(step_done(db, **stmt, "journal: finish task " + std::to_string(t.id)));
  }
  *applied = db.changes() == 1;
  return *applied ? insert_attempts(db, t) : Status::ok();
}

// "storage: <what SQLite said>", keeping the code (kSystem for a full disk, kTimeout for a
// lock held too long, ...).
Status storage_error(const Status& s) { return Status::error(s.code(), "storage: " + s.message()); }

}  // namespace

// One round's writes often hold several of a task's: its accept, start and end when it ran
// within the round, its start and end when it ran between two rounds. Only the last one
// counts, so the others are left out: an accept whose task ends in the round writes the
// finished row at once, and a start followed by the task's requeue, attempt end or finish is
// not written (the later write clears what it would set).
void TaskJournal::plan_round() {
  RoundPlan& p = *plan_;
  p.accepted.clear();
  p.finished.clear();
  p.later.clear();
  for (std::size_t i = 0; i < taken_.size(); ++i) {
    Write& w = taken_[i];
    w.covered = false;
    w.ends.clear();
    if (w.kind == Write::Kind::kAccept) {
      for (std::size_t k = 0; k < w.tasks.size(); ++k) {
        p.accepted.try_emplace(w.tasks[k].task.id, RoundPlan::At{i, k});
      }
    } else if (w.kind == Write::Kind::kFinish) {
      const auto at = p.accepted.find(w.task_id);
      if (at == p.accepted.end()) continue;
      Write& accept = taken_[at->second.write];
      if (accept.ends.empty()) accept.ends.assign(accept.tasks.size(), 0);
      accept.ends[at->second.task] = i + 1;
      w.covered = true;
      p.finished.insert(w.task_id);
    }
  }
  for (std::size_t i = taken_.size(); i-- > 0;) {
    Write& w = taken_[i];
    if (w.kind == Write::Kind::kAccept) continue;
    const bool ends_in_accept = p.finished.count(w.task_id) > 0;
    if (w.kind == Write::Kind::kStart) {
      w.covered = ends_in_accept || p.later.count(w.task_id) > 0;
    } else {
      w.covered = w.covered || ends_in_accept;
      p.later.insert(w.task_id);
    }
  }
}

Status TaskJournal::write_one(SqliteDb& db, Write& w, bool planned) {
  w.applied = false;
  switch (w.kind) {
    case Write::Kind::kAccept: {
      std::uint64_t highest = 0;
      for (std::size_t k = 0; k < w.tasks.size(); ++k) {
        const JournalTask& t = w.tasks[k];
        highest = std::max(highest, t.task.id);
        const std::size_t end_at = planned && !w.ends.empty() ? w.ends[k] : 0;
        if (end_at == 0) {
          SP_RETURN_IF_ERROR(insert_task(db, t, w.at_ms, nullptr));
          continue;
        }
        Write& f = taken_[end_at - 1];
        f.bytes = kept_bytes(f.final_account);
        const End end{f.final_account, f.at_ms, f.bytes};
        SP_RETURN_IF_ERROR(insert_task(db, t, w.at_ms, &end));
        f.applied = true;
      }
      return raise_highest(db, highest);
    }
    case Write::Kind::kStart:
      return write_start(db, w.task_id, w.attempt, w.at_ms);
    case Write::Kind::kRequeue:
      return write_requeue(db, w.task_id, w.at_ms);
    case Write::Kind::kAttempt:
      return write_attempt_end(db, w.task_id, w.attempt, w.next, w.retry_due_ms, w.at_ms);
    case Write::Kind::kFinish:
      w.bytes = kept_bytes(w.final_account);
      return write_finish(db, w.final_account, 0, w.at_ms, w.bytes, &w.applied);
  }
  return Status::ok();
}

Status TaskJournal::write_taken(SqliteDb& db, int* rc) {
  plan_round();
  for (Write& w : taken_) {
    if (w.covered) continue;  // a finish's `applied` was set by its accept
    Status s = write_one(db, w, true);
    if (!s) {
      *rc = db.errcode();
      return s;
    }
  }
  return Status::ok();
}

Status TaskJournal::write_dead_lettered(SqliteDb& db, const DeadLetter& letter,
                                        std::uint64_t letter_id, FinishedDelta* delta) {
  TaskResult t = letter.task;
  t.state = TaskState::kDeadLettered;
  const std::uint64_t bytes = kept_bytes(t);
  bool applied = false;
  SP_RETURN_IF_ERROR(write_finish(db, t, letter_id, letter.dead_lettered_ms, bytes, &applied));
  if (applied) {
    ++delta->tasks;
    delta->bytes += bytes;
  }
  return Status::ok();
}

void TaskJournal::count_finished(const FinishedDelta& delta) {
  std::lock_guard lk(store_.mu_);
  stats_.finished_kept += delta.tasks;
  stats_.finished_bytes += delta.bytes;
}

// Commits the writes [i, j) of taken_ in a transaction of their own; returns the error and
// sets *rc on failure.
Status TaskJournal::commit_alone(SqliteDb& db, std::size_t i, std::size_t j, int* rc) {
  Status s = db.exec("BEGIN IMMEDIATE", "journal write: begin");
  for (std::size_t k = i; k < j && s; ++k) s = write_one(db, taken_[k], false);
  if (s) s = db.exec("COMMIT", "journal write: commit");
  if (!s) {
    *rc = db.errcode();
    (void)db.exec("ROLLBACK", "journal write: rollback");
  }
  return s;
}

void TaskJournal::resolve(std::size_t i, const Status& s) {
  Write& w = taken_[i];
  if (s) {
    round_->accepted_tasks += w.tasks.size();
    if (w.kind != Write::Kind::kAccept) ++round_->records;
    if (w.applied) {
      ++round_->finished;
      round_->finished_bytes += w.bytes;
    }
  } else if (w.kind == Write::Kind::kAccept) {
    ++round_->refused_batches;
    round_->refused_tasks += w.tasks.size();
  } else {
    log_->error("task journal {}: the database refuses a write for task {}: {}", store_.path(),
                w.task_id, s.to_string());
  }
  if (w.on_committed) deliveries_.push_back({std::move(w.on_committed), s ? s : storage_error(s)});
}

void TaskJournal::round_committed(std::chrono::steady_clock::duration took) {
  for (std::size_t i = 0; i < taken_.size(); ++i) resolve(i, Status::ok());
  taken_.clear();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
  round_->commits = 1;
  round_->commit_us = static_cast<std::uint64_t>(us);
}

void TaskJournal::round_failed(SqliteDb& db, const Status& why, int rc) {
  round_->error = why.to_string();
  const bool condition = classify_write_failure(rc) == WriteFailure::kCondition;
  // Accepts are never kept for a retry: refused when the database cannot take writes now,
  // else each is tried alone, since the fault may be another write's.
  for (std::size_t i = 0; i < taken_.size(); ++i) {
    if (taken_[i].kind != Write::Kind::kAccept) continue;
    int one_rc = SQLITE_OK;
    resolve(i, condition ? why : commit_alone(db, i, i + 1, &one_rc));
  }
  std::vector<Write> records;
  for (Write& w : taken_) {
    if (w.kind != Write::Kind::kAccept) records.push_back(std::move(w));
  }
  taken_ = std::move(records);
  // Records and finishes: kept while the database cannot take them; else together, then one
  // by one, so that only a write refused on its own is dropped.
  if (!condition && !taken_.empty()) {
    int all_rc = SQLITE_OK;
    if (commit_alone(db, 0, taken_.size(), &all_rc)) {
      for (std::size_t i = 0; i < taken_.size(); ++i) resolve(i, Status::ok());
      taken_.clear();
    } else {
      std::size_t i = 0;
      for (; i < taken_.size(); ++i) {
        int one_rc = SQLITE_OK;
        const Status s = commit_alone(db, i, i + 1, &one_rc);
        if (!s && classify_write_failure(one_rc) == WriteFailure::kCondition) break;
        resolve(i, s);
      }
      taken_.erase(taken_.begin(), taken_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  round_->failed = !taken_.empty();
}

void TaskJournal::deliver() {
  RoundResult r = std::exchange(*round_, RoundResult{});
  std::vector<std::pair<JournalCommitted, Status>> calls = std::exchange(deliveries_, {});
  {
    std::lock_guard lk(store_.mu_);
    stats_.tasks_accepted += r.accepted_tasks;
    stats_.batches_refused += r.refused_batches;
    stats_.records_written += r.records;
    stats_.commits += r.commits;
    if (r.commits > 0) {
      stats_.last_commit_us = r.commit_us;
      stats_.max_commit_us = std::max(stats_.max_commit_us, r.commit_us);
      stats_.total_commit_us += r.commit_us;
    }
    stats_.finished_kept += r.finished;
    stats_.finished_bytes += r.finished_bytes;
    if (!r.error.empty()) stats_.last_error = r.error;
    taken_count_ = taken_.size();
    taken_tasks_ = 0;
    if (!taken_.empty()) taken_seq_ = taken_.front().seq;
    if (r.refused_batches > 0) {
      log_->warn("task journal {}: refused {} batches ({} tasks): {}", store_.path(),
                 r.refused_batches, r.refused_tasks, r.error);
    }
    if (r.failed && !stats_.writes_failing) {
      log_->warn(
          "task journal {}: writes failing; {} records wait in memory and are retried until "
          "they are written or the store closes: {}",
          store_.path(), taken_.size(), r.error);
    } else if (!r.failed && stats_.writes_failing) {
      log_->info("task journal {}: writes recovered", store_.path());
    }
    stats_.writes_failing = r.failed;
  }
  for (auto& [cb, status] : calls) {
    try {
      cb(status);
    } catch (const std::exception& e) {
      log_->error("task journal {}: a commit callback threw: {}", store_.path(), e.what());
    }
  }
}

}  // namespace sandpool
