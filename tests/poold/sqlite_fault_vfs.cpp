// The fault seam of poold's SQLite layer, as SQLite's own crash tests do it (test_vfs.c,
// crashtest): a VFS that wraps the default "unix" VFS, counts the process's write points and
// stops or fails the process at the Nth. Linked only into the test executable `poold_faults`
// (poold's own main and libraries plus this file); the product never carries it. It registers
// itself as SQLite's default VFS from a static initializer, before main() and so before
// anything opens a database.
//
// A write point is one xWrite, xSync or xTruncate on a database file, its WAL or its rollback
// journal (not the -shm index, which SQLite maps, nor temporary files). poold opens one
// database, <state_dir>/dead_letters.db, holding the journal and the dead letters alike, so
// the dead-letter store's writes are write points too: a letter and a task's end share one
// transaction, and a crash between their writes is what the seam is for. Both threads that
// write (the store's writer, sp-dlq, and the checkpointer, sp-checkpoint) count in one
// sequence, under a mutex.
//
// Configured by the environment, read once at start:
//
//   SANDPOOL_SQLITE_FAULT=crash@N     _exit(9) at the Nth write point, before it is made (as a
//                                     kill -9 there: what earlier points wrote is in the
//                                     page cache, nothing of the Nth is)
//   SANDPOOL_SQLITE_FAULT=enospc@N    the Nth write point and every later one fail with
//                                     SQLITE_FULL (ENOSPC: the disk is full); enospc@N:C
//                                     fails C of them, then writes succeed again (space
//                                     came back)
//   SANDPOOL_SQLITE_FAULT=eio@N       the same with SQLITE_IOERR_WRITE / _FSYNC / _TRUNCATE
//                                     (EIO); eio@N:C likewise
//   SANDPOOL_SQLITE_FAULT=hang@N:MS   the first xSync at or after the Nth write point sleeps
//                                     MS milliseconds before it syncs (a hung fsync);
//                                     hang@N:MS:C does so for C syncs
//   SANDPOOL_SQLITE_FAULT_COUNT=FILE  FILE holds the number of write points made so far,
//                                     rewritten at each (so it is right after any exit, a
//                                     crash included): run a scenario once with only this
//                                     set to learn its K, then crash@1..K
//
// Unset or empty: counts only. A value that does not parse ends the process at start with a
// message (exit 2): a test must not run unfaulted by mistake. Tests:
// tests/poold/poold_crash_points_test.cpp; bench/journal.cpp (`journal crash_points`).
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>

