// What the task journal tests share, beside dead_letter_test_support.hpp: a store with a
// journal, tasks with every option set, and the callbacks' results by batch.
#pragma once

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#include <sandpool/store/task_journal.hpp>

#include "dead_letter_test_support.hpp"
#include "retry/journal_records.hpp"

namespace sandpool::testing {

inline DeadLetterStoreOptions journal_options_in(const std::string& state_dir) {
  DeadLetterStoreOptions o = options_in(state_dir);
  o.journal = TaskJournalOptions{};
  o.journal->max_finished_age = std::chrono::milliseconds(0);
  return o;
}

inline TaskJournal& journal_of(DeadLetterStore& store) {
  REQUIRE(store.journal() != nullptr);
  return *store.journal();
}

// A task with every submit option set (odd bytes in the payload and the key).
inline JournalTask task(std::uint64_t id, std::string pool = "images") {
  JournalTask t;
  t.task.id = id;
  t.task.type = "resize";
  t.pool = std::move(pool);
  t.payload = std::string("pay\0load ", 9) + std::to_string(id);
  t.options.timeout = std::chrono::milliseconds(1000 + id);
  t.options.retries = static_cast<std::uint32_t>(id % 5);
  t.options.priority = -static_cast<std::int32_t>(id % 7);
  t.options.key = "user-" + std::to_string(id % 3);
  t.options.queue_ttl = std::chrono::milliseconds(60000 + id);
  t.options.fail_fast = id % 2 == 1;
  t.options.idempotency_key = "key-" + std::to_string(id);
  t.submitted_ms = 1700000000000 + static_cast<std::int64_t>(id);
  return t;
}

// The task as submitted: id, pool, type, payload, every option and the submit time.
// Every field of an attempt.
inline void check_same_attempt(const Attempt& got, const Attempt& want) {
  CHECK(got.number == want.number);
  CHECK(got.outcome == want.outcome);
  CHECK(got.error == want.error);
  CHECK(got.worker_pid == want.worker_pid);
  CHECK(got.started_ms == want.started_ms);
  CHECK(got.ended_ms == want.ended_ms);
  CHECK(got.backtrace == want.backtrace);
}

inline void check_same_task(const JournalTask& got, const JournalTask& want) {
  INFO("task " << want.task.id);
  CHECK(got.task.id == want.task.id);
  CHECK(got.pool == want.pool);
  CHECK(got.task.type == want.task.type);
  CHECK(got.payload == want.payload);
  CHECK(got.options.timeout == want.options.timeout);
  CHECK(got.options.retries == want.options.retries);
  CHECK(got.options.priority == want.options.priority);
  CHECK(got.options.key == want.options.key);
  CHECK(got.options.queue_ttl == want.options.queue_ttl);
  CHECK(got.options.fail_fast == want.options.fail_fast);
  CHECK(got.options.idempotency_key == want.options.idempotency_key);
  CHECK(got.options.not_before == want.options.not_before);
  CHECK(got.options.tenant == want.options.tenant);
  CHECK(got.submitted_ms == want.submitted_ms);
}

// A task's final account with no attempts.
inline TaskResult account(std::uint64_t id, TaskState state) {
  TaskResult r;
  r.id = id;
  r.type = "resize";
  r.state = state;
  return r;
}

inline std::vector<JournalTask> tasks(std::uint64_t first, std::uint64_t count) {
  std::vector<JournalTask> out;
  for (std::uint64_t id = first; id < first + count; ++id) out.push_back(task(id));
  return out;
}

// The statuses handed to commit callbacks, in arrival order; thread-safe.
class Commits {
 public:
  JournalCommitted callback() {
    return [this](const Status& s) {
      std::lock_guard lock(mu_);
      got_.push_back(s);
    };
  }
  std::size_t size() {
    std::lock_guard lock(mu_);
    return got_.size();
  }
  std::vector<Status> all() {
    std::lock_guard lock(mu_);
    return got_;
  }

