// DeadLetterStoreStats: the dead-letter store's figures as plain data, with the one table of
// its counters (name, metric, help) that the store counts into, the control protocol's
// `status` reply writes (<sandpool/control/op_json.hpp>) and the Prometheus text exports
// (<sandpool/metrics/metrics.hpp>): a counter is defined here once, not in each layer.
// Here in the task library, below the store, the protocol and the metrics alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

// One counter of a stats struct: its member, its name in the `status` reply (empty: not in
// it), its Prometheus metric (empty: not exported) and what it counts.
template <class Stats>
struct CounterDef {
  std::uint64_t Stats::*member;
  std::string_view status_name;
  std::string_view metric;
  std::string_view help;
};

// The dead-letter store's counters, in the order the metrics list them
// (docs/dead-letters.md, "When a write fails"; docs/metrics.md).
inline constexpr CounterDef<DeadLetterStoreStats> kDeadLetterStoreCounters[] = {
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

}  // namespace sandpool