namespace {

enum class Mode { kCount, kCrash, kEnospc, kEio, kHang };

struct FaultPlan {
  Mode mode = Mode::kCount;
  std::uint64_t at = 0;       // the write point (1-based) the fault starts at
  std::uint64_t times = 0;    // how many points fail or syncs hang; 0: every later one
  std::uint64_t hang_ms = 0;  // kHang
};

// Parses "<digits>" into *out; true iff the whole text is a number.
bool parse_number(std::string_view text, std::uint64_t* out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

// Returns true iff `text` is a plan in the grammar at the top of this file.
bool parse_plan(std::string_view text, FaultPlan* plan) {
  if (text.empty()) return true;
  const auto at = text.find('@');
  if (at == std::string_view::npos) return false;
  const std::string_view mode = text.substr(0, at);
  std::string_view rest = text.substr(at + 1);
  std::uint64_t fields[3] = {0, 0, 0};
  int n = 0;
  while (n < 3) {
    const auto colon = rest.find(':');
    if (!parse_number(rest.substr(0, colon), &fields[n++])) return false;
    if (colon == std::string_view::npos) break;
    rest = rest.substr(colon + 1);
    if (n == 3) return false;
  }
  plan->at = fields[0];
  if (plan->at == 0) return false;
  if (mode == "crash" && n == 1) {
    plan->mode = Mode::kCrash;
  } else if ((mode == "enospc" || mode == "eio") && n <= 2) {
    plan->mode = mode == "enospc" ? Mode::kEnospc : Mode::kEio;
    plan->times = fields[1];
    if (n == 2 && plan->times == 0) return false;
  } else if (mode == "hang" && (n == 2 || n == 3)) {
    plan->mode = Mode::kHang;
    plan->hang_ms = fields[1];
    plan->times = n == 3 ? fields[2] : 1;
    if (plan->times == 0) return false;
  } else {
    return false;
  }
  return true;
}

enum class Point { kWrite, kSync, kTruncate };

// The process's one fault state; lives until _exit (never destroyed: SQLite may write from a
// thread while static destructors run).
struct FaultState {
  FaultPlan plan;
  std::mutex mu;
  std::uint64_t points = 0;     // write points made so far
  std::uint64_t faulted = 0;    // failures returned / syncs hung so far
  int count_fd = -1;            // SANDPOOL_SQLITE_FAULT_COUNT, or -1
  sqlite3_vfs* base = nullptr;  // the "unix" VFS
};

FaultState& state() {
  static FaultState* s = new FaultState();
  return *s;
}

void write_count(int fd, std::uint64_t points) {
  char buf[32];
  const int len = std::snprintf(buf, sizeof buf, "%llu\n", static_cast<unsigned long long>(points));
  // Rewritten in place; the number only grows, so a longer text always covers the last one.
  (void)!::pwrite(fd, buf, static_cast<std::size_t>(len), 0);
}

// Counts one write point of kind `kind` and applies the plan. Returns SQLITE_OK to go on
// with the real call, or the error to return instead of it. Crashes do not return.
int at_write_point(Point kind) {
  FaultState& s = state();
  std::uint64_t hang_ms = 0;
  int rc = SQLITE_OK;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    const std::uint64_t n = ++s.points;
    if (s.count_fd >= 0) write_count(s.count_fd, n);
    const FaultPlan& p = s.plan;
    const bool budget = p.times == 0 || s.faulted < p.times;
    if (n >= p.at && budget) {
      switch (p.mode) {
        case Mode::kCount:
          break;
        case Mode::kCrash:
          // No flush, no destructors, no atexit: what a kill -9 at this point leaves.
          ::_exit(9);
        case Mode::kEnospc:
          ++s.faulted;
          rc = SQLITE_FULL;
          break;
        case Mode::kEio:
          ++s.faulted;
          rc = kind == Point::kWrite  ? SQLITE_IOERR_WRITE
               : kind == Point::kSync ? SQLITE_IOERR_FSYNC
                                      : SQLITE_IOERR_TRUNCATE;
          break;
        case Mode::kHang:
          if (kind == Point::kSync) {
            ++s.faulted;
            hang_ms = p.hang_ms;
          }
          break;
      }
    }
  }
  // Outside the lock: the other writing thread may go on (as it could past a real hung fsync).
  if (hang_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hang_ms));
  return rc;
}

// A file of the fault VFS: our header, then the real file of the "unix" VFS (szOsFile says
// how much room SQLite gives us).
struct FaultFile {
  sqlite3_file base;   // pMethods: kFaultMethods, or null when the open failed
  sqlite3_file* real;  // points just past this struct
  bool counted;        // a database, WAL or rollback journal
};

sqlite3_file* real_of(sqlite3_file* f) { return reinterpret_cast<FaultFile*>(f)->real; }
bool counted(sqlite3_file* f) { return reinterpret_cast<FaultFile*>(f)->counted; }

