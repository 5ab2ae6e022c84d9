// When a dead letter counts as written (docs/dead-letters.md, "Durability"): on_written
// comes only after the commit; a store that cannot write (locked, disk full, corrupt) keeps
// every letter and says why; a letter the database refuses on its own is spilled
// alone; close() spills what is left, whole, and import_letters() brings it back once.
// Real SQLite files; the disk-full cases on a real tmpfs in a private mount namespace.
#include <sys/stat.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include <sandpool/store/dead_letter_file.hpp>
#include <sandpool/store/dead_letters.hpp>

#include "dead_letter_test_support.hpp"
#include "private_tmpfs.hpp"

using namespace sandpool;
using namespace sandpool::testing;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t k200KiB = 200 * 1024;

// A payload of `size` bytes that differs per task (all 256 byte values occur).
std::string payload_of(std::uint64_t task_id, std::size_t size) {
  std::string p(size, '\0');
  for (std::size_t i = 0; i < size; ++i) p[i] = static_cast<char>((i * 131 + task_id * 7) & 0xff);
  return p;
}

// A letter with everything a replay needs set, odd bytes included.
DeadLetter rich_letter(std::uint64_t task_id) {
  DeadLetter l = letter(task_id, "images", "resize", DeadReason::kCrashLoop, 1700000000000);
  l.payload = payload_of(task_id, 1000 + task_id);
  l.task.error = std::string("bad byte \xff in the error of ") + std::to_string(task_id);
  l.options.timeout = std::chrono::milliseconds(2500 + task_id);
  if (task_id % 2 == 0) l.options.retries = 4;
  l.options.priority = -static_cast<std::int32_t>(task_id);
  l.options.key = "user-" + std::to_string(task_id);
  l.task.history = {{1, Outcome::kTimedOut, "timed out", 101, 10, 2510, "#0 spin\n#1 main"},
                    {2, Outcome::kLost, "worker died (SIGSEGV)", 102, 2600, 2700}};
  return l;
}

void check_same_letter(const DeadLetter& got, const DeadLetter& want) {
  INFO("task " << want.task.id);
  CHECK(got.pool == want.pool);
  CHECK(got.task.id == want.task.id);
  CHECK(got.task.type == want.task.type);
  CHECK(got.task.reason == want.task.reason);
  CHECK(got.task.error == want.task.error);
  CHECK(got.payload == want.payload);
  CHECK(got.options.timeout == want.options.timeout);
  CHECK(got.options.retries == want.options.retries);
  CHECK(got.options.priority == want.options.priority);
  CHECK(got.options.key == want.options.key);
  CHECK(got.dead_lettered_ms == want.dead_lettered_ms);
  REQUIRE(got.task.history.size() == want.task.history.size());
  for (std::size_t i = 0; i < want.task.history.size(); ++i) {
    const Attempt& a = got.task.history[i];
    const Attempt& e = want.task.history[i];
    CHECK(a.number == e.number);
    CHECK(a.outcome == e.outcome);
    CHECK(a.error == e.error);
    CHECK(a.worker_pid == e.worker_pid);
    CHECK(a.started_ms == e.started_ms);
    CHECK(a.ended_ms == e.ended_ms);
    CHECK(a.backtrace == e.backtrace);
  }
}

// Returns how many rows of dead_letters have this letter id, read on a connection of its own.
std::int64_t rows_with_id(const std::string& db_path, std::uint64_t letter_id) {
  auto db = raw_connection(db_path);
  auto stmt = db.prepare("SELECT count(*) FROM dead_letters WHERE letter_id = ?1", "test count");
  REQUIRE(stmt.is_ok());
  sqlite::StmtRef s(*stmt);
  s->bind(1, static_cast<std::int64_t>(letter_id));
  REQUIRE(s->step() == SQLITE_ROW);
  return s->int64(0);
}

std::vector<std::string> spill_files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(std::string(dead_letter_file::kSpillPrefix), 0) == 0) {
      out.push_back(e.path().string());
    }
  }
  return out;
}

std::vector<DeadLetter> read_spill(const std::string& path) {
  auto text = dead_letter_file::read_file(path);
  REQUIRE(text.is_ok());
  auto letters = dead_letter_file::parse(*text, path);
  INFO(letters.status().to_string());
  REQUIRE(letters.is_ok());
  return *letters;
}

}  // namespace

