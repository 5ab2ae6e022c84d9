// What the dead-letter store tests share: a scratch state dir, store options with quick
// retries, letters, raw SQLite connections to the store's file, a log that keeps its lines,
// and a wait on an event with a generous deadline.
#pragma once

#include <sqlite3.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <sandpool/store/dead_letters.hpp>
#include <sandpool/store/sqlite_db.hpp>

namespace sandpool::testing {

using namespace std::chrono_literals;

// A fresh directory per test, removed with everything in it.
struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/sp-dead-letters-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string state_dir() const { return path + "/state"; }
  std::string path;
};

inline DeadLetterStoreOptions options_in(const std::string& state_dir) {
  DeadLetterStoreOptions o;
  o.state_dir = state_dir;
  o.retry_base = 5ms;
  o.retry_max = 50ms;
  o.max_age = 0ms;  // the letters carry fixed old timestamps; the age test sets its own
  return o;
}

inline DeadLetterStoreOptions options_for(const TempDir& dir) {
  return options_in(dir.state_dir());
}

inline std::unique_ptr<DeadLetterStore> open_store(DeadLetterStoreOptions o) {
  auto store = DeadLetterStore::open(std::move(o));
  INFO(store.status().to_string());
  REQUIRE(store.is_ok());
  return std::move(store).value();
}

inline DeadLetter letter(std::uint64_t task_id, std::string pool = "images",
                         std::string type = "resize",
                         DeadReason reason = DeadReason::kRetriesExhausted,
                         std::int64_t at_ms = 1000) {
  DeadLetter l;
  l.task.id = task_id;
  l.task.type = std::move(type);
  l.task.reason = reason;
  l.task.error = "boom " + std::to_string(task_id);
  l.pool = std::move(pool);
  l.payload = "payload " + std::to_string(task_id);
  l.dead_lettered_ms = at_ms;
  return l;
}

inline void write_all(DeadLetterStore& store, std::vector<DeadLetter> letters) {
  for (auto& l : letters) REQUIRE(store.enqueue(std::move(l)).is_ok());
  const auto flushed = store.flush(30s);
  INFO(flushed.to_string());
  REQUIRE(flushed.is_ok());
}

inline std::vector<std::uint64_t> task_ids(const std::vector<DeadLetter>& letters) {
  std::vector<std::uint64_t> ids;
  for (const auto& l : letters) ids.push_back(l.task.id);
  return ids;
}

inline std::vector<DeadLetter> list_all(DeadLetterStore& store, const DeadLetterFilter& f = {}) {
  auto page = store.list(f, DeadLetterPage{100000, std::nullopt});
  REQUIRE(page.is_ok());
  return page->letters;
}

inline std::string pragma_text(sqlite::SqliteDb& db, const char* sql) {
  auto stmt = db.prepare(sql, "test pragma");
  REQUIRE(stmt.is_ok());
  sqlite::StmtRef s(*stmt);
  REQUIRE(s->step() == SQLITE_ROW);
  return s->text(0);
}

// A connection of the test's own beside the store's. busy_timeout 0 (the default here) for a
// test that takes a lock itself and must know it has it; a test that writes while the store's
// writer may hold the lock (it retries failing writes every 50 ms) waits for it instead.
inline sqlite::SqliteDb raw_connection(const std::string& path, int busy_timeout_ms = 0) {
  auto db = sqlite::SqliteDb::open(path, busy_timeout_ms);
  REQUIRE(db.is_ok());
  return std::move(db).value();
}

// Polls `done` until it holds or the (generous) deadline passes; returns whether it held.
inline bool eventually(const std::function<bool()>& done, std::chrono::seconds deadline = 60s) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// A logger whose lines the test can search (every level).
class CapturedLog final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  static std::pair<std::shared_ptr<spdlog::logger>, std::shared_ptr<CapturedLog>> make() {
    auto sink = std::make_shared<CapturedLog>();
    auto log = std::make_shared<spdlog::logger>("dead-letter-test", sink);
    log->set_level(spdlog::level::trace);
    return {log, sink};
  }
  // Lines containing `needle`.
  std::vector<std::string> matching(const std::string& needle) {
    std::lock_guard lock(lines_mu_);
    std::vector<std::string> out;
    for (const auto& l : lines_) {
      if (l.find(needle) != std::string::npos) out.push_back(l);
    }
    return out;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::lock_guard lock(lines_mu_);
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::mutex lines_mu_;
  std::vector<std::string> lines_;
};

// The receipts handed to on_written, by task id; thread-safe (the writer thread records,
// the test thread reads).
class Receipts {
 public:
  LetterWritten for_task(std::uint64_t task_id) {
    return [this, task_id](const LetterReceipt& r) {
      std::lock_guard lock(mu_);
      by_task_.push_back({task_id, r});
    };
  }
  std::size_t size() {
    std::lock_guard lock(mu_);
    return by_task_.size();
  }
  std::vector<std::pair<std::uint64_t, LetterReceipt>> all() {
    std::lock_guard lock(mu_);
    return by_task_;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<std::uint64_t, LetterReceipt>> by_task_;
};

}  // namespace sandpool::testing
