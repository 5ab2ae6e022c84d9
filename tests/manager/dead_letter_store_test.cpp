#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>

#include <sandpool/store/dead_letters.hpp>
#include <sandpool/store/sqlite_db.hpp>
#include <sandpool/task/submit_options.hpp>
#include "dead_letter_test_support.hpp"
#include "retry/dead_letter_schema.hpp"

using namespace std::chrono_literals;
using sandpool::Code;
using sandpool::DeadLetter;
using sandpool::DeadLetterFilter;
using sandpool::DeadLetterPage;
using sandpool::DeadLetterStore;
using sandpool::DeadLetterStoreOptions;
using sandpool::DeadReason;
using sandpool::Outcome;
using sandpool::sqlite::SqliteDb;
using namespace sandpool::testing;
namespace fs = std::filesystem;

TEST_CASE(
    "a dead letter with three attempts, a backtrace and a binary payload reads back as written",
    "[dead_letters]") {
  TempDir dir;
  auto store = open_store(options_for(dir));
  DeadLetter in = letter(42, "images", "resize", DeadReason::kRetriesExhausted, 1700000000123);
  in.payload = std::string("\0\x01\xff\0tail\0", 9);
  in.options.timeout = 2500ms;
  in.options.retries = 2;
  in.options.priority = -3;
  in.options.key = "user-7";
  in.task.error = "handler said no";
  in.task.history = {{1, Outcome::kTimedOut, "timed_out after 2500 ms", 101, 10, 2510,
                      "#0 spin+0x1a (libhang.so)\n#1 0x7f00 (sandpool-worker+0x2f00)"},
                     {2, Outcome::kLost, "worker died (SIGSEGV)", 102, 2600, 2700},
                     {3, Outcome::kError, "handler said no", 103, 2800, 2900}};
  write_all(*store, {in});

  auto all = list_all(*store);
  REQUIRE(all.size() == 1);
  auto out = store->get(all[0].letter_id);
  REQUIRE(out.is_ok());
  CHECK(out->letter_id != 0);
  CHECK(out->task.id == 42);
  CHECK(out->task.state == sandpool::TaskState::kDeadLettered);
  CHECK(out->task.type == "resize");
  CHECK(out->task.reason == DeadReason::kRetriesExhausted);
  CHECK(out->task.error == "handler said no");
  CHECK(out->pool == "images");
  CHECK(out->payload == in.payload);
  CHECK(out->payload.size() == 9);
  CHECK(out->options.timeout == 2500ms);
  CHECK(out->options.retries == 2u);
  CHECK(out->options.priority == -3);
  CHECK(out->options.key == "user-7");
  CHECK(out->dead_lettered_ms == 1700000000123);
  REQUIRE(out->task.history.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& a = out->task.history[i];
    const auto& e = in.task.history[i];
    CHECK(a.number == e.number);
    CHECK(a.outcome == e.outcome);
    CHECK(a.error == e.error);
    CHECK(a.worker_pid == e.worker_pid);
    CHECK(a.started_ms == e.started_ms);
    CHECK(a.ended_ms == e.ended_ms);
    CHECK(a.backtrace == e.backtrace);  // the first has one, the others none
  }
  CHECK(store->stats().written == 1);
  CHECK(store->get(out->letter_id + 1000).status().code() == Code::kNotFound);
}

TEST_CASE("options left to the pool's defaults stay unset, and an empty payload stays empty",
          "[dead_letters]") {
  TempDir dir;
  auto store = open_store(options_for(dir));
  DeadLetter in = letter(1);
  in.payload.clear();
  write_all(*store, {in});
  auto all = list_all(*store);
  REQUIRE(all.size() == 1);
  CHECK_FALSE(all[0].options.timeout.has_value());
  CHECK_FALSE(all[0].options.retries.has_value());
  CHECK(all[0].payload.empty());
  CHECK(all[0].task.history.empty());
}

