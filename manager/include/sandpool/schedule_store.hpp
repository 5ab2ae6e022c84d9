// The schedules' last fired slots in the state dir's database (`<state_dir>/dead_letters.db`,
// the journal's file), table `schedule_slots`. A connection of its own: it writes one small
// row per fired slot, so it takes the file's write lock rarely and briefly (docs/schedules.md
// says why it is not the store's writer thread).
//
// Thread-safety: every member may be called from any thread (one mutex around the
// connection).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include <sandpool/scheduler.hpp>

namespace sandpool {

class SqliteScheduleStore final : public ScheduleStore {
 public:
  // Opens (creating the table if needed) the database at `path`.
  static Result<std::unique_ptr<SqliteScheduleStore>> open(const std::string& path);
  ~SqliteScheduleStore() override;

  Result<std::optional<FiredSlot>> last_fired(const std::string& name) override;
  Status record_fired(const std::string& name, const FiredSlot& fired) override;
  Status forget(const std::string& name) override;

 private:
  struct Db;
  explicit SqliteScheduleStore(std::unique_ptr<Db> db);
  std::mutex mu_;
  std::unique_ptr<Db> db_;  // guarded by mu_
};

}  // namespace sandpool
