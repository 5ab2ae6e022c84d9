// The dashboard's pages as HTML, from the typed replies of the operations they show
// (<sandpool/control/control_ops.hpp>). Pure: each returns the page body; layout() wraps it. Every
// value from a task, a plugin or the request is escaped (html.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/control/control_ops.hpp>

#include "http/http_access.hpp"

namespace sandpool::http::pages {

// What every page needs to know about the viewer.
struct Viewer {
  Access access = Access::kAnonymous;
  std::string csrf;         // empty: no session (no form can change anything)
  bool read_only = false;   // no admin token configured
  bool read_token = false;  // a read token is configured
  std::string message;      // a flash message (from the redirect after a form)
  std::string path;         // the page's own path and query, for forms' `return`
  bool admin() const { return access == Access::kAdmin && !csrf.empty(); }
};

std::string layout(const Viewer& v, std::string_view title, std::string_view body);
std::string error_body(std::string_view code, std::string_view message);
std::string login_body(const Viewer& v, std::string_view error);

std::string overview_body(const Viewer& v, const ops::StatusReply& status,
                          const ops::StatsReply& stats);
std::string pool_body(const Viewer& v, const ops::PoolCounters& pool,
                      const ops::WorkersReply& workers);
// The task search form as the page has it.
struct TaskFilter {
  std::string id, pool, type, state, key;
  std::string since;   // "15m", "1h", "24h", "7d" or "" (any time)
  std::string tenant;  // "": any tenant
};
// `list`: the tasks found (null when the search failed: `error` says why).
std::string tasks_body(const Viewer& v, const TaskFilter& f, const ops::TaskListReply* list,
                       std::string_view error);
std::string task_body(const Viewer& v, const ops::TaskAccount& task,
                      const std::optional<std::string>& result);

// The dead-letter list's filter as the page's form has it.
struct LetterFilter {
  std::string pool, type, reason, text;
  std::string since;  // "15m", "1h", "24h", "7d" or "" (any time)
  std::string cursor;
};
std::string dlq_body(const Viewer& v, const LetterFilter& f, const ops::DlqListReply& list);
std::string letter_body(const Viewer& v, const ops::DlqShowReply& letter,
                        const std::optional<std::string>& payload);
// A schedule as the schedules page shows it: schedule_list's entry, and how its last slot's
// task stands (its state, and reason) when poold still holds that task.
struct ScheduleRow {
  ops::ScheduleInfo info;
  std::optional<std::string> last_state;
};
std::string schedules_body(const Viewer& v, const std::vector<ScheduleRow>& rows);
std::string events_body(const Viewer& v, std::string_view pool,
                        const std::vector<ops::PoolEventRecord>& recent);

}  // namespace sandpool::http::pages
