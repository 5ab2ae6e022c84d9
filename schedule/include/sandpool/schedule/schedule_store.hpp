// The schedules' last fired slots in the state dir's database (`<state_dir>/dead_letters.db`,
// the journal's file), table `schedule_slots`; and the schedules added at run time
// (schedule_add), table `schedule_defs`; the pauses and resumes made at run time, table
// `schedule_pauses`. A connection of its own: it writes one small
// row per fired slot, so it takes the file's write lock rarely and briefly (docs/schedules.md
// says why it is not the store's writer thread).
//
// Thread-safety: every member may be called from any thread (one mutex around the
// connection).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/schedule/scheduler.hpp>

namespace sandpool {

class SqliteScheduleStore final : public ScheduleStore {
 public:
  // Opens (creating the table if needed) the database at `path`.
  static Result<std::unique_ptr<SqliteScheduleStore>> open(const std::string& path);
  ~SqliteScheduleStore() override;

  Result<std::optional<FiredSlot>> last_fired(const std::string& name) override;
  Status record_fired(const std::string& name, const FiredSlot& fired) override;
  Result<std::optional<KeptPause>> kept_pause(const std::string& name) override;
  Status keep_pause(const std::string& name, const KeptPause& pause) override;
  Status forget_pause(const std::string& name) override;
  Status forget(const std::string& name) override;

  // A schedule added at run time: its name and its definition, the schedule_add arguments'
  // JSON as the caller encoded it (the reader decodes and checks it like any input).
  struct Definition {
    std::string name;
    std::string json;
  };
  // Every kept definition, by name.
  Result<std::vector<Definition>> definitions();
  // Keeps `d` (replacing the definition of that name).
  Status put_definition(const Definition& d);
  Status drop_definition(const std::string& name);

 private:
  struct Db;
  explicit SqliteScheduleStore(std::unique_ptr<Db> db);
  // Deletes the row `name` with `sql` (a DELETE ... WHERE name = ? literal). Requires mu_.
  Status delete_named(const char* sql, std::string_view op, const std::string& name);
  std::mutex mu_;
  std::unique_ptr<Db> db_;  // guarded by mu_
};

}  // namespace sandpool
