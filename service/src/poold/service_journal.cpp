// Service and the task journal (docs/journal.md, "In poold"): the store opened with it, the
// tasks of pools no longer configured, what recovered tasks report to, lookups of tasks and
// idempotency keys the pools no longer hold, and the storage's health.
#include <spdlog/logger.h>

#include <map>
#include <set>
#include <utility>

#include <sandpool/base/wall_clock.hpp>
#include <sandpool/store/task_journal.hpp>

#include <sandpool/service/service.hpp>

namespace sandpool::poold {
namespace {

// The dead letter of an unfinished journaled task whose pool the config no longer has.
DeadLetter removed_pool_letter(JournalTask j) {
  DeadLetter letter;
  letter.task = std::move(j.task);
  if (j.running) {  // its start was journaled: that attempt was lost with poold
    Attempt lost = *j.running;
    lost.outcome = Outcome::kLost;
    lost.error = "poold restarted";
    lost.ended_ms = wall_clock_ms();
    letter.task.history.push_back(std::move(lost));
  }
  letter.task.state = TaskState::kDeadLettered;
  letter.task.reason = DeadReason::kPoolRemoved;
  letter.task.error = "pool '" + j.pool + "' is not in the config any more";
  letter.pool = std::move(j.pool);
  letter.payload = std::move(j.payload);
  letter.options = DeadLetter::kept_options(j.options);
  return letter;
}

}  // namespace

DeadLetterStoreOptions Service::store_options(const Config& config,
                                              std::shared_ptr<spdlog::logger> log) {
  DeadLetterStoreOptions so;
  so.state_dir = config.service.state_dir;
  so.logger = std::move(log);
  so.sync = config.service.journal.sync;
  if (config.service.journal.enabled) {
    TaskJournalOptions j;
    j.group_commit = config.service.journal.group_commit;
    j.sync_timeout = config.service.journal.sync_timeout;
    // Finished tasks stay for `task` and `wait` by id within the task records' bounds.
    j.max_finished = config.service.task_records_max;
    j.max_finished_age = config.service.task_records_max_age;
    so.journal = j;
  }
  return so;
}

TaskJournal* Service::journal() const { return store_ ? store_->journal() : nullptr; }

Status Service::dead_letter_removed_pools() {
  TaskJournal* j = journal();
  if (j == nullptr) return Status::ok();
  auto pools = j->unfinished_pools();
  if (!pools) return pools.status();
  std::set<std::string> configured;
  for (const PoolConfig& pc : config_.pools) configured.insert(pc.name);
  std::map<std::string, std::size_t> removed;
  for (const std::string& pool : *pools) {
    if (configured.count(pool) != 0) continue;
    auto open = j->unfinished(pool);
    if (!open) return open.status();
    for (JournalTask& t : *open) {
      ++removed[t.pool];
      const std::uint64_t id = t.task.id;
      Status s = j->dead_letter(removed_pool_letter(std::move(t)),
                                [log = log_, id](const LetterReceipt& r) {
                                  if (r.letter_id == 0) {
                                    log->error("task {} of a removed pool: letter not written", id);
                                  }
                                });
      if (!s) return s;
    }
  }
  for (const auto& [pool, n] : removed) {
    log_->warn(
        "dead-lettered {} unfinished tasks of pool {}, which is not in the config any "
        "more (reason pool_removed)",
        n, pool);
  }
  return Status::ok();
}

std::function<void(const TaskResult&)> Service::recovered_on_done(std::uint64_t id,
                                                                  const std::string& key) {
  if (!key.empty()) idempotency_.remember(key, id);
  return [this, key](const TaskResult& result) { task_ended(key, result); };
}

std::optional<TaskResult> Service::journaled_task(std::uint64_t id) const {
  TaskJournal* j = journal();
  if (j == nullptr) return std::nullopt;
  auto found = j->find(id);
  if (!found) {
    if (found.status().code() != Code::kNotFound) {
      log_->warn("task {}: journal lookup failed: {}", id, found.status().message());
    }
    return std::nullopt;
  }
  return std::move(found->task);
}

std::optional<KeptTask> Service::known_key(const std::string& key) {
  if (auto kept = idempotency_.find(key)) return kept;
  TaskJournal* j = journal();
  if (j == nullptr) return std::nullopt;
  auto found = j->find_by_key(key);
  if (!found) return std::nullopt;
  KeptTask kept;
  kept.task_id = found->task.id;
  if (is_terminal(found->task.state)) kept.final = std::move(found->task);
  return kept;
}

void Service::note_acceptance(const Status& s) {
  const std::int64_t now = wall_clock_ms();
  if (s) {
    last_accepted_ms_.store(now, std::memory_order_relaxed);
    return;
  }
  if (s.message().rfind("storage: ", 0) != 0) return;
  {
    MutexLock lock(storage_mu_);
    storage_error_ = s.message();
  }
  last_refused_ms_.store(now, std::memory_order_relaxed);
}

std::optional<ops::JournalStatus> Service::journal_status() const {
  TaskJournal* j = journal();
  if (j == nullptr) return std::nullopt;
  const TaskJournalStats t = j->stats();
  ops::JournalStatus s;
  static_cast<TaskJournalStats&>(s) = t;  // the figures kTaskJournalStats names
  s.sync = config_.service.journal.sync == StoreSync::kFull ? "full" : "normal";
  s.mean_commit_us = t.commits == 0 ? 0 : t.total_commit_us / t.commits;
  if (t.writes_failing && last_refused_ms_.load() > last_accepted_ms_.load()) {
    MutexLock lock(storage_mu_);
    s.storage_error = storage_error_;
  } else if (t.writes_failing) {
    s.storage_error = t.last_error;
  }
  return s;
}

std::optional<TaskJournalStats> Service::journal_stats() const {
  TaskJournal* j = journal();
  if (j == nullptr) return std::nullopt;
  return j->stats();
}

std::optional<std::string> Service::storage_problem() const {
  // The journal's failing state (docs/journal.md, "A failing disk") decides: its probe ends
  // it when the disk takes writes again, without a submit having to try first.
  TaskJournal* j = journal();
  if (j == nullptr) return std::nullopt;
  const TaskJournalStats s = j->stats();
  if (!s.writes_failing) return std::nullopt;
  return "submits refused: storage: journal failing for " + std::to_string(s.failing_ms) +
         " ms: " + s.last_error;
}

}  // namespace sandpool::poold
