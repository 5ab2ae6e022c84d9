#include <sandpool/control/op_json.hpp>

#include <cstdint>
#include <limits>

#include <sandpool/base/wall_clock.hpp>

#include "task_option_fields.hpp"

namespace sandpool::ops {

using nlohmann::json;

void ArgReader::fail(std::string_view name, std::string_view what) {
  std::string message = "field \"";
  message += name;
  message += "\": ";
  message += what;
  status_ = Status::invalid(std::move(message));
}

bool read_value(const json& v, bool* out) {
  if (!v.is_boolean()) return false;
  *out = v.get<bool>();
  return true;
}

bool read_value(const json& v, std::string* out) {
  if (!v.is_string()) return false;
  *out = v.get<std::string>();
  return true;
}

// Parsed JSON holds a non-negative integer as unsigned; one built in C++ from an int literal
// holds it as signed: both are unsigned integers here.
bool read_value(const json& v, std::uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<std::uint64_t>();
    return true;
  }
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0) return false;
  *out = static_cast<std::uint64_t>(v.get<std::int64_t>());
  return true;
}

bool read_value(const json& v, std::uint32_t* out) {
  std::uint64_t n = 0;
  if (!read_value(v, &n) || n > std::numeric_limits<std::uint32_t>::max()) return false;
  *out = static_cast<std::uint32_t>(n);
  return true;
}

bool read_value(const json& v, std::int64_t* out) {
  if (v.is_number_unsigned()) {
    const auto n = v.get<std::uint64_t>();
    if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
    *out = static_cast<std::int64_t>(n);
    return true;
  }
  if (!v.is_number_integer()) return false;
  *out = v.get<std::int64_t>();
  return true;
}

bool read_value(const json& v, std::int32_t* out) {
  std::int64_t n = 0;
  if (!read_value(v, &n) || n < std::numeric_limits<std::int32_t>::min() ||
      n > std::numeric_limits<std::int32_t>::max()) {
    return false;
  }
  *out = static_cast<std::int32_t>(n);
  return true;
}

bool read_value(const json& v, std::chrono::milliseconds* out) {
  // At most a year: a deadline computed as now + the duration must not overflow anywhere.
  constexpr std::int64_t kYear = 366LL * 24 * 3600 * 1000;
  std::int64_t ms = 0;
  if (!read_value(v, &ms) || ms < 0 || ms > kYear) return false;
  *out = std::chrono::milliseconds(ms);
  return true;
}

bool read_value(const json& v, std::chrono::system_clock::time_point* out) {
  std::int64_t ms = 0;
  if (!read_value(v, &ms)) return false;
  const auto t = wall_time_of_ms(ms);
  if (t) *out = *t;
  return t.has_value();
}

bool read_value(const json& v, double* out) {
  if (!v.is_number()) return false;
  *out = v.get<double>();
  return true;
}

bool read_value(const json& v, std::vector<std::string>* out) {
  if (!v.is_array()) return false;
  std::vector<std::string> values;
  for (const json& e : v) {
    if (!e.is_string()) return false;
    values.push_back(e.get<std::string>());
  }
  *out = std::move(values);
  return true;
}

std::string_view expected(const bool*) { return "a boolean"; }
std::string_view expected(const std::string*) { return "a string"; }
std::string_view expected(const std::uint64_t*) { return "an unsigned integer"; }
std::string_view expected(const std::uint32_t*) { return "an integer from 0 to 4294967295"; }
std::string_view expected(const std::int32_t*) {
  return "an integer from -2147483648 to 2147483647";
}
std::string_view expected(const std::int64_t*) { return "an integer"; }
std::string_view expected(const std::chrono::system_clock::time_point*) { return "an integer"; }
std::string_view expected(const std::chrono::milliseconds*) {
  return "a duration in ms (an unsigned integer, at most a year: 31622400000)";
}
std::string_view expected(const double*) { return "a number"; }
std::string_view expected(const std::vector<std::string>*) { return "an array of strings"; }

// The unsigned integers of the array member `name` (absent: *out stays empty).
Status decode_numbers(const json& j, std::string_view name, std::vector<std::uint64_t>* out) {
  const auto it = j.find(name);
  if (it == j.end()) return Status::ok();
  if (!it->is_array()) {
    return Status::invalid("field \"" + std::string(name) + "\": expected an array");
  }
  out->reserve(it->size());
  for (const json& v : *it) {
    if (!v.is_number_unsigned()) {
      return Status::invalid("field \"" + std::string(name) +
                             "\": expected an array of unsigned integers");
    }
    out->push_back(v.get<std::uint64_t>());
  }
  return Status::ok();
}

