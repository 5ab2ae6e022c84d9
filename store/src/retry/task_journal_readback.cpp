// TaskJournal's reads of unfinished tasks (docs/journal.md, "What the state keeps of a
// task"): the state in memory keeps an unfinished task without its payload and options, so
// recovery (unfinished()) and lookups (find(), find_by_key()) read its whole-task record back
// from the round that holds it, and put over it what the state says its later records
// changed. Rounds are never rewritten, only deleted by compaction (after carrying their live
// tasks forward): a read that finds its round gone takes a new snapshot and reads again.
#include <sqlite3.h>

#include <algorithm>
#include <numeric>

#include <sandpool/store/task_journal.hpp>

#include <sandpool/store/sqlite_db.hpp>
#include "retry/id_table.hpp"
#include "retry/journal_records.hpp"
#include "retry/journal_state.hpp"
#include "retry/task_journal_write.hpp"

namespace sandpool {
namespace {

using sqlite::SqliteDb;
using sqlite::StmtRef;

constexpr const char* kRoundBody = "SELECT body FROM journal_rounds WHERE seq = ?1";
// Snapshots taken at most by one read while compaction keeps deleting its rounds.
constexpr int kReadBackTries = 16;

// Puts what the state says the task's later records changed over its whole-task record.
void apply_steps(const OpenSteps& steps, JournalTask& t) {
  t.task.state = steps.state;
  t.running = steps.running;
  t.retry_due_ms = steps.retry_due_ms;
  t.task.history = steps.history;
}

}  // namespace

Status read_round_tasks(SqliteDb& db, std::uint64_t seq,
                        const std::function<void(JournalTask&)>& on_task) {
  std::string body;
  {
    auto stmt = db.prepare(kRoundBody, "journal: read round");
    if (!stmt) return stmt.status();
    StmtRef s(*stmt);
    s->bind(1, static_cast<std::int64_t>(seq));
    const int rc = s->step();
    if (rc == SQLITE_DONE) {
      return Status::error(Code::kNotFound, "round " + std::to_string(seq) + " is not in the log");
    }
    if (rc != SQLITE_ROW) return db.error(rc, "journal: read round");
    body = s->blob(0);
  }
  const Status read = journal_log::decode(body, [&](journal_log::Record& r) {
    if (r.kind == journal_log::RecordKind::kTask) on_task(r.task);
  });
  if (!read) {
    return Status::error(Code::kInternal, "round " + std::to_string(seq) + " of " +
                                              "the log is unreadable: " + read.message());
  }
  return Status::ok();
}

Result<std::optional<std::vector<JournalTask>>> TaskJournalImpl::read_back(
    const std::vector<OpenSnapshot>& open, std::uint64_t* gone) {
  std::vector<JournalTask> out(open.size());
  std::vector<bool> found(open.size(), false);
  // By round, so that each is read once.
  std::vector<std::size_t> order(open.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return open[a].seq < open[b].seq; });
  IdTable<std::size_t> wanted;
  MutexLock qlk(query_mu_);
  SqliteDb& db = *query_owner_;
  for (std::size_t i = 0; i < order.size();) {
    const std::uint64_t seq = open[order[i]].seq;
    wanted.clear();
    for (; i < order.size() && open[order[i]].seq == seq; ++i) {
      wanted.try_emplace(open[order[i]].id, order[i]);
    }
    const Status s = read_round_tasks(db, seq, [&](JournalTask& t) {
      if (const std::size_t* k = wanted.find(t.task.id)) {
        out[*k] = std::move(t);  // the last of the task's records in the round is the live one
        found[*k] = true;
      }
    });
    if (s.code() == Code::kNotFound) {
      *gone = seq;
      return std::optional<std::vector<JournalTask>>();
    }
    if (!s) return s;
  }
  for (std::size_t k = 0; k < open.size(); ++k) {
    if (!found[k]) {
      return Status::error(Code::kInternal, "journal: task " + std::to_string(open[k].id) +
                                                " has no whole-task record in round " +
                                                std::to_string(open[k].seq));
    }
    apply_steps(open[k].steps, out[k]);
  }
  return std::optional<std::vector<JournalTask>>(std::move(out));
}

void TaskJournalImpl::wait_round_gone(std::uint64_t seq) {
  const auto deadline = std::chrono::steady_clock::now() + opts_.sync_timeout;
  MutexLock lk(state_mu_);
  while (state_->rounds().count(seq) > 0) {
    if (state_cv_.wait_until(state_mu_, deadline) == std::cv_status::timeout) return;
  }
}

Result<std::vector<JournalTask>> TaskJournalImpl::unfinished(
    const std::optional<std::string>& pool) {
  for (int tries = 0; tries < kReadBackTries; ++tries) {
    std::vector<OpenSnapshot> open;
    {
      MutexLock lk(state_mu_);
      open = state_->open_snapshots(pool);
    }
    std::uint64_t gone = 0;
    auto tasks = read_back(open, &gone);
    if (!tasks) return tasks.status();
    if (*tasks) return std::move(**tasks);
    wait_round_gone(gone);
  }
  return Status::error(Code::kUnavailable,
                       "journal: compaction kept deleting the rounds being read; try again");
}

Result<JournalTask> TaskJournalImpl::find(std::uint64_t task_id) {
  for (int tries = 0; tries < kReadBackTries; ++tries) {
    std::vector<OpenSnapshot> open;
    {
      MutexLock lk(state_mu_);
      if (const JournalTask* t = state_->finished_task(task_id)) return *t;
      auto snap = state_->open_snapshot(task_id);
      if (!snap) {
        return Status::error(Code::kNotFound,
                             "task " + std::to_string(task_id) + " is not journaled");
      }
      open.push_back(std::move(*snap));
    }
    std::uint64_t gone = 0;
    auto tasks = read_back(open, &gone);
    if (!tasks) return tasks.status();
    if (*tasks) return std::move((**tasks).front());
    wait_round_gone(gone);
  }
  return Status::error(Code::kUnavailable,
                       "journal: compaction kept deleting the round being read; try again");
}

Result<JournalTask> TaskJournalImpl::find_by_key(const std::string& idempotency_key) {
  std::uint64_t id = 0;
  {
    MutexLock lk(state_mu_);
    id = state_->find_key(idempotency_key);
  }
  Result<JournalTask> t = id == 0 ? Result<JournalTask>(Status::error(Code::kNotFound, ""))
                                  : find(id);  // evicted since: not found either
  if (!t && t.status().code() == Code::kNotFound) {
    return Status::error(Code::kNotFound, "no journaled task has key '" + idempotency_key + "'");
  }
  return t;
}

}  // namespace sandpool
