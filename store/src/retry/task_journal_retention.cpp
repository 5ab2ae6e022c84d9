// TaskJournal's upkeep (docs/journal.md, "Retention and compaction"): retention drops
// finished tasks beyond the count, age or byte bound from the state (the oldest end first);
// compaction then deletes the log's head rounds that hold no live record, and copies the live
// tasks of a head round forward (carry) when the log holds much more than the journal needs.
// Both run inside the writer's transactions, and while the writer is idle in short
// transactions of their own.
#include <sqlite3.h>

#include <map>

#include <spdlog/spdlog.h>

#include <sandpool/store/task_journal.hpp>

#include <sandpool/store/sqlite_db.hpp>
#include "retry/journal_state.hpp"
#include "retry/task_journal_write.hpp"

namespace sandpool {
namespace {

using sqlite::SqliteDb;
using sqlite::StmtRef;

constexpr const char* kDeleteRound = "DELETE FROM journal_rounds WHERE seq = ?1";
constexpr const char* kRaiseHighest =
    "UPDATE journal_meta SET value = max(value, ?1) WHERE name = 'highest_task_id'";

// Rounds deleted per transaction at most, and finished tasks evicted per commit at most.
constexpr std::size_t kDeletesPerTransaction = 256;
constexpr std::size_t kEvictionsPerCommit = 4096;
// The head round is carried forward while the log holds more than twice what the journal
// needs plus the slack, but never more than kMaxCarry bytes of live records at once, so that
// a transaction stays short (a bigger head waits for its tasks to end).
constexpr std::uint64_t kMaxCarry = std::uint64_t{16} << 20;

// The round compaction would carry after deleting `dead` head rounds, if any.
std::optional<std::uint64_t> carry_candidate(const JournalState& st, std::size_t dead,
                                             std::uint64_t slack) {
  if (st.rounds().size() <= dead) return std::nullopt;
  if (st.log_bytes() <= 2 * st.live_bytes() + slack) return std::nullopt;
  auto it = st.rounds().begin();
  std::advance(it, static_cast<std::ptrdiff_t>(dead));
  if (it->second.live_bytes > kMaxCarry) return std::nullopt;
  return it->first;
}

bool compaction_needed(const JournalState& st, std::uint64_t slack) {
  return !st.dead_head(1).empty() || carry_candidate(st, 0, slack).has_value();
}

}  // namespace

bool TaskJournalImpl::upkeep_due_locked(std::chrono::steady_clock::time_point now) const {
  if (now < retention_paused_until_) return false;
  if (compaction_due_) return true;
  return opts_.max_finished_age.count() > 0 && now >= next_age_check_;
}

void TaskJournalImpl::evict_finished() {
  JournalState::Bounds b;
  b.max_finished = opts_.max_finished;
  b.max_finished_bytes = opts_.max_finished_bytes;
  b.max_finished_age_ms = opts_.max_finished_age.count();
  std::size_t evicted = 0;
  {
    MutexLock lk(state_mu_);
    evicted = state_->evict(b, store_.now_ms(), kEvictionsPerCommit);
    compaction_due_ = compaction_needed(*state_, opts_.compaction_slack);
  }
  if (evicted > 0) {
    MutexLock lk(store_.mu_);
    stats_.evicted += evicted;
  }
}

Status TaskJournalImpl::compact(SqliteDb& db) {
  Tx& tx = *tx_;
  const JournalState& st = writer_view();
  std::vector<std::uint64_t> gone = st.dead_head(kDeletesPerTransaction);
  if (const auto seq = carry_candidate(st, gone.size(), opts_.compaction_slack)) {
    SP_RETURN_IF_ERROR(carry(db, *seq));
    gone.push_back(*seq);
  }
  if (gone.empty()) return Status::ok();
  for (std::uint64_t seq : gone) {
    auto stmt = db.prepare(kDeleteRound, "journal compaction: delete round");
    if (!stmt) return stmt.status();
    StmtRef s(*stmt);
    s->bind(1, static_cast<std::int64_t>(seq));
    SP_RETURN_IF_ERROR(db.step_done(**stmt, "journal compaction: delete round"));
    tx.deleted.push_back(seq);
  }
  // The deleted rounds may hold the highest id ever accepted: it outlives them here.
  auto high = db.prepare(kRaiseHighest, "journal compaction: highest id");
  if (!high) return high.status();
  StmtRef h(*high);
  h->bind(1, static_cast<std::int64_t>(st.highest()));
  return db.step_done(**high, "journal compaction: highest id");
}

Status TaskJournalImpl::carry(SqliteDb& db, std::uint64_t seq) {
  Tx& tx = *tx_;
  const JournalState& st = writer_view();
  // Every task live in the round has a whole-task record there (the round is the oldest
  // with a live record, and a task's first live record is its whole one); the last one of
  // each is the live one.
  std::map<std::uint64_t, JournalTask> live;
  SP_RETURN_IF_ERROR(read_round_tasks(db, seq, [&](JournalTask& t) {
                       if (st.live_in(seq, t.task.id) > 0) live[t.task.id] = std::move(t);
                     }).with_context("journal compaction: carry"));
  std::uint64_t records = 0;
  for (auto& entry : live) {  // not a structured binding: clang 14's lambdas cannot capture one
    const std::uint64_t id = entry.first;
    JournalTask& t = entry.second;
    records += st.live_in(seq, id);
    const JournalTask* done = st.finished_task(id);
    if (done == nullptr) st.overlay_steps(id, t);  // what its later records changed
    const std::size_t bytes =
        tx.append([&](journal_log::BodyWriter& b) { b.task(done != nullptr ? *done : t); });
    tx.items.push_back({Tx::Item::Kind::kCarried, tx.next_seq, bytes, 0, 0, 0, id});
    ++tx.carried;
  }
  // A live record not found would be lost with the round: refuse to delete it.
  if (const std::uint64_t want = st.rounds().at(seq).live_records; records != want) {
    return Status::error(Code::kInternal, "journal compaction: round " + std::to_string(seq) +
                                              " holds " + std::to_string(records) + " of its " +
                                              std::to_string(want) +
                                              " live records as whole tasks; not carried");
  }
  return Status::ok();
}

void TaskJournalImpl::run_retention_chunk(SqliteDb& db) {
  const auto now = std::chrono::steady_clock::now();
  evict_finished();  // the age bound, while nothing is written
  {
    MutexLock lk(store_.mu_);
    next_age_check_ = now + opts_.retention_interval;
  }
  if (!compaction_due_) return;
  Status s = db.exec("BEGIN IMMEDIATE", "journal compaction: begin");
  if (s) s = compact(db);
  if (s) s = flush_body(db);
  if (s) s = db.exec("COMMIT", "journal compaction: commit");
  transaction_ended(s.is_ok());
  if (!s) (void)db.exec("ROLLBACK", "journal compaction: rollback");
  {
    MutexLock lk(store_.mu_);
    if (s) {
      ++stats_.retention_chunks;
    } else {
      stats_.last_error = s.to_string();
      retention_paused_until_ = now + opts_.retention_interval;
    }
  }
  if (!s) {
    log_->warn("task journal {}: compaction failed, retried in {} ms: {}", store_.path(),
               opts_.retention_interval.count(), s.to_string());
  }
}

}  // namespace sandpool