// --- Tasks ------------------------------------------------------------------------------------

json encode(const TaskIdArgs& a) { return {{"id", a.id}}; }

Status decode(const json& j, TaskIdArgs* out) {
  return ArgReader(j).required("id", &out->id).status();
}

json encode(const TaskListArgs& a) {
  json j = json::object();
  for (const auto& [name, value] : {std::pair{"pool", &a.pool}, std::pair{"type", &a.type},
                                    std::pair{"state", &a.state}, std::pair{"key", &a.key}}) {
    if (!value->empty()) j[name] = *value;
  }
  if (a.tenant) j["tenant"] = *a.tenant;
  if (a.since_ms) j["since_ms"] = *a.since_ms;
  if (a.until_ms) j["until_ms"] = *a.until_ms;
  j["limit"] = a.limit;
  return j;
}

Status decode(const json& j, TaskListArgs* out) {
  Status st = ArgReader(j)
                  .optional("pool", &out->pool)
                  .optional("type", &out->type)
                  .optional("state", &out->state)
                  .optional("key", &out->key)
                  .optional("tenant", &out->tenant)
                  .optional("since_ms", &out->since_ms)
                  .optional("until_ms", &out->until_ms)
                  .optional("limit", &out->limit)
                  .status();
  if (!st) return st;
  if (out->limit < 1 || out->limit > 1000) {
    return Status::invalid("limit: " + std::to_string(out->limit) + " is outside 1 to 1000");
  }
  return Status::ok();
}

json encode(const TaskSummary& t) {
  json j{{"id", t.id},       {"pool", t.pool},
         {"type", t.type},   {"state", t.state},
         {"error", t.error}, {"attempts", t.attempts},
         {"key", t.key},     {"submitted_ms", t.submitted_ms}};
  if (t.reason) j["reason"] = *t.reason;
  if (!t.tenant.empty()) j["tenant"] = t.tenant;
  if (t.not_before_ms) j["not_before_ms"] = *t.not_before_ms;
  return j;
}

Status decode(const json& j, TaskSummary* out) {
  return ArgReader(j)
      .required("id", &out->id)
      .optional("pool", &out->pool)
      .optional("type", &out->type)
      .required("state", &out->state)
      .optional("reason", &out->reason)
      .optional("error", &out->error)
      .optional("attempts", &out->attempts)
      .optional("key", &out->key)
      .optional("submitted_ms", &out->submitted_ms)
      .optional("tenant", &out->tenant)
      .optional("not_before_ms", &out->not_before_ms)
      .status();
}

json encode(const TaskListReply& r) {
  json tasks = json::array();
  for (const TaskSummary& t : r.tasks) tasks.push_back(encode(t));
  return {{"tasks", std::move(tasks)}, {"truncated", r.truncated}};
}

Status decode(const json& j, TaskListReply* out) {
  if (Status st = ArgReader(j).optional("truncated", &out->truncated).status(); !st) return st;
  return decode_array(j, "tasks", &out->tasks);
}

json encode(const WaitArgs& a) {
  json j{{"id", a.id}};
  if (a.timeout) j["timeout_ms"] = a.timeout->count();
  return j;
}

Status decode(const json& j, WaitArgs* out) {
  return ArgReader(j).required("id", &out->id).optional("timeout_ms", &out->timeout).status();
}

json encode(const AttemptAccount& a) {
  json j{{"number", a.number},         {"outcome", a.outcome},       {"error", a.error},
         {"worker_pid", a.worker_pid}, {"started_ms", a.started_ms}, {"ended_ms", a.ended_ms}};
  if (!a.backtrace.empty()) j["backtrace"] = a.backtrace;
  return j;
}

Status decode(const json& j, AttemptAccount* out) {
  return ArgReader(j)
      .required("number", &out->number)
      .required("outcome", &out->outcome)
      .optional("error", &out->error)
      .optional("worker_pid", &out->worker_pid)
      .optional("started_ms", &out->started_ms)
      .optional("ended_ms", &out->ended_ms)
      .optional("backtrace", &out->backtrace)
      .status();
}

