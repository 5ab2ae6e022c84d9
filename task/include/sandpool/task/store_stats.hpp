// DeadLetterStoreStats and TaskJournalStats: the dead-letter store's and the task journal's
// figures as plain data, each with the one table of its figures (name, metric, help; StatDef,
// stat_table.hpp) that the store counts into, the control protocol's `status` reply writes
// (<sandpool/control/op_json.hpp>) and the Prometheus text exports
// (<sandpool/metrics/metrics.hpp>): a figure is defined here once, not in each layer.
// Here in the task library, below the store, the protocol and the metrics alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/task/stat_table.hpp>

namespace sandpool {

struct DeadLetterStoreStats {
  // Gauges (written out by each reader, which says how: JSON member, metric, unit).
  std::uint64_t pending = 0;           // enqueued, neither committed nor spilled yet
  std::int64_t oldest_pending_ms = 0;  // how long the oldest pending letter has waited; 0: none
  bool writes_failing = false;         // the last write failed: pending letters wait for a retry
  std::string last_write_error;        // why the last failed write failed ("" if none ever did)
  std::vector<std::string> recent_spill_files;  // the spill files' paths, the newest last (16)
  // Counters: described in kDeadLetterStoreCounters.
  std::uint64_t written = 0;
  std::uint64_t write_errors = 0;
  std::uint64_t transactions = 0;
  std::uint64_t evicted = 0;
  std::uint64_t spilled = 0;
  std::uint64_t spill_files = 0;
  std::uint64_t lost = 0;
};

// The dead-letter store's counters, in the order the metrics list them
// (docs/dead-letters.md, "When a write fails"; docs/metrics.md).
inline constexpr StatDef<DeadLetterStoreStats> kDeadLetterStoreCounters[] = {
    {&DeadLetterStoreStats::written, "written", "sandpool_dead_letters_written_total",
     "Dead letters committed to the store."},
    {&DeadLetterStoreStats::write_errors, "write_errors", "sandpool_dead_letter_write_errors_total",
     "Failed write transactions of the dead-letter store (each retried)."},
    {&DeadLetterStoreStats::spilled, "spilled", "sandpool_dead_letters_spilled_total",
     "Dead letters written to a spill file instead (refused by the database, or unwritten "
     "at stop); load them with poolctl dlq import."},
    {&DeadLetterStoreStats::spill_files, "spill_files", "sandpool_dead_letter_spill_files_total",
     "Spill files written."},
    {&DeadLetterStoreStats::lost, "lost", "sandpool_dead_letters_lost_total",
     "Dead letters neither committed nor spilled (the spill failed too)."},
    {&DeadLetterStoreStats::evicted, "", "sandpool_dead_letters_evicted_total",
     "Dead letters deleted by the store's retention bound (max_count, max_age)."},
    {&DeadLetterStoreStats::transactions, "", "", "Committed write transactions."},
};

// The task journal's figures (TaskJournal::stats()). The `status` reply's `journal` carries
// the named ones beside the service's view (ops::JournalStatus); docs/journal.md.
struct TaskJournalStats {
  // Described in kTaskJournalStats.
  std::uint64_t pending = 0;
  std::uint64_t pending_tasks = 0;
  std::uint64_t tasks_accepted = 0;
  std::uint64_t batches_refused = 0;
  std::uint64_t records_written = 0;
  std::uint64_t commits = 0;
  std::uint64_t last_commit_us = 0;
  std::uint64_t max_commit_us = 0;
  std::uint64_t total_commit_us = 0;  // / commits: the mean
  // The journal is failing (a write refused by the database's condition, or a commit past
  // sync_timeout): submits are refused at once, records wait for a retry, a probe retries.
  bool writes_failing = false;
  std::uint64_t failing_ms = 0;  // for how long, while writes_failing
  std::uint64_t probes = 0;      // probe writes tried while failing
  std::string last_error;        // why the last failed journal write failed
  std::uint64_t finished_kept = 0;
  std::uint64_t finished_bytes = 0;
  std::uint64_t evicted = 0;
  std::uint64_t retention_chunks = 0;
  std::uint64_t log_rounds = 0;
  std::uint64_t log_bytes = 0;
  std::uint64_t log_live_bytes = 0;
  std::uint64_t rounds_deleted = 0;
  std::uint64_t tasks_carried = 0;
  std::uint64_t file_bytes = 0;
  std::uint64_t wal_checkpoints = 0;
  std::uint64_t wal_checkpoint_us = 0;
};

// The task journal's figures, in the order the metrics list them (docs/metrics.md), then those
// neither the reply nor the metrics carry.
inline constexpr StatDef<TaskJournalStats> kTaskJournalStats[] = {
    {&TaskJournalStats::file_bytes, "file_bytes", "sandpool_journal_file_bytes",
     "Size of the journal's database (dead_letters.db) and its write-ahead log.",
     MetricType::kGauge},
    {&TaskJournalStats::pending, "pending", "sandpool_journal_pending_writes",
     "Journal writes queued or being written (accepts, starts, attempt ends, finishes).",
     MetricType::kGauge},
    {&TaskJournalStats::pending_tasks, "pending_tasks", "sandpool_journal_pending_tasks",
     "Submitted tasks waiting for their commit; their submitters wait for the answer.",
     MetricType::kGauge},
    {nullptr, "writes_failing", "sandpool_journal_writes_failing",
     "1 while journal writes fail and wait in memory for a retry (status says why).",
     MetricType::kGauge, MetricScale::kAsIs, &TaskJournalStats::writes_failing},
    {&TaskJournalStats::tasks_accepted, "tasks_accepted", "sandpool_journal_tasks_accepted_total",
     "Tasks committed to the journal."},
    {&TaskJournalStats::batches_refused, "batches_refused",
     "sandpool_journal_batches_refused_total",
     "Submits refused because the journal could not commit them (storage: ...)."},
    {&TaskJournalStats::commits, "commits", "sandpool_journal_commits_total",
     "Transactions that carried journal writes."},
    {&TaskJournalStats::total_commit_us, "", "sandpool_journal_commit_seconds_total",
     "Time spent in those transactions, BEGIN to COMMIT (divide by the commits for the mean).",
     MetricType::kCounter, MetricScale::kMicrosToSeconds},
    {&TaskJournalStats::last_commit_us, "last_commit_us", "sandpool_journal_commit_seconds_last",
     "The last such transaction's time.", MetricType::kGauge, MetricScale::kMicrosToSeconds},
    {&TaskJournalStats::max_commit_us, "max_commit_us", "sandpool_journal_commit_seconds_max",
     "The longest such transaction.", MetricType::kGauge, MetricScale::kMicrosToSeconds},
    {&TaskJournalStats::finished_kept, "finished_kept", "sandpool_journal_finished_tasks",
     "Finished tasks kept in the journal for lookups (task, wait).", MetricType::kGauge},
    {&TaskJournalStats::evicted, "", "sandpool_journal_evicted_total",
     "Finished tasks dropped by the journal's retention bounds."},
    {&TaskJournalStats::log_rounds, "log_rounds", "sandpool_journal_log_rounds",
     "Rounds (rows) in the journal's log; each group commit appends one.", MetricType::kGauge},
    {&TaskJournalStats::log_bytes, "log_bytes", "sandpool_journal_log_bytes",
     "Bytes of the journal log's rounds.", MetricType::kGauge},
    {&TaskJournalStats::log_live_bytes, "log_live_bytes", "sandpool_journal_log_live_bytes",
     "Of those, the bytes of records the journal still needs; compaction keeps the log near "
     "twice this.",
     MetricType::kGauge},
    {&TaskJournalStats::rounds_deleted, "", "sandpool_journal_rounds_deleted_total",
     "Log rounds deleted by compaction."},
    {&TaskJournalStats::tasks_carried, "", "sandpool_journal_tasks_carried_total",
     "Live tasks compaction copied forward out of an old round."},
    {&TaskJournalStats::wal_checkpoints, "", "sandpool_journal_wal_checkpoints_total",
     "WAL checkpoints run by the journal's checkpoint thread."},
    {&TaskJournalStats::wal_checkpoint_us, "", "sandpool_journal_wal_checkpoint_seconds_total",
     "Their time.", MetricType::kCounter, MetricScale::kMicrosToSeconds},
    {&TaskJournalStats::records_written, "", "",
     "Starts, requeues, attempt ends and finishes committed."},
    {&TaskJournalStats::failing_ms, "", "", "For how long the journal has failed, while it does.",
     MetricType::kGauge},
    {&TaskJournalStats::probes, "", "", "Probe writes tried while failing."},
    {&TaskJournalStats::finished_bytes, "", "",
     "The kept finished tasks' bytes (result, errors, attempts).", MetricType::kGauge},
    {&TaskJournalStats::retention_chunks, "", "", "Upkeep transactions (compaction while idle)."},
};

}  // namespace sandpool
