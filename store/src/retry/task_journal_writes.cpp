// TaskJournal's writer side: its records inside the store writer's transaction, appended to
// the round log, what happens when that transaction fails, and the callbacks after it
// (docs/journal.md, "Writes" and "The round log").
#include <sqlite3.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include <sandpool/store/task_journal.hpp>

#include <sandpool/store/sqlite_db.hpp>
#include "retry/journal_state.hpp"
#include "retry/task_journal_write.hpp"
#include "retry/write_failure.hpp"

namespace sandpool {
namespace {

using sqlite::SqliteDb;
using sqlite::StmtRef;

// A body past this size is closed and the transaction's records go on in the next round, so
// that no row nears SQLite's length limit (1e9 bytes).
constexpr std::size_t kMaxBody = std::size_t{32} << 20;

// "storage: <what SQLite said>", keeping the code (kSystem for a full disk, kTimeout for a
// lock held too long, ...).
Status storage_error(const Status& s) { return Status::error(s.code(), "storage: " + s.message()); }

// A task's end as a whole-task record: what the journal keeps of a finished task (its
// account and options, not its payload). Built in place (`t` is new): a JournalTask is over
// 500 bytes, and a task's end is moved twice more before it is done (into the state, and
// destroyed with the transaction's).
void ended_into(JournalTask& t, const OpenMeta& meta, const TaskResult& account, std::int64_t at_ms,
                std::uint64_t letter_id) {
  t.task = account;
  t.task.dead_letter_pending = false;
  if (t.task.type.empty()) t.task.type = *meta.type;
  if (t.task.state != TaskState::kCompleted) t.task.result.clear();
  if (t.task.state != TaskState::kDeadLettered) t.task.reason = DeadReason::kNone;
  if (t.task.state != TaskState::kCancelled) t.task.cancel_reason = CancelReason::kNone;
  t.pool = *meta.pool;
  meta.options_into(t.options);
  t.submitted_ms = meta.submitted_ms;
  t.finished_ms = at_ms;
  t.letter_id = letter_id;
}

// Whether the batch's ids rise strictly, from above `highest`: then none is journaled or
// repeated, with no lookup (poold's ids rise).
bool ids_rise_above(const std::vector<JournalTask>& tasks, std::uint64_t highest) {
  for (const JournalTask& t : tasks) {
    if (t.task.id <= highest) return false;
    highest = t.task.id;
  }
  return true;
}

// Whether no id of the batch is in the state, in the transaction, or twice in the batch.
template <typename Accepted, typename Ended>
bool ids_unseen(const std::vector<JournalTask>& tasks, const JournalState& st,
                const Accepted& accepted, const Ended& ended) {
  std::unordered_set<std::uint64_t> batch;
  for (const JournalTask& t : tasks) {
    const std::uint64_t id = t.task.id;
    if (st.holds(id) || accepted.count(id) > 0 || ended.count(id) > 0 || !batch.insert(id).second) {
      return false;
    }
  }
  return true;
}

// Deletes a reopened task's letter inside the open transaction; returns whether it was
// there (false: purged, or replayed already).
Result<bool> delete_letter(SqliteDb& db, std::uint64_t letter_id) {
  auto stmt = db.prepare("DELETE FROM dead_letters WHERE letter_id = ?1", "journal: reopen");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, static_cast<std::int64_t>(letter_id));
  SP_RETURN_IF_ERROR(db.step_done(**stmt, "journal: reopen: delete letter"));
  return db.changes() > 0;
}

// Whether a letter is in the store (inside the open transaction).
Result<bool> letter_exists(SqliteDb& db, std::uint64_t letter_id) {
  auto stmt = db.prepare("SELECT 1 FROM dead_letters WHERE letter_id = ?1", "journal: reopen");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, static_cast<std::int64_t>(letter_id));
  const int rc = s->step();
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Status::error(Code::kInternal,
                       std::string("journal: reopen: find letter: ") + sqlite3_errmsg(db.handle()));
}

// An accept writes the task as submitted: queued, with no history.
void as_accepted(JournalTask& t, std::int64_t now_ms) {
  if (t.submitted_ms == 0) t.submitted_ms = now_ms;
  t.task.state = TaskState::kQueued;
  t.task.reason = DeadReason::kNone;
  t.task.cancel_reason = CancelReason::kNone;
  t.task.result.clear();
  t.task.error.clear();
  t.task.history.clear();
  t.running.reset();
  t.retry_due_ms = 0;
  t.finished_ms = 0;
  t.letter_id = 0;
}