int f_close(sqlite3_file* f) {
  sqlite3_file* r = real_of(f);
  return r->pMethods ? r->pMethods->xClose(r) : SQLITE_OK;
}
int f_read(sqlite3_file* f, void* buf, int amt, sqlite3_int64 off) {
  return real_of(f)->pMethods->xRead(real_of(f), buf, amt, off);
}
int f_write(sqlite3_file* f, const void* buf, int amt, sqlite3_int64 off) {
  if (counted(f)) {
    if (int rc = at_write_point(Point::kWrite); rc != SQLITE_OK) return rc;
  }
  return real_of(f)->pMethods->xWrite(real_of(f), buf, amt, off);
}
int f_truncate(sqlite3_file* f, sqlite3_int64 size) {
  if (counted(f)) {
    if (int rc = at_write_point(Point::kTruncate); rc != SQLITE_OK) return rc;
  }
  return real_of(f)->pMethods->xTruncate(real_of(f), size);
}
int f_sync(sqlite3_file* f, int flags) {
  if (counted(f)) {
    if (int rc = at_write_point(Point::kSync); rc != SQLITE_OK) return rc;
  }
  return real_of(f)->pMethods->xSync(real_of(f), flags);
}
int f_file_size(sqlite3_file* f, sqlite3_int64* size) {
  return real_of(f)->pMethods->xFileSize(real_of(f), size);
}
int f_lock(sqlite3_file* f, int level) { return real_of(f)->pMethods->xLock(real_of(f), level); }
int f_unlock(sqlite3_file* f, int level) {
  return real_of(f)->pMethods->xUnlock(real_of(f), level);
}
int f_check_reserved(sqlite3_file* f, int* out) {
  return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out);
}
int f_file_control(sqlite3_file* f, int op, void* arg) {
  return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
}
int f_sector_size(sqlite3_file* f) { return real_of(f)->pMethods->xSectorSize(real_of(f)); }
int f_device_characteristics(sqlite3_file* f) {
  return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f));
}
int f_shm_map(sqlite3_file* f, int page, int size, int extend, void volatile** out) {
  const sqlite3_io_methods* m = real_of(f)->pMethods;
  return m->iVersion >= 2 && m->xShmMap ? m->xShmMap(real_of(f), page, size, extend, out)
                                        : SQLITE_IOERR_SHMMAP;
}
int f_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  const sqlite3_io_methods* m = real_of(f)->pMethods;
  return m->iVersion >= 2 && m->xShmLock ? m->xShmLock(real_of(f), offset, n, flags)
                                         : SQLITE_IOERR_SHMLOCK;
}
void f_shm_barrier(sqlite3_file* f) {
  const sqlite3_io_methods* m = real_of(f)->pMethods;
  if (m->iVersion >= 2 && m->xShmBarrier) m->xShmBarrier(real_of(f));
}
int f_shm_unmap(sqlite3_file* f, int del) {
  const sqlite3_io_methods* m = real_of(f)->pMethods;
  return m->iVersion >= 2 && m->xShmUnmap ? m->xShmUnmap(real_of(f), del) : SQLITE_OK;
}
int f_fetch(sqlite3_file* f, sqlite3_int64 off, int amt, void** out) {
  const sqlite3_io_methods* m = real_of(f)->pMethods;
  if (m->iVersion >= 3 && m->xFetch) return m->xFetch(real_of(f), off, amt, out);
  *out = nullptr;
  return SQLITE_OK;
}
int f_unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  const sqlite3_io_methods* m = real_of(f)->pMethods;
  return m->iVersion >= 3 && m->xUnfetch ? m->xUnfetch(real_of(f), off, p) : SQLITE_OK;
}

const sqlite3_io_methods kFaultMethods = {
    3,
    f_close,
    f_read,
    f_write,
    f_truncate,
    f_sync,
    f_file_size,
    f_lock,
    f_unlock,
    f_check_reserved,
    f_file_control,
    f_sector_size,
    f_device_characteristics,
    f_shm_map,
    f_shm_lock,
    f_shm_barrier,
    f_shm_unmap,
    f_fetch,
    f_unfetch,
};

int v_open(sqlite3_vfs* vfs, const char* name, sqlite3_file* f, int flags, int* out_flags) {
  auto* ff = reinterpret_cast<FaultFile*>(f);
  ff->base.pMethods = nullptr;
  ff->real = reinterpret_cast<sqlite3_file*>(ff + 1);
  ff->counted = (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL)) != 0;
  auto* base = static_cast<sqlite3_vfs*>(vfs->pAppData);
  const int rc = base->xOpen(base, name, ff->real, flags, out_flags);
  // SQLite calls xClose only when pMethods is set; the real file has its own (null on failure).
  if (ff->real->pMethods != nullptr) ff->base.pMethods = &kFaultMethods;
  return rc;
}

