// dlq --state-dir: poolctl reads, purges and imports into a real dead-letter store without
// the service.
#include <catch2/catch.hpp>

#include <spdlog/spdlog.h>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sandpool/store/dead_letter_file.hpp>
#include <sandpool/store/dead_letters.hpp>
#include <sandpool/store/task_journal.hpp>

#include <sandpool/store/sqlite_db.hpp>
#include "poolctl_runner.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using nlohmann::json;

namespace {

// Writes letters for tasks 1..n of pool "images" (task 2 shut down, the rest exhausted).
void write_letters(const std::string& dir, std::uint64_t n) {
  DeadLetterStoreOptions o;
  o.state_dir = dir;
  auto store = DeadLetterStore::open(o);
  REQUIRE(store);
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  for (std::uint64_t i = 1; i <= n; ++i) {
    DeadLetter l;
    l.pool = "images";
    l.payload = "payload " + std::to_string(i);
    l.task.id = i;
    l.task.type = "resize";
    l.task.state = TaskState::kDeadLettered;
    l.task.reason = i == 2 ? DeadReason::kShutdown : DeadReason::kRetriesExhausted;
    l.task.error = "boom";
    l.task.history.push_back({1, Outcome::kTimedOut, "timed out", 4242, 1000, 2000, "#0 f\n"});
    l.dead_lettered_ms = now_ms - 60000 + 1000 * static_cast<std::int64_t>(i);  // kept 30 days
    if (i == 3) l.options.tenant = "acme";
    REQUIRE((*store)->enqueue(std::move(l)).is_ok());
  }
  REQUIRE((*store)->close().is_ok());
}

// Makes the store in `dir` spill three letters (tasks 11..13 of pool "mail") at close: its
// database stays locked by another connection until close_timeout. Returns the spill file.
std::string spill_three(const std::string& dir) {
  DeadLetterStoreOptions o;
  o.state_dir = dir;
  o.busy_timeout = std::chrono::milliseconds(10);
  o.retry_max = std::chrono::milliseconds(20);
  o.close_timeout = std::chrono::milliseconds(200);
  o.logger = std::make_shared<spdlog::logger>("test", spdlog::sinks_init_list{});
  auto store = DeadLetterStore::open(o);
  REQUIRE(store);
  auto locker = sqlite::SqliteDb::open((*store)->path(), 0);
  REQUIRE(locker);
  REQUIRE(locker->exec("BEGIN IMMEDIATE", "test lock").is_ok());
  std::string file;
  for (std::uint64_t i = 11; i <= 13; ++i) {
    DeadLetter l;
    l.pool = "mail";
    l.payload = std::string("binary\0payload ", 15) + std::to_string(i);
    l.task.id = i;
    l.task.type = "send";
    l.task.reason = DeadReason::kRetriesExhausted;
    l.task.error = "smtp down";
    l.task.history.push_back({1, Outcome::kError, "smtp down", 4242, 1000, 2000});
    REQUIRE((*store)
                ->enqueue(std::move(l), [&](const LetterReceipt& r) { file = r.spill_file; })
                .is_ok());
  }
  CHECK((*store)->close().code() == Code::kTimeout);
  REQUIRE_FALSE(file.empty());
  REQUIRE(locker->exec("COMMIT", "test unlock").is_ok());
  return file;
}

}  // namespace

TEST_CASE("dlq --state-dir lists, shows and purges the store without the service") {
  TempDir dir;
  write_letters(dir.path(), 3);
  const std::string absent = dir.path() + "/no.sock";  // the service is not needed
  auto list = poolctl(absent, {"dlq", "--state-dir", dir.path(), "list"});
  REQUIRE(list.exit_code == 0);
  CHECK(list.out.find("retries_exhausted") != std::string::npos);
  CHECK(list.out.find("shutdown") != std::string::npos);
  CHECK(list.out.find("TENANT") != std::string::npos);  // a column, since one letter has one
  CHECK(list.out.find("acme") != std::string::npos);

  auto page = poolctl(absent, {"--json", "dlq", "list", "--state-dir", dir.path(), "--limit", "2"});
  REQUIRE(page.exit_code == 0);
  const json first = json::parse(page.out);
  REQUIRE(first["entries"].size() == 2);
  auto next = poolctl(absent, {"--json", "dlq", "list", "--state-dir", dir.path(), "--cursor",
                               first["next_cursor"].get<std::string>()});
  REQUIRE(json::parse(next.out)["entries"].size() == 1);
  CHECK(json::parse(next.out)["entries"][0]["task_id"] == 3);
  CHECK(json::parse(next.out)["entries"][0]["tenant"] == "acme");
  CHECK_FALSE(first["entries"][0].contains("tenant"));  // the default tenant: absent

  auto show = poolctl(absent, {"--json", "dlq", "show", "2", "--state-dir", dir.path()});
  REQUIRE(show.exit_code == 0);
  const json letter = json::parse(show.out);
  CHECK(letter["payload"] == "payload 2");
  CHECK(letter["reason"] == "shutdown");
  CHECK(letter["history"][0]["outcome"] == "timed_out");
  CHECK(poolctl(absent, {"dlq", "show", "9", "--state-dir", dir.path()}).exit_code == 1);

  auto purge = poolctl(absent, {"dlq", "purge", "--reason", "shutdown", "--state-dir", dir.path()});
  CHECK(purge.exit_code == 0);
  CHECK(purge.out.find("1 dead letters purged") != std::string::npos);
  auto all = poolctl(absent, {"--json", "dlq", "purge", "--all", "--state-dir", dir.path()});
  CHECK(json::parse(all.out)["purged"] == 2);
}