json encode(const TaskAccount& a) {
  json history = json::array();
  for (const AttemptAccount& at : a.history) history.push_back(encode(at));
  json j{{"id", a.id},       {"type", a.type},         {"state", a.state},
         {"error", a.error}, {"attempts", a.attempts}, {"history", std::move(history)}};
  if (a.reason) j["reason"] = *a.reason;
  if (a.dead_letter_pending) j["dead_letter_pending"] = true;
  if (a.result_withheld) j["result_withheld"] = true;
  if (a.result_dropped) j["result_dropped"] = true;
  if (a.submitted) {
    const TaskSubmission& s = *a.submitted;
    json sub{{"payload_size", s.payload_size}};
    task_option_fields(static_cast<const TaskOptions&>(s),
                       TaskFieldWriter{&sub, /*every_string=*/true});
    if (s.payload_preview) sub["payload_preview"] = *s.payload_preview;
    j["submitted"] = std::move(sub);
  }
  if (a.not_before_ms != 0) j["not_before_ms"] = a.not_before_ms;
  if (!a.tenant.empty()) j["tenant"] = a.tenant;
  return j;
}

Status decode(const json& j, TaskAccount* out) {
  Status st = ArgReader(j)
                  .required("id", &out->id)
                  .optional("type", &out->type)
                  .required("state", &out->state)
                  .optional("reason", &out->reason)
                  .optional("error", &out->error)
                  .optional("attempts", &out->attempts)
                  .optional("dead_letter_pending", &out->dead_letter_pending)
                  .optional("result_withheld", &out->result_withheld)
                  .optional("result_dropped", &out->result_dropped)
                  .optional("not_before_ms", &out->not_before_ms)
                  .optional("tenant", &out->tenant)
                  .status();
  if (!st) return st;
  if (const auto sub = j.find("submitted"); sub != j.end()) {
    if (!sub->is_object()) return Status::invalid("field \"submitted\": expected an object");
    TaskSubmission s;
    ArgReader r(*sub);
    task_option_fields(static_cast<TaskOptions&>(s),
                       [&r](std::string_view name, auto& member) { r.optional(name, &member); });
    if (Status ss = r.optional("payload_size", &s.payload_size)
                        .optional("payload_preview", &s.payload_preview)
                        .status();
        !ss) {
      return ss.with_context("submitted");
    }
    out->submitted = std::move(s);
  }
  const auto history = j.find("history");
  if (history == j.end()) return st;
  if (!history->is_array()) return Status::invalid("field \"history\": expected an array");
  for (const json& h : *history) {
    AttemptAccount at;
    if (Status s = decode(h, &at); !s) return s.with_context("history");
    out->history.push_back(std::move(at));
  }
  return st;
}

json encode(const CancelReply& r) {
  return {{"id", r.id}, {"cancelled", r.cancelled}, {"state", r.state}};
}

Status decode(const json& j, CancelReply* out) {
  return ArgReader(j)
      .required("id", &out->id)
      .required("cancelled", &out->cancelled)
      .required("state", &out->state)
      .status();
}

// --- Pool controls ----------------------------------------------------------------------------

json encode(const PoolArgs& a) { return {{"pool", a.pool}}; }

Status decode(const json& j, PoolArgs* out) {
  return ArgReader(j).required("pool", &out->pool).status();
}

json encode(const ScaleArgs& a) { return {{"pool", a.pool}, {"workers", a.workers}}; }

Status decode(const json& j, ScaleArgs* out) {
  return ArgReader(j).required("pool", &out->pool).required("workers", &out->workers).status();
}

json encode(const StrategyArgs& a) { return {{"pool", a.pool}, {"strategy", a.strategy}}; }

Status decode(const json& j, StrategyArgs* out) {
  return ArgReader(j).required("pool", &out->pool).required("strategy", &out->strategy).status();
}

json encode(const RestartArgs& a) { return {{"pool", a.pool}, {"rolling", a.rolling}}; }

Status decode(const json& j, RestartArgs* out) {
  return ArgReader(j).required("pool", &out->pool).optional("rolling", &out->rolling).status();
}

json encode(const KillWorkerArgs& a) {
  return {{"pool", a.pool}, {"pid", a.pid}, {"signal", a.signal}};
}

Status decode(const json& j, KillWorkerArgs* out) {
  return ArgReader(j)
      .required("pool", &out->pool)
      .required("pid", &out->pid)
      .optional("signal", &out->signal)
      .status();
}

json encode(const PoolStateReply& r) { return {{"pool", r.pool}, {"state", r.state}}; }

Status decode(const json& j, PoolStateReply* out) {
  return ArgReader(j).required("pool", &out->pool).required("state", &out->state).status();
}

}  // namespace sandpool::ops
