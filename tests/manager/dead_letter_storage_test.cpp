// What the dead-letter store promises about its files, observed from outside the store: a
// commit reaches the disk before flush() returns (PRAGMA synchronous = FULL: the WAL is
// synced at each commit, seen through a counting SQLite VFS), the WAL index (-shm) is as
// private as the database, and a letter's attempts leave with it however it is deleted
// (ON DELETE CASCADE, which SQLite enforces only with PRAGMA foreign_keys = ON).
#include <sqlite3.h>
#include <sys/stat.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include <sandpool/store/dead_letters.hpp>

using namespace std::chrono_literals;
using sandpool::DeadLetter;
using sandpool::DeadLetterFilter;
using sandpool::DeadLetterStore;
using sandpool::DeadLetterStoreOptions;
using sandpool::DeadReason;
using sandpool::Outcome;

namespace {

struct StorageDir {
  StorageDir() {
    char tmpl[] = "/tmp/sp-dead-letter-storage-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~StorageDir() { std::filesystem::remove_all(path); }
  std::string state_dir() const { return path + "/state"; }
  std::string path;
};

std::unique_ptr<DeadLetterStore> open_storage(const StorageDir& dir, std::uint64_t max_count = 0) {
  DeadLetterStoreOptions o;
  o.state_dir = dir.state_dir();
  o.max_count = max_count;
  o.max_age = 0ms;  // the letters carry fixed old timestamps
  auto store = DeadLetterStore::open(std::move(o));
  INFO(store.status().to_string());
  REQUIRE(store.is_ok());
  return std::move(store).value();
}

// A letter with `attempts` attempts, dead-lettered at `at_ms`.
DeadLetter attempted_letter(std::uint64_t task_id, std::string pool, int attempts,
                            std::int64_t at_ms) {
  DeadLetter l;
  l.task.id = task_id;
  l.task.type = "resize";
  l.task.reason = DeadReason::kRetriesExhausted;
  l.task.error = "boom";
  for (int i = 1; i <= attempts; ++i) {
    l.task.history.push_back({static_cast<std::uint32_t>(i), Outcome::kLost, "worker died", 100 + i,
                              10L * i, 10L * i + 5});
  }
  l.pool = std::move(pool);
  l.payload = "payload";
  l.dead_lettered_ms = at_ms;
  return l;
}

void write_letters(DeadLetterStore& store, std::vector<DeadLetter> letters) {
  for (auto& l : letters) REQUIRE(store.enqueue(std::move(l)).is_ok());
  const auto flushed = store.flush(30s);
  INFO(flushed.to_string());
  REQUIRE(flushed.is_ok());
}

// Runs a one-number query on its own read-only connection (not the store's).
std::int64_t count(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
  const std::int64_t n = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return n;
}

std::uint32_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// A SQLite VFS over the default one that counts xSync on write-ahead-log files. Registered
// as the default VFS while it lives, so the store's connections open through it. One at a
// time; not thread-safe to construct or destroy; the counts may be read from any thread.
class WalSyncCounter {
 public:
  WalSyncCounter();
  ~WalSyncCounter();
  WalSyncCounter(const WalSyncCounter&) = delete;
  WalSyncCounter& operator=(const WalSyncCounter&) = delete;

  int wal_syncs() const { return wal_syncs_.load(); }
  int wal_opens() const { return wal_opens_.load(); }

  // Our file header; the real VFS's file follows it in the same allocation.
  struct File {
    sqlite3_file base;
    sqlite3_file* real;
    bool wal;
  };
  static inline WalSyncCounter* instance = nullptr;
  sqlite3_vfs* real_vfs = nullptr;
  std::atomic<int> wal_syncs_{0}, wal_opens_{0};