// What a task's end is written from (write_end_whole): a task accepted in this transaction.
OpenMeta meta_of(const JournalTask& t) {
  OpenMeta m;
  m.pool = &t.pool;
  m.type = &t.task.type;
  m.options = &t.options;
  m.idempotency_key = &t.options.idempotency_key;
  m.not_before = t.options.not_before;
  m.submitted_ms = t.submitted_ms;
  return m;
}

}  // namespace

// One round's writes often hold several of a task's: its accept, start and end when it ran
// within the round, its start and end when it ran between two rounds. Only the last one
// counts, so the others are left out: an accept whose task ends in the round writes the
// finished row at once, and a start followed by the task's requeue, attempt end or finish is
// not written (the later write clears what it would set).
void TaskJournalImpl::plan_round() {
  RoundPlan& p = *plan_;
  p.accepted.clear();
  p.finished.clear();
  p.later.clear();
  for (std::size_t i = 0; i < taken_.size(); ++i) {
    Write& w = *taken_[i];
    w.covered = false;
    if (w.kind == Write::Kind::kAccept) {
      w.accept->ends.clear();
      for (std::size_t k = 0; k < w.accept->tasks.size(); ++k) {
        p.accepted.try_emplace(w.accept->tasks[k].task.id, RoundPlan::At{i, k});
      }
    } else if (w.kind == Write::Kind::kFinish) {
      const RoundPlan::At* at = p.accepted.find(w.task_id);
      if (at == nullptr) continue;
      Write::Accept& accept = *taken_[at->write]->accept;
      if (accept.ends.empty()) accept.ends.assign(accept.tasks.size(), 0);
      accept.ends[at->task] = i + 1;
      w.covered = true;
      p.finished.insert(w.task_id);
    }
  }
  for (std::size_t i = taken_.size(); i-- > 0;) {
    Write& w = *taken_[i];
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

std::optional<OpenMeta> TaskJournalImpl::Tx::open_task(const JournalState& st,
                                                       std::uint64_t id) const {
  if (ended.count(id) > 0) return std::nullopt;
  if (const JournalTask* const* accepted_task = accepted.find(id)) {
    return meta_of(**accepted_task);
  }
  return st.open_meta(id);
}

Status TaskJournalImpl::flush_body(SqliteDb& db) {
  Tx& tx = *tx_;
  if (!tx.open) return Status::ok();
  tx.open = false;
  if (!tx.writer.has_records()) return Status::ok();
  auto stmt = db.prepare(kInsertRound, "journal: append round");
  if (!stmt) return stmt.status();
  StmtRef s(*stmt);
  s->bind(1, static_cast<std::int64_t>(tx.next_seq));
  s->bind_blob(2, tx.body);
  const int rc = s->step();
  if (rc != SQLITE_DONE) return db.error(rc, "journal: append round");
  tx.rounds.emplace_back(tx.next_seq, tx.body.size());
  ++tx.next_seq;
  return Status::ok();
}

void TaskJournalImpl::write_end_whole(const OpenMeta& meta, const Write& end, std::size_t write) {
  Tx& tx = *tx_;
  JournalTask& t = tx.wholes.emplace_back();
  ended_into(t, meta, *end.final_account, end.at_ms, 0);
  const std::uint64_t id = t.task.id;
  const std::size_t bytes = tx.append([&](journal_log::BodyWriter& b) { b.task(t); });
  tx.items.push_back(
      {Tx::Item::Kind::kWhole, tx.next_seq, bytes, write, 0, tx.wholes.size() - 1, id});
  tx.ended.insert(id);
  tx.highest = std::max(tx.highest, id);
}

std::uint64_t TaskJournalImpl::max_unfinished() const {
  const std::uint64_t most = JournalOpenTasks::kMaxTasks;
  return opts_.max_unfinished == 0 ? most : std::min(opts_.max_unfinished, most);
}

Status TaskJournalImpl::write_accept(SqliteDb& db, std::size_t k, bool planned) {
  Tx& tx = *tx_;
  const JournalState& st = writer_view();
  Write& w = *taken_[k];
  Write::Accept& a = *w.accept;
  // Whole or not at all: a batch that would take the open tasks past their bound (counting
  // those this transaction accepts as open) is refused.
  const std::uint64_t bound = max_unfinished();
  w.full = st.unfinished_count() + tx.accepted.size() + a.tasks.size() > bound;
  if (w.full) return Status::ok();
  if (a.letter_id != 0) {
    // A reopen: its task must not be open, and its letter goes in this transaction.
    w.letter_gone = false;
    w.duplicate = tx.open_task(st, a.tasks.front().task.id).has_value();
    if (w.duplicate) {
      // Open because a concurrent replay of the same letter won: its letter is gone,
      // and that is the answer (not_found, as without a journal).
      auto there = letter_exists(db, a.letter_id);
      if (!there) return there.status();
      w.letter_gone = !*there;
      w.duplicate = *there;
      return Status::ok();
    }
    auto gone = delete_letter(db, a.letter_id);
    if (!gone) return gone.status();
    w.letter_gone = !*gone;
    if (w.letter_gone) return Status::ok();
  } else {
    // Ids are new to the journal, to this transaction and within the batch.
    w.duplicate = !ids_rise_above(a.tasks, std::max(st.highest(), tx.highest)) &&
                  !ids_unseen(a.tasks, st, tx.accepted, tx.ended);
    if (w.duplicate) return Status::ok();
  }
  for (std::size_t n = 0; n < a.tasks.size(); ++n) {
    JournalTask& t = a.tasks[n];
    as_accepted(t, w.at_ms);
    const std::size_t end_at = planned && !a.ends.empty() ? a.ends[n] : 0;
    if (end_at != 0) {
      write_end_whole(meta_of(t), *taken_[end_at - 1], k);
      continue;
    }
    const std::size_t bytes = tx.append([&](journal_log::BodyWriter& b) { b.task(t); });
    tx.items.push_back({Tx::Item::Kind::kAccepted, tx.next_seq, bytes, k, n, 0, t.task.id});
    tx.accepted.try_emplace(t.task.id, &t);
    tx.highest = std::max(tx.highest, t.task.id);
  }
  return Status::ok();
}

Status TaskJournalImpl::write_range(SqliteDb& db, std::size_t i, std::size_t j, bool planned) {
  Tx& tx = *tx_;
  const JournalState& st = writer_view();
  for (std::size_t k = i; k < j; ++k) {
    Write& w = *taken_[k];
    if (planned && w.covered) continue;  // a finish's end went with its accept
    switch (w.kind) {
      case Write::Kind::kAccept:
        SP_RETURN_IF_ERROR(write_accept(db, k, planned));
        break;
      case Write::Kind::kStart:
      case Write::Kind::kRequeue:
      case Write::Kind::kAttempt: {
        if (!tx.open_task(st, w.task_id)) break;  // a no-op, as in a replay
        const std::size_t bytes = tx.append([&](journal_log::BodyWriter& b) {
          if (w.kind == Write::Kind::kStart) {
            b.start(w.task_id, w.start(), w.at_ms);
          } else if (w.kind == Write::Kind::kRequeue) {
            b.requeue(w.task_id, w.at_ms);
          } else {
            b.attempt(w.task_id, *w.ended, w.next, w.retry_due_ms, w.at_ms);
          }
        });
        tx.items.push_back({Tx::Item::Kind::kStep, tx.next_seq, bytes, k, 0, 0, w.task_id});
        break;
      }
      case Write::Kind::kFinish: {
        if (const auto meta = tx.open_task(st, w.task_id)) write_end_whole(*meta, w, k);
        break;
      }
    }
    if (tx.body.size() >= kMaxBody) SP_RETURN_IF_ERROR(flush_body(db));
  }
  return Status::ok();
}

Status TaskJournalImpl::write_taken(SqliteDb& db, int* rc) {
  // Batches of views become JournalTasks only now, a round's at a time: queued, they cost
  // ~48 bytes a task instead of a JournalTask and a copy of the payload.
  for (Write* w : taken_) w->make_tasks();
  plan_round();
  Status s = compact(db);
  if (s) s = write_range(db, 0, taken_.size(), true);
  if (!s) *rc = db.errcode();
  return s;
}

Status TaskJournalImpl::write_dead_lettered(SqliteDb& db, const DeadLetter& letter,
                                            std::uint64_t letter_id) {
  Tx& tx = *tx_;
  const auto meta = tx.open_task(writer_view(), letter.task.id);
  if (!meta) return Status::ok();  // not journaled, or ended already
  TaskResult account = letter.task;
  account.state = TaskState::kDeadLettered;
  JournalTask& t = tx.wholes.emplace_back();
  ended_into(t, *meta, account, letter.dead_lettered_ms, letter_id);
  const std::size_t bytes = tx.append([&](journal_log::BodyWriter& b) { b.task(t); });
  tx.items.push_back(
      {Tx::Item::Kind::kWhole, tx.next_seq, bytes, 0, 0, tx.wholes.size() - 1, letter.task.id});
  tx.ended.insert(letter.task.id);
  tx.highest = std::max(tx.highest, letter.task.id);
  if (tx.body.size() >= kMaxBody) return flush_body(db);
  return Status::ok();
}

void TaskJournalImpl::transaction_ended(bool committed) {
  Tx& tx = *tx_;
  tx.open = false;
  if (!committed) {
    tx.next_seq = tx.first_seq;
  } else if (!tx.items.empty() || !tx.rounds.empty() || !tx.deleted.empty()) {
    MutexLock lk(state_mu_);
    JournalState& st = *state_;
    for (const auto& [seq, bytes] : tx.rounds) st.add_round(seq, bytes);
    for (Tx::Item& it : tx.items) {
      switch (it.kind) {
        case Tx::Item::Kind::kAccepted:
          st.apply_task(it.seq, std::move(taken_[it.write]->accept->tasks[it.task]), it.bytes);
          break;
        case Tx::Item::Kind::kWhole:
          st.apply_task(it.seq, std::move(tx.wholes[it.whole]), it.bytes);
          break;
        case Tx::Item::Kind::kCarried:
          st.carried(it.seq, it.id, it.bytes);
          break;
        case Tx::Item::Kind::kStep: {
          const Write& w = *taken_[it.write];
          if (w.kind == Write::Kind::kStart) {
            st.apply_start(it.seq, w.task_id, w.start(), it.bytes);
          } else if (w.kind == Write::Kind::kRequeue) {
            st.apply_requeue(it.seq, w.task_id, it.bytes);
          } else {
            st.apply_attempt(it.seq, w.task_id, *w.ended, w.next, w.retry_due_ms, it.bytes);
          }
          break;
        }
      }
    }
    for (std::uint64_t seq : tx.deleted) st.remove_round(seq);
    if (!tx.deleted.empty()) state_cv_.notify_all();  // a read back may wait for it
    MutexLock slk(store_.mu_);
    stats_.rounds_deleted += tx.deleted.size();
    stats_.tasks_carried += tx.carried;
  }
  if (committed) evict_finished();
  tx.first_seq = tx.next_seq;
  tx.items.clear();
  tx.wholes.clear();
  tx.rounds.clear();
  tx.deleted.clear();
  tx.accepted.clear();
  tx.ended.clear();
  tx.highest = 0;
  tx.carried = 0;
}

// Commits the writes [i, j) of taken_ in a transaction of their own; returns the error and
// sets *rc on failure.
Status TaskJournalImpl::commit_alone(SqliteDb& db, std::size_t i, std::size_t j, int* rc) {
  Status s = db.exec("BEGIN IMMEDIATE", "journal write: begin");
  if (s) s = write_range(db, i, j, false);
  if (s) s = flush_body(db);
  if (s) s = db.exec("COMMIT", "journal write: commit");
  transaction_ended(s.is_ok());
  if (!s) {
    *rc = db.errcode();
    (void)db.exec("ROLLBACK", "journal write: rollback");
  }
  return s;
}

void TaskJournalImpl::resolve(std::size_t i, const Status& committed) {
  Write& w = *taken_[i];
  const std::uint64_t letter = w.accept ? w.accept->letter_id : 0;
  Status s = committed;
  if (committed && w.duplicate && letter != 0) {
    s = Status::error(Code::kInvalidArgument, "task journal: task " +
                                                  std::to_string(w.accept->tasks.front().task.id) +
                                                  " of dead letter " + std::to_string(letter) +
                                                  " is open already (not replayed)");
  } else if (committed && w.duplicate) {
    s = Status::error(Code::kInvalidArgument,
                      "task journal: an id of the batch is journaled already (ids are unique)");
  } else if (committed && w.full) {
    s = Status::error(Code::kQueueFull, "task journal: it holds " +
                                            std::to_string(max_unfinished()) +
                                            " unfinished tasks at most (max_unfinished)");
  } else if (committed && w.letter_gone) {
    s = Status::error(Code::kNotFound, "no dead letter " + std::to_string(letter) +
                                           " (purged, or replayed already)");
  }
  if (s) {
    round_->accepted_tasks += w.task_count();
    if (w.kind != Write::Kind::kAccept) ++round_->records;
  } else if (w.kind == Write::Kind::kAccept) {
    ++round_->refused_batches;
    round_->refused_tasks += w.task_count();
    if (round_->error.empty()) round_->error = s.to_string();
  } else {
    log_->error("task journal {}: the database refuses a write for task {}: {}", store_.path(),
                w.task_id, s.to_string());
  }
  // A reopen's own refusals (its task open, its letter gone) are not the storage's.
  const bool reopen_refused = committed && letter != 0 && !w.full;
  const Status answer = s || reopen_refused ? s : storage_error(s);
  if (w.kind == Write::Kind::kAccept) {
    deliveries_.push_back({nullptr, answer, w.seq, {}});
    // The ids, in case the sync watch answered it already (deliver()): moving the tasks
    // into the state left them.
    if (s) {
      for (const JournalTask& t : w.accept->tasks) deliveries_.back().ids.push_back(t.task.id);
    }
  } else if (w.on_committed) {
    deliveries_.push_back({std::move(w.on_committed), answer, 0, {}});
  }
}

void TaskJournalImpl::round_committed(std::chrono::steady_clock::duration took) {
  for (std::size_t i = 0; i < taken_.size(); ++i) resolve(i, Status::ok());
  taken_.clear();
  clear_taken_chunks();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
  round_->commits = 1;
  round_->commit_us = static_cast<std::uint64_t>(us);
}

void TaskJournalImpl::round_failed(SqliteDb& db, const Status& why, int rc) {
  round_->error = why.to_string();
  const bool condition = classify_write_failure(rc) == WriteFailure::kCondition;
  if (condition) round_->condition = storage_error(why);
  // Accepts are never kept for a retry: refused when the database cannot take writes now,
  // else each is tried alone, since the fault may be another write's.
  for (std::size_t i = 0; i < taken_.size(); ++i) {
    if (taken_[i]->kind != Write::Kind::kAccept) continue;
    int one_rc = SQLITE_OK;
    resolve(i, condition ? why : commit_alone(db, i, i + 1, &one_rc));
  }
  std::vector<Write> records;
  for (Write* w : taken_) {
    if (w->kind != Write::Kind::kAccept) records.push_back(std::move(*w));
  }
  taken_.clear();
  taken_chunks_.clear();
  take_chunk(std::move(records));
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
        if (!s && classify_write_failure(one_rc) == WriteFailure::kCondition) {
          round_->condition = storage_error(s);
          break;
        }
        resolve(i, s);
      }
      taken_.erase(taken_.begin(), taken_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  clear_taken_chunks();
  round_->failed = !taken_.empty();
}

void TaskJournalImpl::deliver() {
  RoundResult r = std::exchange(*round_, RoundResult{});
  std::vector<Delivery> calls = std::exchange(deliveries_, {});
  Answers refused;
  Status refusal;
  std::vector<std::uint64_t> late;
  {
    MutexLock lk(store_.mu_);
    stats_.tasks_accepted += r.accepted_tasks;
    stats_.batches_refused += r.refused_batches;
    stats_.records_written += r.records;
    stats_.commits += r.commits;
    if (r.commits > 0) {
      stats_.last_commit_us = r.commit_us;
      stats_.max_commit_us = std::max(stats_.max_commit_us, r.commit_us);
      stats_.total_commit_us += r.commit_us;
    }
    if (!r.error.empty()) stats_.last_error = r.error;
    taken_count_ = taken_.size();
    taken_tasks_ = 0;
    if (!taken_.empty()) taken_seq_ = taken_.front()->seq;
    recycle_taken_chunks_locked();
    if (r.refused_batches > 0) {
      log_->warn("task journal {}: refused {} batches ({} tasks): {}", store_.path(),
                 r.refused_batches, r.refused_tasks, r.error);
    }
    if (r.failed && !failing_) {
      log_->warn(
          "task journal {}: {} records wait in memory and are retried until they are written "
          "or the store closes: {}",
          store_.path(), taken_.size(), r.error);
    }
    if (r.condition) {
      turn_failing_locked(*r.condition, &refused);
      if (!refused.empty()) refusal = refusal_locked();
    } else if (r.commits > 0) {
      recovered_locked();
    }
    for (Delivery& d : calls) {
      if (d.accept_seq == 0) continue;
      d.cb = take_answer_locked(d.accept_seq);
      // Answered by the sync watch (a refusal at sync_timeout) yet committed: its tasks
      // are not open anywhere else, so the journal ends them here.
      if (!d.cb && d.status) late.insert(late.end(), d.ids.begin(), d.ids.end());
    }
  }
  if (!late.empty()) end_refused_late(late);
  for (JournalCommitted& cb : refused) calls.push_back({std::move(cb), refusal, 0, {}});
  for (auto& [cb, status, seq, ids] : calls) {
    if (!cb) continue;
    try {
      cb(status);
    } catch (const std::exception& e) {
      log_->error("task journal {}: a commit callback threw: {}", store_.path(), e.what());
    }
  }
}

}  // namespace sandpool
