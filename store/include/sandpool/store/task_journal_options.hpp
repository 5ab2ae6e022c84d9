// The task journal's settings (task_journal.hpp; docs/journal.md), apart from the journal so
// that DeadLetterStoreOptions, which opens it, can hold them.
#pragma once

#include <chrono>
#include <cstdint>

namespace sandpool {

// PRAGMA synchronous of the store's connections (WAL): kNormal survives any crash of the
// process (a commit is in the OS's page cache before it returns); kFull survives a power
// loss too (one fsync of the WAL per commit).
enum class StoreSync : std::uint8_t { kNormal, kFull };

struct TaskJournalOptions {
  // The longest an accept() waits for others to share its commit (from the oldest pending
  // one); the writer commits sooner once max_batch tasks wait. 0: commit as soon as possible.
  std::chrono::microseconds group_commit{2000};
  // The writer waits for a group only when the last round with accept() batches carried at
  // least this many (PostgreSQL's commit_siblings): a lone submit after a quiet spell commits
  // at once, and under concurrent load, once commits start to carry several batches, they
  // wait. 0: always wait up to group_commit.
  std::size_t group_siblings = 2;
  std::size_t max_batch = 4096;  // tasks per group commit (one accept() batch is never split)
  // Unfinished tasks held at most: a batch that would take the journal past it is refused
  // whole ("storage: ..."). 0, and at most: 4,294,967,294, what the state's index of them
  // addresses (docs/journal.md, "What the state keeps of a task").
  std::uint64_t max_unfinished = 0;
  // Finished tasks kept for lookups: the oldest (by finish time) are deleted beyond any bound.
  std::uint64_t max_finished = 100000;                                 // 0: no bound
  std::chrono::milliseconds max_finished_age{std::chrono::hours(24)};  // 0: no bound
  std::uint64_t max_finished_bytes = 256ull << 20;                     // 0: no bound
  // Compaction (docs/journal.md, "Retention and compaction") copies the live tasks of the
  // log's oldest round forward, and deletes it, while the log holds more than twice the bytes
  // the journal needs plus this much: the most a long-unfinished task lets the log grow by.
  std::uint64_t compaction_slack = 16ull << 20;
  // How often the writer checks the age bound while it has nothing else to do.
  std::chrono::milliseconds retention_interval{1000};
  // A transaction of the writer still running after this long (a sync that hangs) turns the
  // journal `failing` (docs/journal.md, "A failing disk"): the accepts waiting for it are
  // answered `storage: ...` (kTimeout) and later ones refused at once. 0: no bound.
  std::chrono::milliseconds sync_timeout{5000};
  // While failing, how often the writer tries a small write to learn whether the disk takes
  // writes again.
  std::chrono::milliseconds probe_interval{1000};
};

}  // namespace sandpool