TEST_CASE("on_written never runs before the letter is committed", "[dead_letters]") {
  TempDir dir;
  auto o = options_for(dir);
  o.busy_timeout = 10ms;
  auto store = open_store(o);
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());

  std::atomic<int> calls{0};
  std::atomic<std::uint64_t> letter_id{0};
  std::atomic<std::int64_t> rows_seen_in_callback{-1};
  REQUIRE(store
              ->enqueue(letter(1),
                        [&](const LetterReceipt& r) {
                          // Another connection already sees the row: it is committed.
                          rows_seen_in_callback = rows_with_id(store->path(), r.letter_id);
                          letter_id = r.letter_id;
                          ++calls;
                        })
              .is_ok());
  REQUIRE(eventually([&] { return store->stats().write_errors >= 3; }));
  CHECK(calls == 0);
  const auto during = store->stats();
  CHECK(during.pending == 1);
  CHECK(during.writes_failing);
  CHECK_THAT(during.last_write_error, Catch::Contains("locked"));
  CHECK(list_all(*store).empty());

  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  REQUIRE(eventually([&] { return calls == 1; }));
  CHECK(letter_id > 0);
  CHECK(rows_seen_in_callback == 1);
  auto got = store->get(letter_id);
  REQUIRE(got.is_ok());
  CHECK(got->task.id == 1);
  CHECK_FALSE(store->stats().writes_failing);
  REQUIRE(store->close().is_ok());
  CHECK(calls == 1);  // exactly once
}

TEST_CASE("the log says once that writes fail and once that they recovered, not per retry",
          "[dead_letters]") {
  TempDir dir;
  auto [log, lines] = CapturedLog::make();
  auto o = options_for(dir);
  o.busy_timeout = 5ms;
  o.retry_max = 5ms;
  o.logger = log;
  auto store = open_store(o);
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());
  REQUIRE(store->enqueue(letter(1)).is_ok());
  REQUIRE(eventually([&] { return store->stats().write_errors >= 10; }));
  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  REQUIRE(store->flush(60s).is_ok());
  const auto failing = lines->matching("writes failing");
  REQUIRE(failing.size() == 1);
  CHECK_THAT(failing[0], Catch::Contains("1 letters wait") && Catch::Contains("locked"));
  CHECK(lines->matching("writes recovered").size() == 1);
}

TEST_CASE(
    "on a full disk 40 letters of 200 KB wait with the reason in stats, and are all "
    "committed once space is freed",
    "[dead_letters][disk]") {
  PrivateTmpfs disk(48 << 20);
  auto o = options_in(disk.path() + "/state");
  auto store = open_store(o);
  REQUIRE(disk.fill() > 0);

  Receipts receipts;
  std::vector<DeadLetter> sent;
  for (std::uint64_t i = 1; i <= 40; ++i) {
    DeadLetter l = letter(i);
    l.payload = payload_of(i, k200KiB);
    sent.push_back(l);
    REQUIRE(store->enqueue(std::move(l), receipts.for_task(i)).is_ok());
  }
  REQUIRE(eventually([&] { return store->stats().write_errors >= 3; }));
  const auto full = store->stats();
  CHECK(full.pending == 40);
  CHECK(full.written == 0);
  CHECK(full.writes_failing);
  CHECK_THAT(full.last_write_error, Catch::Contains("full"));
  CHECK(full.oldest_pending_ms > 0);
  CHECK(receipts.size() == 0);

  disk.free_filler();
  REQUIRE(store->flush(120s).is_ok());
  const auto after = store->stats();
  CHECK(after.pending == 0);
  CHECK(after.written == 40);
  CHECK(after.spilled == 0);
  CHECK_FALSE(after.writes_failing);
  std::set<std::uint64_t> ids;
  for (const auto& [task, r] : receipts.all()) {
    CHECK(r.letter_id > 0);
    CHECK(r.spill_file.empty());
    ids.insert(r.letter_id);
  }
  CHECK(ids.size() == 40);
  const auto stored = list_all(*store);
  REQUIRE(stored.size() == 40);
  for (const DeadLetter& l : stored) check_same_letter(l, sent[l.task.id - 1]);
}

