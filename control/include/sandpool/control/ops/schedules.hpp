// The schedule operations (docs/schedules.md, docs/protocol.md): list, show, pause, resume,
// run_now, and add and remove at run time (kept in the state dir's database; a name the YAML
// declares is the YAML's).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/control/ops/op_info.hpp>

namespace sandpool::ops {

// show, pause, resume, run_now: the schedule's name.
struct ScheduleNameArgs {
  std::string name;
};

// A schedule as poold runs it.
struct ScheduleInfo {
  std::string name;
  std::string expression;  // cron, macro or @every
  std::string zone;        // UTC, local or a tz database name
  std::string type;
  std::string pool;    // "": routed by type
  std::string tenant;  // "": the default tenant
  std::string catch_up;
  std::string overlap;
  bool paused = false;
  std::optional<std::int64_t> start_s, end_s;
  std::optional<std::int64_t> next_s;       // none: paused or ended
  std::optional<std::int64_t> last_slot_s;  // the last slot fired (kept across restarts)
  std::optional<std::uint64_t> last_task;   // its task
  std::optional<std::int64_t> held_slot_s;  // overlap queue: waiting for the last task
  std::string last_outcome;
  std::uint64_t fired = 0;  // since poold started
  std::uint64_t skipped = 0;
};

// schedule_add: a schedule as one entry of the YAML's `schedules:` declares it
// (docs/configuration.md#schedules), the instants as Unix seconds.
struct ScheduleAddArgs {
  std::string name;
  std::string cron;   // one of cron and every
  std::string every;  // a duration, "30s", "1h30m"
  std::string zone;   // "": UTC
  std::string type;
  std::string pool;  // "": routed by type
  std::string payload;
  std::optional<std::int32_t> priority;
  std::optional<std::chrono::milliseconds> timeout;  // wire: timeout_ms
  std::optional<std::uint32_t> retries;
  std::string key;
  std::string tenant;
  std::optional<std::int64_t> start_s, end_s;
  std::string catch_up;  // "": skip
  std::string overlap;   // "": allow
  bool paused = false;
};

struct ScheduleListReply {
  std::vector<ScheduleInfo> schedules;  // by name
};

struct ScheduleRunReply {
  std::string name;
  std::uint64_t id = 0;  // the task submitted
};

struct ScheduleList {
  static constexpr std::string_view kName = "schedule_list";
  static constexpr Rights kRights = Rights::kRead;
  static constexpr Lane kLane = Lane::kReads;
  using Args = NoArgs;
  using Reply = ScheduleListReply;
};
struct ScheduleShow {
  static constexpr std::string_view kName = "schedule_show";
  static constexpr Rights kRights = Rights::kRead;
  static constexpr Lane kLane = Lane::kReads;
  using Args = ScheduleNameArgs;
  using Reply = ScheduleInfo;
};
struct SchedulePause {
  static constexpr std::string_view kName = "schedule_pause";
  static constexpr Rights kRights = Rights::kAdmin;
  // Keeps the pause in the state dir's database, or in Redis: not on sp-request.
  static constexpr Lane kLane = Lane::kJobs;
  using Args = ScheduleNameArgs;
  using Reply = ScheduleInfo;
};
struct ScheduleResume {
  static constexpr std::string_view kName = "schedule_resume";
  static constexpr Rights kRights = Rights::kAdmin;
  // Keeps the pause in the state dir's database, or in Redis: not on sp-request.
  static constexpr Lane kLane = Lane::kJobs;
  using Args = ScheduleNameArgs;
  using Reply = ScheduleInfo;
};
struct ScheduleRunNow {
  static constexpr std::string_view kName = "schedule_run_now";
  static constexpr Rights kRights = Rights::kAdmin;
  // Waits for the journal to take the task (as a slot does): not on sp-request, where it
  // would hold the submits behind it.
  static constexpr Lane kLane = Lane::kJobs;
  using Args = ScheduleNameArgs;
  using Reply = ScheduleRunReply;
};

struct ScheduleAdd {
  static constexpr std::string_view kName = "schedule_add";
  static constexpr Rights kRights = Rights::kAdmin;
  // Writes the state dir's database: not on sp-request.
  static constexpr Lane kLane = Lane::kJobs;
  using Args = ScheduleAddArgs;
  using Reply = ScheduleInfo;
};
struct ScheduleRemove {
  static constexpr std::string_view kName = "schedule_remove";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kJobs;
  using Args = ScheduleNameArgs;
  using Reply = ScheduleNameArgs;  // the name removed
};

}  // namespace sandpool::ops