#define SP_FORWARD(vfs) static_cast<sqlite3_vfs*>((vfs)->pAppData)
int v_delete(sqlite3_vfs* v, const char* name, int sync_dir) {
  return SP_FORWARD(v)->xDelete(SP_FORWARD(v), name, sync_dir);
}
int v_access(sqlite3_vfs* v, const char* name, int flags, int* out) {
  return SP_FORWARD(v)->xAccess(SP_FORWARD(v), name, flags, out);
}
int v_full_pathname(sqlite3_vfs* v, const char* name, int n, char* out) {
  return SP_FORWARD(v)->xFullPathname(SP_FORWARD(v), name, n, out);
}
void* v_dl_open(sqlite3_vfs* v, const char* name) {
  return SP_FORWARD(v)->xDlOpen(SP_FORWARD(v), name);
}
void v_dl_error(sqlite3_vfs* v, int n, char* out) {
  SP_FORWARD(v)->xDlError(SP_FORWARD(v), n, out);
}
void (*v_dl_sym(sqlite3_vfs* v, void* h, const char* sym))(void) {
  return SP_FORWARD(v)->xDlSym(SP_FORWARD(v), h, sym);
}
void v_dl_close(sqlite3_vfs* v, void* h) { SP_FORWARD(v)->xDlClose(SP_FORWARD(v), h); }
int v_randomness(sqlite3_vfs* v, int n, char* out) {
  return SP_FORWARD(v)->xRandomness(SP_FORWARD(v), n, out);
}
int v_sleep(sqlite3_vfs* v, int us) { return SP_FORWARD(v)->xSleep(SP_FORWARD(v), us); }
int v_current_time(sqlite3_vfs* v, double* out) {
  return SP_FORWARD(v)->xCurrentTime(SP_FORWARD(v), out);
}
int v_get_last_error(sqlite3_vfs* v, int n, char* out) {
  return SP_FORWARD(v)->xGetLastError(SP_FORWARD(v), n, out);
}
int v_current_time_int64(sqlite3_vfs* v, sqlite3_int64* out) {
  return SP_FORWARD(v)->xCurrentTimeInt64(SP_FORWARD(v), out);
}
int v_set_system_call(sqlite3_vfs* v, const char* name, sqlite3_syscall_ptr p) {
  return SP_FORWARD(v)->xSetSystemCall(SP_FORWARD(v), name, p);
}
sqlite3_syscall_ptr v_get_system_call(sqlite3_vfs* v, const char* name) {
  return SP_FORWARD(v)->xGetSystemCall(SP_FORWARD(v), name);
}
const char* v_next_system_call(sqlite3_vfs* v, const char* name) {
  return SP_FORWARD(v)->xNextSystemCall(SP_FORWARD(v), name);
}
#undef SP_FORWARD

[[noreturn]] void refuse(const char* why, const char* value) {
  std::fprintf(stderr, "poold_faults: SANDPOOL_SQLITE_FAULT=%s: %s\n", value, why);
  std::fflush(stderr);
  ::_exit(2);
}

// Registers the fault VFS as the default before main(). A static initializer of this file:
// poold's main opens no database before its config is read, long after this runs.
struct Registrar {
  Registrar() {
    FaultState& s = state();
    const char* spec = std::getenv("SANDPOOL_SQLITE_FAULT");
    if (spec != nullptr && !parse_plan(spec, &s.plan)) {
      refuse("not crash@N, enospc@N[:C], eio@N[:C] or hang@N:MS[:C]", spec);
    }
    if (const char* path = std::getenv("SANDPOOL_SQLITE_FAULT_COUNT"); path && *path) {
      s.count_fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (s.count_fd < 0) refuse(std::strerror(errno), path);
      write_count(s.count_fd, 0);
    }
    if (sqlite3_initialize() != SQLITE_OK) refuse("sqlite3_initialize failed", spec ? spec : "");
    s.base = sqlite3_vfs_find("unix");
    if (s.base == nullptr) refuse("no \"unix\" VFS", spec ? spec : "");
    static sqlite3_vfs vfs{};
    vfs.iVersion = 3;
    vfs.szOsFile = static_cast<int>(sizeof(FaultFile)) + s.base->szOsFile;
    vfs.mxPathname = s.base->mxPathname;
    vfs.zName = "sandpool-faults";
    vfs.pAppData = s.base;
    vfs.xOpen = v_open;
    vfs.xDelete = v_delete;
    vfs.xAccess = v_access;
    vfs.xFullPathname = v_full_pathname;
    vfs.xDlOpen = v_dl_open;
    vfs.xDlError = v_dl_error;
    vfs.xDlSym = v_dl_sym;
    vfs.xDlClose = v_dl_close;
    vfs.xRandomness = v_randomness;
    vfs.xSleep = v_sleep;
    vfs.xCurrentTime = v_current_time;
    vfs.xGetLastError = v_get_last_error;
    vfs.xCurrentTimeInt64 = v_current_time_int64;
    vfs.xSetSystemCall = v_set_system_call;
    vfs.xGetSystemCall = v_get_system_call;
    vfs.xNextSystemCall = v_next_system_call;
    if (sqlite3_vfs_register(&vfs, /*makeDflt=*/1) != SQLITE_OK) {
      refuse("sqlite3_vfs_register failed", spec ? spec : "");
    }
  }
};
const Registrar registrar;

}  // namespace
