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
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/schedule/scheduler.hpp>

namespace sandpool {

class SqliteScheduleStore final : public ScheduleStore {
 public:
  // Opens (creating the table if needed) the database at `path`.
  static Result<std::unique_ptr<SqliteScheduleStore>> open(const std::string& path);
  ~SqliteScheduleStore() override;

  Result<std::optional<FiredSlot>> last_fired(const std::string& name) override EXCLUDES(mu_);
  Status record_fired(const std::string& name, const FiredSlot& fired) override EXCLUDES(mu_);
  Result<std::optional<KeptPause>> kept_pause(const std::string& name) override EXCLUDES(mu_);
  Status keep_pause(const std::string& name, const KeptPause& pause) override EXCLUDES(mu_);
  Status forget_pause(const std::string& name) override EXCLUDES(mu_);
  Status forget(const std::string& name) override EXCLUDES(mu_);

  // A schedule added at run time: its name and its definition, the schedule_add arguments'
  // JSON as the caller encoded it (the reader decodes and checks it like any input).
  struct Definition {
    std::string name;
    std::string json;
  };
  // Every kept definition, by name.
  Result<std::vector<Definition>> definitions() EXCLUDES(mu_);
  // Keeps `d` (replacing the definition of that name).
  Status put_definition(const Definition& d) EXCLUDES(mu_);
  Status drop_definition(const std::string& name) EXCLUDES(mu_);

 private:
  struct Db;
  explicit SqliteScheduleStore(std::unique_ptr<Db> db);
  // Deletes the row `name` with `sql` (a DELETE ... WHERE name = ? literal).
  Status delete_named(const char* sql, std::string_view op, const std::string& name) REQUIRES(mu_);
  Mutex mu_;
  const std::unique_ptr<Db> db_ PT_GUARDED_BY(mu_);
};

}  // namespace sandpool