 private:
  sqlite3_vfs vfs_{};
};

sqlite3_file* real_of(sqlite3_file* f) { return reinterpret_cast<WalSyncCounter::File*>(f)->real; }
const sqlite3_io_methods* real_methods(sqlite3_file* f) { return real_of(f)->pMethods; }

int counting_sync(sqlite3_file* f, int flags) {
  if (reinterpret_cast<WalSyncCounter::File*>(f)->wal) {
    WalSyncCounter::instance->wal_syncs_.fetch_add(1);
  }
  return real_methods(f)->xSync(real_of(f), flags);
}

// Every method but xSync forwards to the real file.
const sqlite3_io_methods kCountingMethods = {
    3,
    [](sqlite3_file* f) { return real_methods(f)->xClose(real_of(f)); },
    [](sqlite3_file* f, void* b, int n, sqlite3_int64 o) {
      return real_methods(f)->xRead(real_of(f), b, n, o);
    },
    [](sqlite3_file* f, const void* b, int n, sqlite3_int64 o) {
      return real_methods(f)->xWrite(real_of(f), b, n, o);
    },
    [](sqlite3_file* f, sqlite3_int64 size) {
      return real_methods(f)->xTruncate(real_of(f), size);
    },
    &counting_sync,
    [](sqlite3_file* f, sqlite3_int64* size) {
      return real_methods(f)->xFileSize(real_of(f), size);
    },
    [](sqlite3_file* f, int lock) { return real_methods(f)->xLock(real_of(f), lock); },
    [](sqlite3_file* f, int lock) { return real_methods(f)->xUnlock(real_of(f), lock); },
    [](sqlite3_file* f, int* out) { return real_methods(f)->xCheckReservedLock(real_of(f), out); },
    [](sqlite3_file* f, int op, void* arg) {
      return real_methods(f)->xFileControl(real_of(f), op, arg);
    },
    [](sqlite3_file* f) { return real_methods(f)->xSectorSize(real_of(f)); },
    [](sqlite3_file* f) { return real_methods(f)->xDeviceCharacteristics(real_of(f)); },
    [](sqlite3_file* f, int page, int size, int extend, void volatile** out) {
      return real_methods(f)->xShmMap(real_of(f), page, size, extend, out);
    },
    [](sqlite3_file* f, int offset, int n, int flags) {
      return real_methods(f)->xShmLock(real_of(f), offset, n, flags);
    },
    [](sqlite3_file* f) { real_methods(f)->xShmBarrier(real_of(f)); },
    [](sqlite3_file* f, int remove) { return real_methods(f)->xShmUnmap(real_of(f), remove); },
    [](sqlite3_file* f, sqlite3_int64 offset, int n, void** out) {
      return real_methods(f)->xFetch(real_of(f), offset, n, out);
    },
    [](sqlite3_file* f, sqlite3_int64 offset, void* p) {
      return real_methods(f)->xUnfetch(real_of(f), offset, p);
    },
};

int counting_open(sqlite3_vfs*, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  WalSyncCounter& counter = *WalSyncCounter::instance;
  auto* f = reinterpret_cast<WalSyncCounter::File*>(file);
  f->real =
      reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + sizeof(WalSyncCounter::File));
  f->wal = (flags & SQLITE_OPEN_WAL) != 0;
  const int rc = counter.real_vfs->xOpen(counter.real_vfs, name, f->real, flags, out_flags);
  // SQLite calls xClose only on a file whose pMethods is set.
  const bool opened = rc == SQLITE_OK && f->real->pMethods != nullptr;
  f->base.pMethods = opened ? &kCountingMethods : nullptr;
  if (opened && f->wal) counter.wal_opens_.fetch_add(1);
  return rc;
}

WalSyncCounter::WalSyncCounter() {
  static_assert(sizeof(File) % 8 == 0);
  real_vfs = sqlite3_vfs_find(nullptr);
  REQUIRE(real_vfs != nullptr);
  vfs_ = *real_vfs;  // every method but xOpen is the real one
  vfs_.zName = "sp-wal-sync-counter";
  vfs_.szOsFile = static_cast<int>(sizeof(File)) + real_vfs->szOsFile;
  vfs_.xOpen = &counting_open;
  instance = this;
  REQUIRE(sqlite3_vfs_register(&vfs_, 1) == SQLITE_OK);
}

WalSyncCounter::~WalSyncCounter() {
  sqlite3_vfs_unregister(&vfs_);
  sqlite3_vfs_register(real_vfs, 1);
  instance = nullptr;
}

}  // namespace

