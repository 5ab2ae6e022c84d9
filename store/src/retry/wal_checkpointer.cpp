// WalCheckpointer (wal_checkpointer.hpp): the writer's commit hook and the checkpoint thread.
#include "retry/wal_checkpointer.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>

#include <sandpool/base/thread_name.hpp>

namespace sandpool::sqlite {

namespace {

// The database's page size in bytes (4096, SQLite's default, when it cannot be read).
std::int64_t page_bytes(SqliteDb& db) {
  auto stmt = db.prepare("PRAGMA page_size", "read page_size");
  if (!stmt) return 4096;
  StmtRef s(*stmt);
  return s->step() == SQLITE_ROW && s->int64(0) > 0 ? s->int64(0) : 4096;
}

}  // namespace

std::unique_ptr<WalCheckpointer> WalCheckpointer::start(SqliteDb& writer, SqliteDb own, int pages,
                                                        int fallback_pages) {
  if (fallback_pages <= 0) {
    fallback_pages = std::max(pages, static_cast<int>(kFallbackBytes / page_bytes(writer)));
  }
  std::unique_ptr<WalCheckpointer> c(
      new WalCheckpointer(writer, std::move(own), pages, fallback_pages));
  // Replaces the autocheckpoint, which is a WAL hook too.
  sqlite3_wal_hook(writer.handle(), &WalCheckpointer::on_commit, c.get());
  c->thread_ = std::thread([p = c.get()] { p->run(); });
  name_thread(c->thread_.native_handle(), "sp-checkpoint");
  return c;
}

WalCheckpointer::WalCheckpointer(SqliteDb& writer, SqliteDb own, int pages, int fallback_pages)
    : writer_(writer), own_(std::move(own)), pages_(pages), fallback_pages_(fallback_pages) {}

WalCheckpointer::~WalCheckpointer() {
  if (writer_.handle() != nullptr) sqlite3_wal_autocheckpoint(writer_.handle(), kPages);
  {
    MutexLock lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

WalCheckpointStats WalCheckpointer::stats() const {
  MutexLock lk(mu_);
  return stats_;
}

int WalCheckpointer::on_commit(void* self, sqlite3* db, const char* name, int frames) {
  auto* c = static_cast<WalCheckpointer*>(self);
  if (frames >= c->fallback_pages_) {
    (void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    MutexLock lk(c->mu_);
    ++c->stats_.by_writer;
    return SQLITE_OK;
  }
  if (frames < c->pages_) return SQLITE_OK;
  {
    MutexLock lk(c->mu_);
    if (c->due_) return SQLITE_OK;
    c->due_ = true;
  }
  c->cv_.notify_one();
  return SQLITE_OK;
}

void WalCheckpointer::run() {
  MutexLock lk(mu_);
  for (;;) {
    while (!due_ && !stop_) cv_.wait(mu_);
    if (stop_) return;
    due_ = false;
    lk.unlock();
    const auto began = std::chrono::steady_clock::now();
    const int rc = sqlite3_wal_checkpoint_v2(own_.handle(), nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                             nullptr, nullptr);
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - began)
                        .count();
    lk.lock();
    ++stats_.checkpoints;
    stats_.total_us += static_cast<std::uint64_t>(us);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) ++stats_.failures;
  }
}

}  // namespace sandpool::sqlite