TEST_CASE("the database is a 0600 file in a 0700 state dir, journaled in WAL mode",
          "[dead_letters]") {
  TempDir dir;
  auto store = open_store(options_for(dir));
  write_all(*store, {letter(1)});
  struct stat st {};
  REQUIRE(::stat(dir.state_dir().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  REQUIRE(::stat(store->path().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  REQUIRE(::stat((store->path() + "-wal").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  auto db = raw_connection(store->path());
  CHECK(pragma_text(db, "PRAGMA journal_mode") == "wal");
}

TEST_CASE("a new database carries the current schema version", "[dead_letters]") {
  TempDir dir;
  auto store = open_store(options_for(dir));
  auto db = raw_connection(store->path());
  CHECK(pragma_text(db, "PRAGMA user_version") ==
        std::to_string(sandpool::dead_letter_schema::kVersion));
}

TEST_CASE(
    "a dead letter keeps its tenant, and letters from schema version 3 read as the default tenant",
    "[dead_letters]") {
  TempDir dir;
  REQUIRE(::mkdir(dir.state_dir().c_str(), 0700) == 0);
  const std::string path = dir.state_dir() + "/dead_letters.db";
  {
    // A file as the version before wrote it: dead_letters without a tenant column.
    auto db = raw_connection(path);
    REQUIRE(sandpool::dead_letter_schema::migrate(db, path, 3).is_ok());
    REQUIRE(db.exec(R"sql(
INSERT INTO dead_letters (task_id, pool, type, reason, error, payload, timeout_ms, retries,
  priority, affinity_key, dead_lettered_ms)
VALUES (31, 'images', 'resize', 'retries_exhausted', 'boom', x'7031', 1500, 2, 3, 'user-1', 1000);
)sql",
                    "test: a version 3 letter")
                .is_ok());
    CHECK(pragma_text(db, "PRAGMA user_version") == "3");
  }
  auto store = open_store(options_for(dir));
  {
    auto db = raw_connection(path);
    CHECK(pragma_text(db, "PRAGMA user_version") == "4");
  }
  DeadLetter acme = letter(32);
  acme.options.tenant = "acme";
  acme.task.tenant = "acme";
  write_all(*store, {acme});
  auto letters = list_all(*store);
  REQUIRE(letters.size() == 2);
  CHECK(letters[0].task.id == 31);
  CHECK(letters[0].options.tenant.empty());
  CHECK(letters[0].options.key == "user-1");
  CHECK(letters[0].options.priority == 3);
  CHECK(letters[0].payload == "p1");
  CHECK(letters[1].task.id == 32);
  CHECK(letters[1].options.tenant == "acme");
  CHECK(letters[1].task.tenant == "acme");
  CHECK(sandpool::SubmitOptions::of(letters[1].options).tenant == "acme");
  // A claim (a replay's first step) reads it too.
  auto claimed = store->claim(letters[1].letter_id);
  REQUIRE(claimed.is_ok());
  CHECK(claimed->options.tenant == "acme");
}

TEST_CASE("a database from a newer sandpool is refused with an error naming both versions",
          "[dead_letters]") {
  TempDir dir;
  REQUIRE(::mkdir(dir.state_dir().c_str(), 0700) == 0);
  const std::string path = dir.state_dir() + "/dead_letters.db";
  {
    auto db = raw_connection(path);
    REQUIRE(db.exec("PRAGMA user_version = 99", "test").is_ok());
  }
  auto store = DeadLetterStore::open(options_for(dir));
  REQUIRE_FALSE(store.is_ok());
  CHECK(store.status().code() == Code::kInvalidArgument);
  const std::string msg = store.status().message();
  CHECK_THAT(msg, Catch::Contains("schema version 99") &&
                      Catch::Contains("versions up to " +
                                      std::to_string(sandpool::dead_letter_schema::kVersion)) &&
                      Catch::Contains(path));
  auto db = raw_connection(path);
  CHECK(pragma_text(db, "PRAGMA user_version") == "99");  // untouched
}

TEST_CASE("letters written before close are there after reopening", "[dead_letters]") {
  TempDir dir;
  {
    auto store = open_store(options_for(dir));
    REQUIRE(store->enqueue(letter(1)).is_ok());
    REQUIRE(store->enqueue(letter(2)).is_ok());
    REQUIRE(store->close().is_ok());           // close writes what is pending
    CHECK(store->enqueue(letter(3)).is_ok());  // to a spill file, not the database
    CHECK(store->stats().spilled == 1);
  }
  auto store = open_store(options_for(dir));
  CHECK(task_ids(list_all(*store)) == std::vector<std::uint64_t>{1, 2});
}

namespace {

// Twelve letters over two pools, two types, three reasons and twelve timestamps.
std::vector<DeadLetter> mixed_letters() {
  const DeadReason reasons[] = {DeadReason::kPermanent, DeadReason::kRetriesExhausted,
                                DeadReason::kExpired};
  std::vector<DeadLetter> v;
  for (std::uint64_t i = 0; i < 12; ++i) {
    // Timestamps out of insertion order, with a tie, to exercise the ordering.
    const std::int64_t at = 1000 + static_cast<std::int64_t>((i * 7) % 12) * 10;
    v.push_back(letter(100 + i, i % 2 ? "images" : "mail", i % 3 ? "resize" : "send",
                       reasons[i % 3], i == 11 ? 1000 : at));
  }
  return v;
}

}  // namespace

TEST_CASE("list returns exactly the letters matching each kind of filter, oldest first",
          "[dead_letters]") {
  TempDir dir;
  auto store = open_store(options_for(dir));
  const auto letters = mixed_letters();
  write_all(*store, letters);

  using Pred = std::function<bool(const DeadLetter&)>;
  auto [name, filter, pred] = GENERATE(table<std::string, DeadLetterFilter, Pred>({
      {"none", DeadLetterFilter{}, [](const DeadLetter&) { return true; }},
      {"pool", DeadLetterFilter{"mail", {}, {}, {}, {}, {}},
       [](const DeadLetter& l) { return l.pool == "mail"; }},
      {"type", DeadLetterFilter{{}, "send", {}, {}, {}, {}},
       [](const DeadLetter& l) { return l.task.type == "send"; }},
      {"reason", DeadLetterFilter{{}, {}, DeadReason::kExpired, {}, {}, {}},
       [](const DeadLetter& l) { return l.task.reason == DeadReason::kExpired; }},
      {"task id", DeadLetterFilter{{}, {}, {}, 105, {}, {}},
       [](const DeadLetter& l) { return l.task.id == 105; }},
      {"time range", DeadLetterFilter{{}, {}, {}, {}, 1030, 1080},
       [](const DeadLetter& l) { return l.dead_lettered_ms >= 1030 && l.dead_lettered_ms < 1080; }},
      {"pool and reason", DeadLetterFilter{"images", {}, DeadReason::kPermanent, {}, {}, {}},
       [](const DeadLetter& l) {
         return l.pool == "images" && l.task.reason == DeadReason::kPermanent;
       }},
      {"nothing matches", DeadLetterFilter{"nope", {}, {}, {}, {}, {}},
       [](const DeadLetter&) { return false; }},
  }));
  INFO("filter by " << name);
  std::vector<DeadLetter> expected;
  for (const auto& l : letters) {
    if (pred(l)) expected.push_back(l);
  }
  // Oldest first; ties in insertion (letter id) order.
  std::stable_sort(expected.begin(), expected.end(), [](const auto& a, const auto& b) {
    return a.dead_lettered_ms < b.dead_lettered_ms;
  });
  CHECK(task_ids(list_all(*store, filter)) == task_ids(expected));
}

TEST_CASE("pages of any size cover every matching letter exactly once, in order",
          "[dead_letters]") {
  TempDir dir;
  auto store = open_store(options_for(dir));
  write_all(*store, mixed_letters());
  const auto whole = task_ids(list_all(*store));
  REQUIRE(whole.size() == 12);
  const std::size_t limit = GENERATE(1u, 3u, 5u, 12u, 50u);
  INFO("page size " << limit);
  std::vector<std::uint64_t> seen;
  DeadLetterPage page{limit, std::nullopt};
  for (int pages = 0;; ++pages) {
    REQUIRE(pages <= 12);
    auto got = store->list({}, page);
    REQUIRE(got.is_ok());
    CHECK(got->letters.size() <= limit);
    for (auto id : task_ids(got->letters)) seen.push_back(id);
    if (!got->next) break;
    page.after = got->next;
  }
  CHECK(seen == whole);
  CHECK(store->list({}, DeadLetterPage{0, std::nullopt}).status().code() == Code::kInvalidArgument);
}

TEST_CASE("purge by id, by filter and by age deletes what it says and counts it",
          "[dead_letters]") {
  TempDir dir;
  auto store = open_store(options_for(dir));
  write_all(*store, mixed_letters());
  const auto before = list_all(*store);
  REQUIRE(before.size() == 12);
  const auto first = before.front();

  auto one = store->purge(first.letter_id);
  REQUIRE(one.is_ok());
  CHECK(*one == 1);
  CHECK(store->get(first.letter_id).status().code() == Code::kNotFound);
  CHECK(*store->purge(first.letter_id) == 0);

  auto mail = store->purge(DeadLetterFilter{"mail", {}, {}, {}, {}, {}});
  REQUIRE(mail.is_ok());
  CHECK(*mail == 5);  // six mail letters, one of them purged by id already
  CHECK(list_all(*store, DeadLetterFilter{"mail", {}, {}, {}, {}, {}}).empty());

  auto old = store->purge_older_than(1060);
  REQUIRE(old.is_ok());
  for (const auto& l : list_all(*store)) CHECK(l.dead_lettered_ms >= 1060);
  CHECK(*old + list_all(*store).size() == 6);
  CHECK(*old > 0);
}

TEST_CASE("a purge of more letters than one chunk deletes them all, chunk by chunk",
          "[dead_letters]") {
  TempDir dir;
  auto store = open_store(options_for(dir));
  std::vector<DeadLetter> many;
  for (std::uint64_t id = 1; id <= 600; ++id) many.push_back(letter(id));  // 256 per chunk
  many.push_back(letter(601, "mail"));
  write_all(*store, many);
  auto purged = store->purge(DeadLetterFilter{"images", {}, {}, {}, {}, {}});
  REQUIRE(purged.is_ok());
  CHECK(*purged == 600);
  CHECK(task_ids(list_all(*store)) == std::vector<std::uint64_t>{601});
}

TEST_CASE("a replayed letter is removed once, a second removal reports it gone", "[dead_letters]") {
  TempDir dir;
  auto store = open_store(options_for(dir));
  write_all(*store, {letter(7), letter(8)});
  const auto all = list_all(*store);
  REQUIRE(store->remove_replayed(all[0].letter_id).is_ok());
  CHECK(store->remove_replayed(all[0].letter_id).code() == Code::kNotFound);
  CHECK(task_ids(list_all(*store)) == std::vector<std::uint64_t>{8});
}

TEST_CASE("beyond max_count the oldest letters are deleted after each write", "[dead_letters]") {
  TempDir dir;
  auto o = options_for(dir);
  o.max_count = 5;
  auto store = open_store(o);
  std::vector<DeadLetter> v;
  for (std::uint64_t i = 1; i <= 8; ++i)
    v.push_back(letter(i, "p", "t", DeadReason::kPermanent, static_cast<std::int64_t>(i) * 100));
  write_all(*store, v);
  CHECK(task_ids(list_all(*store)) == std::vector<std::uint64_t>{4, 5, 6, 7, 8});
  CHECK(store->stats().evicted == 3);
}

TEST_CASE("letters older than max_age are deleted after the next write", "[dead_letters]") {
  TempDir dir;
  std::atomic<std::int64_t> now{10'000};
  auto o = options_for(dir);
  o.max_age = 1000ms;
  o.now_ms = [&] { return now.load(); };
  auto store = open_store(o);
  DeadLetter stamped_now = letter(1);
  stamped_now.dead_lettered_ms = 0;  // the store stamps it with its clock: 10000
  write_all(*store, {stamped_now, letter(2, "p", "t", DeadReason::kPermanent, 9'500)});
  CHECK(task_ids(list_all(*store)) == std::vector<std::uint64_t>{2, 1});
  now = 10'600;  // letter 2 is now 1100 ms old, letter 1 600 ms
  write_all(*store, {letter(3, "p", "t", DeadReason::kPermanent, 10'600)});
  CHECK(task_ids(list_all(*store)) == std::vector<std::uint64_t>{1, 3});
  CHECK(store->stats().evicted == 1);
}

TEST_CASE(
    "while another connection holds the write lock, letters wait in memory and are "
    "written once it is released",
    "[dead_letters]") {
  TempDir dir;
  auto o = options_for(dir);
  o.busy_timeout = 20ms;
  auto store = open_store(o);
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN EXCLUSIVE", "test lock").is_ok());

  for (std::uint64_t i = 1; i <= 3; ++i) REQUIRE(store->enqueue(letter(i)).is_ok());
  REQUIRE(eventually([&] { return store->stats().write_errors >= 2; }));  // retried, too
  auto during = store->stats();
  CHECK(during.pending == 3);
  CHECK(during.written == 0);
  CHECK(store->flush(10ms).code() == Code::kTimeout);

  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  REQUIRE(store->flush(30s).is_ok());
  auto after = store->stats();
  CHECK(after.pending == 0);
  CHECK(after.written == 3);
  CHECK(after.spilled == 0);
  CHECK_FALSE(after.writes_failing);
  CHECK(task_ids(list_all(*store)) == std::vector<std::uint64_t>{1, 2, 3});
}

TEST_CASE("a store that cannot write keeps every letter it is given, with no bound refusing one",
          "[dead_letters]") {
  TempDir dir;
  auto o = options_for(dir);
  o.busy_timeout = 10ms;
  auto store = open_store(o);
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN EXCLUSIVE", "test lock").is_ok());
  // Beyond the 100,000 letters the store used to refuse past.
  constexpr std::uint64_t kLetters = 100'500;
  for (std::uint64_t i = 1; i <= kLetters; ++i) {
    DeadLetter l = letter(i);
    l.payload.clear();
    REQUIRE(store->enqueue(std::move(l)).is_ok());
  }
  CHECK(store->stats().pending == kLetters);
  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  REQUIRE(store->flush(300s).is_ok());
  CHECK(store->stats().written == kLetters);
}

TEST_CASE("a burst of 10,000 letters is written in far fewer transactions, all readable",
          "[dead_letters]") {
  TempDir dir;
  auto store = open_store(options_for(dir));
  constexpr std::uint64_t kBurst = 10'000;
  for (std::uint64_t i = 1; i <= kBurst; ++i) {
    REQUIRE(store->enqueue(letter(i, "p", "t", DeadReason::kPermanent, 5000)).is_ok());
  }
  REQUIRE(store->flush(120s).is_ok());
  const auto s = store->stats();
  CHECK(s.written == kBurst);
  CHECK(s.transactions <= kBurst / 10);
  std::set<std::uint64_t> ids;
  DeadLetterPage page{1000, std::nullopt};
  for (;;) {
    auto got = store->list({}, page);
    REQUIRE(got.is_ok());
    for (auto id : task_ids(got->letters)) ids.insert(id);
    if (!got->next) break;
    page.after = got->next;
  }
  CHECK(ids.size() == kBurst);
  CHECK(*ids.begin() == 1);
  CHECK(*ids.rbegin() == kBurst);
}

TEST_CASE(
    "close stops retrying after close_timeout when the database stays locked, spills the "
    "letter and says where",
    "[dead_letters]") {
  TempDir dir;
  auto o = options_for(dir);
  o.busy_timeout = 10ms;
  o.close_timeout = 100ms;
  auto store = open_store(o);
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN EXCLUSIVE", "test lock").is_ok());
  REQUIRE(store->enqueue(letter(1)).is_ok());
  const auto closed = store->close();
  CHECK(closed.code() == Code::kTimeout);
  const auto s = store->stats();
  REQUIRE(s.recent_spill_files.size() == 1);
  CHECK_THAT(closed.message(), Catch::Contains("1 letters could not be written") &&
                                   Catch::Contains(s.recent_spill_files[0]));
  CHECK(s.spilled == 1);
  CHECK(s.lost == 0);
  CHECK(s.pending == 0);
  CHECK(store->close().code() == Code::kTimeout);  // idempotent
}
