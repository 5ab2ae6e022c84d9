// The schedule operations (docs/schedules.md, docs/protocol.md): list, show, pause, resume
// and run_now. Adding and removing a schedule at run time is not built yet: schedules live
// in poold's YAML (`schedules:`), and a reload applies their changes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/ops/op_info.hpp>

namespace sandpool::ops {

// show, pause, resume, run_now: the schedule's name.
struct ScheduleNameArgs {
  std::string name;
};

// A schedule as poold runs it.
struct ScheduleInfo {
  std::string name;
  std::string expression;  // cron, macro or @every
  std::string zone;        // UTC or local
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
  static constexpr Lane kLane = Lane::kRequests;
  using Args = ScheduleNameArgs;
  using Reply = ScheduleInfo;
};
struct ScheduleResume {
  static constexpr std::string_view kName = "schedule_resume";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kRequests;
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

}  // namespace sandpool::ops
