// Takes a database's WAL checkpoints off its writer's thread (docs/journal.md, "Checkpoints").
//
// SQLite checkpoints on the committing connection once the WAL holds 1000 pages: the writer
// then copies the WAL into the database file (and, at synchronous=NORMAL, fsyncs both) before
// its next transaction. A WalCheckpointer replaces that with a commit hook on the writer's
// connection that only wakes a thread of its own, which checkpoints (PASSIVE: it never blocks
// the writer or a reader) on a connection of its own. Should the WAL still grow past
// `fallback_pages` (the thread cannot keep up, or a reader pins old frames), the writer
// checkpoints itself, as SQLite would.
//
// Thread-safety: start() and the destructor on the thread that owns the writer's connection,
// while no transaction of it runs; the hook runs on the writer's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/store/sqlite_db.hpp>

namespace sandpool::sqlite {

struct WalCheckpointStats {
  std::uint64_t checkpoints = 0;  // by the thread
  std::uint64_t by_writer = 0;    // fallbacks on the writer's thread
  std::uint64_t total_us = 0;     // the thread's time in checkpoints
  std::uint64_t failures = 0;     // checkpoints that returned an error (retried at the next wake)
};

class WalCheckpointer {
 public:
  static constexpr int kPages = 1000;  // SQLite's own autocheckpoint
  static constexpr std::int64_t kFallbackBytes = std::int64_t{256} << 20;  // of WAL

  // `own` is a connection to the same file for the thread's use (synchronous set as the
  // writer's: the checkpoint's fsyncs follow it). fallback_pages 0: kFallbackBytes' worth of
  // the database's pages.
  static std::unique_ptr<WalCheckpointer> start(SqliteDb& writer, SqliteDb own, int pages = kPages,
                                                int fallback_pages = 0);
  ~WalCheckpointer();  // stops the thread; the writer's connection checkpoints by itself again
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  WalCheckpointStats stats() const EXCLUDES(mu_);

 private:
  WalCheckpointer(SqliteDb& writer, SqliteDb own, int pages, int fallback_pages);
  static int on_commit(void* self, sqlite3* db, const char* name, int frames);
  void run() EXCLUDES(mu_);

  SqliteDb& writer_;
  SqliteDb own_;  // the thread's
  const int pages_, fallback_pages_;
  mutable Mutex mu_;  // a leaf: never held across a checkpoint
  CondVar cv_;
  bool due_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  WalCheckpointStats stats_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace sandpool::sqlite