TEST_CASE("each committed batch of letters is synced to disk before flush returns",
          "[dead_letters]") {
  StorageDir dir;
  WalSyncCounter counter;
  auto store = open_storage(dir);
  REQUIRE(counter.wal_opens() >= 1);  // the store's connections do go through the counter
  for (std::uint64_t i = 1; i <= 3; ++i) {
    const int before = counter.wal_syncs();
    write_letters(*store, {attempted_letter(i, "images", 1, 1000)});
    // synchronous = FULL: the WAL is synced at every commit. (NORMAL syncs it only at a
    // checkpoint, which one small letter never triggers: a power cut would lose it.)
    CHECK(counter.wal_syncs() > before);
  }
  REQUIRE(store->close().is_ok());
}

TEST_CASE("the WAL and its index (-shm) are 0600 like the database, whatever the umask",
          "[dead_letters]") {
  StorageDir dir;
  const mode_t old_umask = ::umask(0);
  auto store = open_storage(dir);
  write_letters(*store, {attempted_letter(1, "images", 1, 1000)});
  ::umask(old_umask);
  CHECK(mode_of(store->path()) == 0600);
  CHECK(mode_of(store->path() + "-wal") == 0600);
  CHECK(mode_of(store->path() + "-shm") == 0600);
}

TEST_CASE("a letter's attempts leave with it: purged by id, by filter, by age or by retention",
          "[dead_letters]") {
  StorageDir dir;
  auto store = open_storage(dir, /*max_count=*/4);
  const std::string db = store->path();
  const auto attempts_of = [&](std::uint64_t letter_id) {
    return count(db,
                 "SELECT count(*) FROM attempts WHERE letter_id = " + std::to_string(letter_id));
  };
  write_letters(*store,
                {attempted_letter(1, "images", 3, 1000), attempted_letter(2, "mail", 2, 1001),
                 attempted_letter(3, "images", 1, 1002), attempted_letter(4, "images", 2, 5000)});
  REQUIRE(count(db, "SELECT count(*) FROM attempts") == 8);
  const auto all = store->list({}, {100, std::nullopt});
  REQUIRE(all.is_ok());
  REQUIRE(all->letters.size() == 4);
  const std::uint64_t first = all->letters[0].letter_id, second = all->letters[1].letter_id,
                      third = all->letters[2].letter_id, fourth = all->letters[3].letter_id;
  REQUIRE(attempts_of(first) == 3);

  REQUIRE(*store->purge(first) == 1);
  CHECK(attempts_of(first) == 0);
  CHECK(count(db, "SELECT count(*) FROM attempts") == 5);

  DeadLetterFilter mail;
  mail.pool = "mail";
  REQUIRE(*store->purge(mail) == 1);
  CHECK(attempts_of(second) == 0);
  CHECK(count(db, "SELECT count(*) FROM attempts") == 3);

  REQUIRE(*store->purge_older_than(2000) == 1);
  CHECK(attempts_of(third) == 0);
  CHECK(count(db, "SELECT count(*) FROM attempts") == 2);

  // Retention: beyond max_count (4) the oldest letter goes at the next write, attempts too.
  write_letters(*store,
                {attempted_letter(5, "images", 1, 5001), attempted_letter(6, "images", 1, 5002),
                 attempted_letter(7, "images", 1, 5003), attempted_letter(8, "images", 1, 5004)});
  CHECK(attempts_of(fourth) == 0);
  CHECK(count(db, "SELECT count(*) FROM dead_letters") == 4);
  CHECK(count(db, "SELECT count(*) FROM attempts") == 4);
  CHECK(count(db,
              "SELECT count(*) FROM attempts WHERE letter_id NOT IN"
              " (SELECT letter_id FROM dead_letters)") == 0);
}