 private:
  std::mutex mu_;
  std::vector<Status> got_;
};

inline void accept_all(TaskJournal& journal, std::vector<JournalTask> batch) {
  Commits commits;
  journal.accept(std::move(batch), commits.callback());
  REQUIRE(journal.flush(std::chrono::seconds(60)).is_ok());
  REQUIRE(commits.size() == 1);
  INFO(commits.all().front().to_string());
  REQUIRE(commits.all().front().is_ok());
}

// Rows of `table` (matching `where`) seen on a connection of its own: committed ones only.
inline std::int64_t committed_rows(const std::string& db_path, const std::string& table,
                                   const std::string& where = "1") {
  auto db = raw_connection(db_path);
  const std::string sql = "SELECT count(*) FROM " + table + " WHERE " + where;
  sqlite3_stmt* raw = nullptr;
  REQUIRE(sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &raw, nullptr) == SQLITE_OK);
  sqlite::SqliteStmt s(raw);
  REQUIRE(s.step() == SQLITE_ROW);
  return s.int64(0);
}

// What a replay of the log as committed (read on a connection of its own) holds: the tasks by
// id, whole (payloads included), and the log's rounds. The replay is docs/journal.md's rule
// written plainly, apart from JournalState (which keeps unfinished tasks without their
// payload): a task record replaces the task; a start, requeue or attempt record changes a
// task held unfinished, and is a no-op otherwise.
struct CommittedLog {
  std::map<std::uint64_t, JournalTask> tasks;
  std::size_t rounds = 0;
  std::vector<std::uint64_t> ids() const {
    std::vector<std::uint64_t> out;
    for (const auto& [id, t] : tasks) out.push_back(id);
    return out;
  }
  const JournalTask* find(std::uint64_t id) const {
    const auto it = tasks.find(id);
    return it == tasks.end() ? nullptr : &it->second;
  }
  // The task if held unfinished, else null.
  JournalTask* open(std::uint64_t id) {
    const auto it = tasks.find(id);
    return it == tasks.end() || is_terminal(it->second.task.state) ? nullptr : &it->second;
  }
  void apply(journal_log::Record& r) {
    using journal_log::RecordKind;
    if (r.kind == RecordKind::kTask) {
      tasks[r.task.task.id] = std::move(r.task);
      return;
    }
    JournalTask* t = open(r.id);
    if (t == nullptr) return;
    if (r.kind == RecordKind::kStart) {
      Attempt a;
      a.number = r.attempt.number;
      a.worker_pid = r.attempt.worker_pid;
      a.started_ms = r.attempt.started_ms;
      t->task.state = TaskState::kRunning;
      t->running = a;
    } else if (r.kind == RecordKind::kRequeue) {
      if (t->task.state != TaskState::kRunning) return;
      t->task.state = TaskState::kQueued;
      t->running.reset();
    } else {
      std::vector<Attempt>& h = t->task.history;
      const auto at = std::find_if(h.begin(), h.end(),
                                   [&](const Attempt& a) { return a.number >= r.attempt.number; });
      if (at != h.end() && at->number == r.attempt.number) {
        *at = r.attempt;
      } else {
        h.insert(at, r.attempt);
      }
      t->task.state = r.next;
      t->retry_due_ms = r.next == TaskState::kRetryWait ? r.retry_due_ms : 0;
      t->running.reset();
    }
  }
};

inline std::unique_ptr<CommittedLog> committed_log(const std::string& db_path) {
  auto db = raw_connection(db_path);
  auto log = std::make_unique<CommittedLog>();
  sqlite3_stmt* raw = nullptr;
  REQUIRE(sqlite3_prepare_v2(db.handle(), "SELECT seq, body FROM journal_rounds ORDER BY seq", -1,
                             &raw, nullptr) == SQLITE_OK);
  sqlite::SqliteStmt s(raw);
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    const std::string body = s.blob(1);
    const Status read = journal_log::decode(body, [&](journal_log::Record& r) { log->apply(r); });
    INFO(read.to_string());
    REQUIRE(read.is_ok());
    ++log->rounds;
  }
  REQUIRE(rc == SQLITE_DONE);
  return log;
}

// How many tasks a replay of the committed log holds.
inline std::size_t committed_tasks(const std::string& db_path) {
  return committed_log(db_path)->ids().size();
}

}  // namespace sandpool::testing