TEST_CASE("a database that reads as corrupt keeps letters pending until it is repaired",
          "[dead_letters]") {
  TempDir dir;
  auto store = open_store(options_for(dir));
  write_all(*store, {letter(1)});
  // Break the table's entry in the schema (and make every connection reload it): SQLite then
  // answers SQLITE_CORRUPT, "malformed database schema", to every statement on the table.
  // The repair waits for the lock: the store's writer retries its pending letters meanwhile
  // (with busy_timeout 0 the UPDATE failed SQLITE_BUSY 1 in 40 under ASan and a CPU hog).
  const auto rewrite_schema = [&](const std::string& sql) {
    auto db = raw_connection(store->path(), 60'000);
    REQUIRE(db.exec("PRAGMA writable_schema = ON", "test").is_ok());
    const std::string version = pragma_text(db, "PRAGMA schema_version");
    auto stmt = db.prepare("UPDATE sqlite_master SET sql = ?1 WHERE name = 'dead_letters'", "test");
    REQUIRE(stmt.is_ok());
    {
      sqlite::StmtRef s(*stmt);
      s->bind_text(1, sql);
      REQUIRE(s->step() == SQLITE_DONE);
    }
    const std::string bump = "PRAGMA schema_version = " + std::to_string(std::stoll(version) + 1);
    REQUIRE(db.exec(bump.c_str(), "test").is_ok());
  };
  std::string table_sql;
  {
    auto db = raw_connection(store->path());
    table_sql = pragma_text(db, "SELECT sql FROM sqlite_master WHERE name = 'dead_letters'");
  }
  rewrite_schema(table_sql.substr(0, table_sql.size() / 2));
  for (std::uint64_t i = 2; i <= 4; ++i) REQUIRE(store->enqueue(letter(i)).is_ok());
  REQUIRE(eventually([&] { return store->stats().write_errors >= 3; }));
  const auto s = store->stats();
  CHECK(s.pending == 3);
  CHECK(s.writes_failing);
  CHECK_THAT(s.last_write_error, Catch::Contains("malformed database schema"));
  CHECK(s.spilled == 0);
  rewrite_schema(table_sql);
  REQUIRE(store->flush(60s).is_ok());
  CHECK(task_ids(list_all(*store)) == std::vector<std::uint64_t>{1, 2, 3, 4});
}

TEST_CASE("a letter the database refuses for good is spilled alone while the others commit",
          "[dead_letters]") {
  // A trigger makes SQLite refuse the letters of type "poison": with a constraint error
  // (the letter's fault, by its code), or with a runtime error that says nothing about whose
  // fault it is (found out because the other letters of the batch commit).
  const char* trigger = GENERATE(
      "CREATE TRIGGER poison BEFORE INSERT ON dead_letters WHEN NEW.type = 'poison'"
      " BEGIN SELECT RAISE(ABORT, 'poison refused'); END",
      "CREATE TRIGGER poison BEFORE INSERT ON dead_letters WHEN NEW.type = 'poison'"
      " BEGIN SELECT json('{not json'); END");
  INFO(trigger);
  TempDir dir;
  auto o = options_for(dir);
  o.busy_timeout = 10ms;
  auto store = open_store(o);
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec(trigger, "test trigger").is_ok());
  // Held while enqueueing, so that all five letters meet in one batch.
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());
  Receipts receipts;
  for (std::uint64_t i = 1; i <= 5; ++i) {
    REQUIRE(store->enqueue(letter(i, "images", i == 3 ? "poison" : "resize"), receipts.for_task(i))
                .is_ok());
  }
  REQUIRE(eventually([&] { return store->stats().write_errors >= 1; }));
  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  REQUIRE(store->flush(60s).is_ok());

  CHECK(task_ids(list_all(*store)) == std::vector<std::uint64_t>{1, 2, 4, 5});
  const auto s = store->stats();
  CHECK(s.written == 4);
  CHECK(s.spilled == 1);
  CHECK(s.lost == 0);
  REQUIRE(s.recent_spill_files.size() == 1);
  const auto spilled = read_spill(s.recent_spill_files[0]);
  REQUIRE(spilled.size() == 1);
  CHECK(spilled[0].task.id == 3);
  CHECK(spilled[0].task.type == "poison");
  REQUIRE(receipts.size() == 5);
  for (const auto& [task, r] : receipts.all()) {
    INFO("task " << task);
    if (task == 3) {
      CHECK(r.letter_id == 0);
      CHECK(r.spill_file == s.recent_spill_files[0]);
    } else {
      CHECK(r.letter_id > 0);
      CHECK(r.spill_file.empty());
    }
  }
}

