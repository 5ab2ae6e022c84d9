// The JSON mapping of the schedule operations (<sandpool/ops/schedules.hpp>).
#include <sandpool/control/op_json.hpp>

namespace sandpool::ops {

using nlohmann::json;

json encode(const ScheduleNameArgs& a) { return {{"name", a.name}}; }

Status decode(const json& j, ScheduleNameArgs* out) {
  return ArgReader(j).required("name", &out->name).status();
}

json encode(const ScheduleInfo& s) {
  json j{{"name", s.name},      {"expression", s.expression},     {"zone", s.zone},
         {"type", s.type},      {"catch_up", s.catch_up},         {"overlap", s.overlap},
         {"paused", s.paused},  {"last_outcome", s.last_outcome}, {"fired", s.fired},
         {"skipped", s.skipped}};
  if (!s.pool.empty()) j["pool"] = s.pool;
  if (!s.tenant.empty()) j["tenant"] = s.tenant;
  if (s.start_s) j["start_s"] = *s.start_s;
  if (s.end_s) j["end_s"] = *s.end_s;
  if (s.next_s) j["next_s"] = *s.next_s;
  if (s.last_slot_s) j["last_slot_s"] = *s.last_slot_s;
  if (s.last_task) j["last_task"] = *s.last_task;
  if (s.held_slot_s) j["held_slot_s"] = *s.held_slot_s;
  return j;
}

Status decode(const json& j, ScheduleInfo* out) {
  return ArgReader(j)
      .required("name", &out->name)
      .required("expression", &out->expression)
      .optional("zone", &out->zone)
      .required("type", &out->type)
      .optional("pool", &out->pool)
      .optional("tenant", &out->tenant)
      .optional("catch_up", &out->catch_up)
      .optional("overlap", &out->overlap)
      .optional("paused", &out->paused)
      .optional("start_s", &out->start_s)
      .optional("end_s", &out->end_s)
      .optional("next_s", &out->next_s)
      .optional("last_slot_s", &out->last_slot_s)
      .optional("last_task", &out->last_task)
      .optional("held_slot_s", &out->held_slot_s)
      .optional("last_outcome", &out->last_outcome)
      .optional("fired", &out->fired)
      .optional("skipped", &out->skipped)
      .status();
}

json encode(const ScheduleListReply& r) {
  json list = json::array();
  for (const ScheduleInfo& s : r.schedules) list.push_back(encode(s));
  return {{"schedules", std::move(list)}};
}

Status decode(const json& j, ScheduleListReply* out) {
  return decode_array(j, "schedules", &out->schedules);
}

json encode(const ScheduleAddArgs& a) {
  json j{{"name", a.name}, {"type", a.type}};
  for (const auto& [k, v] : {std::pair<const char*, const std::string*>{"cron", &a.cron},
                             {"every", &a.every},
                             {"zone", &a.zone},
                             {"pool", &a.pool},
                             {"payload", &a.payload},
                             {"key", &a.key},
                             {"tenant", &a.tenant},
                             {"catch_up", &a.catch_up},
                             {"overlap", &a.overlap}}) {
    if (!v->empty()) j[k] = *v;
  }
  if (a.priority) j["priority"] = *a.priority;
  if (a.timeout) j["timeout_ms"] = a.timeout->count();
  if (a.retries) j["retries"] = *a.retries;
  if (a.start_s) j["start_s"] = *a.start_s;
  if (a.end_s) j["end_s"] = *a.end_s;
  if (a.paused) j["paused"] = true;
  return j;
}

Status decode(const json& j, ScheduleAddArgs* out) {
  return ArgReader(j)
      .required("name", &out->name)
      .optional("cron", &out->cron)
      .optional("every", &out->every)
      .optional("zone", &out->zone)
      .required("type", &out->type)
      .optional("pool", &out->pool)
      .optional("payload", &out->payload)
      .optional("priority", &out->priority)
      .optional("timeout_ms", &out->timeout)
      .optional("retries", &out->retries)
      .optional("key", &out->key)
      .optional("tenant", &out->tenant)
      .optional("start_s", &out->start_s)
      .optional("end_s", &out->end_s)
      .optional("catch_up", &out->catch_up)
      .optional("overlap", &out->overlap)
      .optional("paused", &out->paused)
      .status();
}

json encode(const ScheduleRunReply& r) { return {{"name", r.name}, {"id", r.id}}; }

Status decode(const json& j, ScheduleRunReply* out) {
  return ArgReader(j).required("name", &out->name).required("id", &out->id).status();
}

}  // namespace sandpool::ops