TEST_CASE("dlq --state-dir refuses replay and a directory without a store") {
  TempDir dir;
  CHECK(poolctl("/x.sock", {"dlq", "replay", "--all", "--state-dir", dir.path()}).exit_code == 2);
  auto missing = poolctl("/x.sock", {"dlq", "list", "--state-dir", dir.path()});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("no dead-letter store") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/dead_letters.db"));
}

TEST_CASE("dlq import loads a spill file offline, renames it, and a second import adds nothing") {
  TempDir dir;
  const std::string file = spill_three(dir.path());
  const std::string absent = dir.path() + "/no.sock";
  auto imported = poolctl(absent, {"dlq", "--state-dir", dir.path(), "import", file});
  INFO(imported.err);
  REQUIRE(imported.exit_code == 0);
  CHECK(imported.out == "3 dead letters imported, 0 already present; " + file + " renamed to " +
                            file + ".imported\n");
  CHECK_FALSE(std::filesystem::exists(file));
  REQUIRE(std::filesystem::exists(file + ".imported"));

  auto list = poolctl(absent, {"--json", "dlq", "list", "--state-dir", dir.path()});
  REQUIRE(list.exit_code == 0);
  const json entries = json::parse(list.out)["entries"];
  REQUIRE(entries.size() == 3);
  CHECK(entries[0]["task_id"] == 11);
  CHECK(entries[2]["pool"] == "mail");
  auto show = poolctl(absent, {"--json", "dlq", "show", std::to_string(entries[1]["id"].get<int>()),
                               "--state-dir", dir.path()});
  REQUIRE(show.exit_code == 0);
  CHECK(json::parse(show.out)["payload"] == std::string("binary\0payload 12", 17));

  auto again =
      poolctl(absent, {"--json", "dlq", "--state-dir", dir.path(), "import", file + ".imported"});
  REQUIRE(again.exit_code == 0);
  const json counts = json::parse(again.out);
  CHECK(counts["imported"] == 0);
  CHECK(counts["already_present"] == 3);
  CHECK(counts["file"] == file + ".imported");  // already named so: left as it is
  auto after = poolctl(absent, {"--json", "dlq", "list", "--state-dir", dir.path()});
  CHECK(json::parse(after.out)["entries"].size() == 3);
}

// The spill of a stop on a full disk: task 12's letter is only in the spill file and the
// journal still holds the task open, so it runs again at the next start. Imported offline
// before that start, its letter would sit in the store while the task runs: poold's own import
// skips it, and so does the offline one.
TEST_CASE("dlq import offline skips a letter whose task the journal still holds open") {
  TempDir dir;
  {
    DeadLetterStoreOptions o;
    o.state_dir = dir.path();
    o.journal = TaskJournalOptions{};
    o.logger = std::make_shared<spdlog::logger>("test", spdlog::sinks_init_list{});
    auto store = DeadLetterStore::open(o);
    REQUIRE(store);
    JournalTask t;
    t.task.id = 12;
    t.task.type = "send";
    t.pool = "mail";
    t.payload = "open again";
    std::promise<Status> committed;
    (*store)->journal()->accept({t}, [&](const Status& s) { committed.set_value(s); });
    REQUIRE((*store)->journal()->flush(std::chrono::seconds(60)).is_ok());
    REQUIRE(committed.get_future().get().is_ok());
    REQUIRE((*store)->close().is_ok());
  }
  const std::string file = spill_three(dir.path());
  const std::string absent = dir.path() + "/no.sock";
  auto imported = poolctl(absent, {"dlq", "--state-dir", dir.path(), "import", file});
  INFO(imported.err);
  REQUIRE(imported.exit_code == 0);
  CHECK(imported.out == "2 dead letters imported, 1 already present; " + file + " renamed to " +
                            file + ".imported\n");
  auto list = poolctl(absent, {"--json", "dlq", "list", "--state-dir", dir.path()});
  REQUIRE(list.exit_code == 0);
  const json entries = json::parse(list.out)["entries"];
  REQUIRE(entries.size() == 2);
  CHECK(entries[0]["task_id"] == 11);
  CHECK(entries[1]["task_id"] == 13);

  // The journal itself is consulted, not rewritten: task 12 is still open for the next start.
  DeadLetterStoreOptions o;
  o.state_dir = dir.path();
  o.journal = TaskJournalOptions{};
  o.logger = std::make_shared<spdlog::logger>("test", spdlog::sinks_init_list{});
  auto store = DeadLetterStore::open(o);
  REQUIRE(store);
  auto open = (*store)->journal()->unfinished();
  REQUIRE(open.is_ok());
  REQUIRE(open->size() == 1);
  CHECK(open->front().task.id == 12);
}

TEST_CASE("dlq import of a file with a malformed line names the line and imports nothing") {
  TempDir dir;
  const std::string file = spill_three(dir.path());
  std::string text = *dead_letter_file::read_file(file);
  const auto second_line = text.find('\n') + 1;
  text.insert(second_line, "{\"version\": 1, \"pool\": \"mail\"}\n");  // line 2 of 4
  std::ofstream(file, std::ios::trunc) << text;
  const std::string absent = dir.path() + "/no.sock";
  auto r = poolctl(absent, {"dlq", "--state-dir", dir.path(), "import", file});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find(file + " line 2: missing \"task_id\"") != std::string::npos);
  CHECK(std::filesystem::exists(file));  // not renamed
  auto list = poolctl(absent, {"--json", "dlq", "list", "--state-dir", dir.path()});
  CHECK(json::parse(list.out)["entries"].empty());
}