TEST_CASE(
    "close spills the letters it could not write, whole, to one file its receipts name, and "
    "importing it twice stores them once",
    "[dead_letters]") {
  TempDir dir;
  auto o = options_for(dir);
  o.busy_timeout = 10ms;
  o.close_timeout = 200ms;
  auto store = open_store(o);
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());
  Receipts receipts;
  std::vector<DeadLetter> sent;
  for (std::uint64_t i = 1; i <= 5; ++i) {
    sent.push_back(rich_letter(i));
    REQUIRE(store->enqueue(rich_letter(i), receipts.for_task(i)).is_ok());
  }
  REQUIRE(eventually([&] { return store->stats().write_errors >= 1; }));
  const Status closed = store->close();
  CHECK(closed.code() == Code::kTimeout);

  const auto files = spill_files_in(dir.state_dir());
  REQUIRE(files.size() == 1);
  const std::string file = files[0];
  CHECK_THAT(closed.message(), Catch::Contains(file));
  CHECK_THAT(file, Catch::EndsWith(".jsonl"));
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  REQUIRE(receipts.size() == 5);
  for (const auto& [task, r] : receipts.all()) {
    CHECK(r.letter_id == 0);
    CHECK(r.spill_file == file);
    CHECK(r.lost.empty());
  }
  const auto s = store->stats();
  CHECK(s.spilled == 5);
  CHECK(s.spill_files == 1);
  CHECK(s.pending == 0);
  CHECK(s.lost == 0);

  const auto spilled = read_spill(file);
  REQUIRE(spilled.size() == 5);
  for (std::size_t i = 0; i < 5; ++i) check_same_letter(spilled[i], sent[i]);

  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  auto again = open_store(o);
  auto first = again->import_letters(spilled);
  REQUIRE(first.is_ok());
  CHECK(first->imported == 5);
  CHECK(first->already_present == 0);
  auto second = again->import_letters(spilled);
  REQUIRE(second.is_ok());
  CHECK(second->imported == 0);
  CHECK(second->already_present == 5);
  const auto stored = list_all(*again);
  REQUIRE(stored.size() == 5);
  for (const DeadLetter& l : stored) check_same_letter(l, sent[l.task.id - 1]);
}

TEST_CASE("a letter enqueued after close goes to a spill file before enqueue returns",
          "[dead_letters]") {
  TempDir dir;
  auto store = open_store(options_for(dir));
  REQUIRE(store->close().is_ok());
  LetterReceipt receipt;
  int calls = 0;
  REQUIRE(store
              ->enqueue(rich_letter(9),
                        [&](const LetterReceipt& r) {
                          receipt = r;
                          ++calls;
                        })
              .is_ok());
  REQUIRE(calls == 1);
  CHECK(receipt.letter_id == 0);
  REQUIRE_FALSE(receipt.spill_file.empty());
  const auto spilled = read_spill(receipt.spill_file);
  REQUIRE(spilled.size() == 1);
  check_same_letter(spilled[0], rich_letter(9));
  CHECK(list_all(*store).empty());
}

TEST_CASE("an import with a letter SQLite refuses imports nothing", "[dead_letters]") {
  TempDir dir;
  auto store = open_store(options_for(dir));
  auto db = raw_connection(store->path());
  REQUIRE(db.exec("CREATE TRIGGER poison BEFORE INSERT ON dead_letters WHEN NEW.type = 'poison'"
                  " BEGIN SELECT RAISE(ABORT, 'poison refused'); END",
                  "test trigger")
              .is_ok());
  auto r = store->import_letters({letter(1), letter(2, "images", "poison"), letter(3)});
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(),
             Catch::Contains("nothing imported") && Catch::Contains("task 2 of pool images"));
  CHECK(list_all(*store).empty());
}

TEST_CASE(
    "when even the spill cannot be written, close loses the letters loudly and every "
    "receipt says why",
    "[dead_letters][disk]") {
  PrivateTmpfs disk(16 << 20);
  auto [log, lines] = CapturedLog::make();
  auto o = options_in(disk.path() + "/state");
  o.close_timeout = 200ms;
  o.logger = log;
  auto store = open_store(o);
  REQUIRE(disk.fill() > 0);
  Receipts receipts;
  for (std::uint64_t i = 1; i <= 3; ++i) {
    DeadLetter l = letter(i);
    l.payload = payload_of(i, k200KiB);
    REQUIRE(store->enqueue(std::move(l), receipts.for_task(i)).is_ok());
  }
  REQUIRE(eventually([&] { return store->stats().write_errors >= 1; }));
  const Status closed = store->close();
  CHECK(closed.code() == Code::kSystem);
  CHECK_THAT(closed.message(), Catch::Contains("3 letters lost"));
  CHECK(store->stats().lost == 3);
  CHECK(store->stats().spilled == 0);
  REQUIRE(receipts.size() == 3);
  for (const auto& [task, r] : receipts.all()) {
    CHECK(r.letter_id == 0);
    CHECK(r.spill_file.empty());
    CHECK_THAT(r.lost, Catch::Contains("No space left on device"));
  }
  const auto loud = lines->matching("DEAD LETTERS LOST");
  REQUIRE(loud.size() == 1);
  CHECK_THAT(loud[0], Catch::Contains("3 DEAD LETTERS LOST") &&
                          Catch::Contains("No space left on device") &&
                          Catch::Contains("tasks=\"images/1 images/2 images/3\""));
  CHECK(spill_files_in(disk.path() + "/state").empty());  // no partial file left behind
}
