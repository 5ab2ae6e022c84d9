// The JSON mapping of the dead-letter operations' types: dlq_list, dlq_show, dlq_replay,
// dlq_purge (op_json.hpp). A filter's members are typed like every other argument: a member
// of the wrong type is refused naming it, never ignored.
#include <utility>

#include <sandpool/control/op_json.hpp>

namespace sandpool::ops {
namespace {

using nlohmann::json;

template <class T>
void put_optional(json& j, const char* name, const std::optional<T>& value) {
  if (value) j[name] = *value;
}

}  // namespace

json encode(const DlqFilter& f) {
  json j = json::object();
  put_optional(j, "pool", f.pool);
  put_optional(j, "type", f.type);
  put_optional(j, "reason", f.reason);
  put_optional(j, "task_id", f.task_id);
  put_optional(j, "since_ms", f.since_ms);
  put_optional(j, "until_ms", f.until_ms);
  return j;
}

Status decode(const json& j, DlqFilter* out) {
  if (!j.is_object()) return Status::invalid("filter: an object");
  return ArgReader(j)
      .optional("pool", &out->pool)
      .optional("type", &out->type)
      .optional("reason", &out->reason)
      .optional("task_id", &out->task_id)
      .optional("since_ms", &out->since_ms)
      .optional("until_ms", &out->until_ms)
      .status();
}

json encode(const DlqListArgs& a) {
  json j = encode(a.filter);
  j["limit"] = a.limit;
  put_optional(j, "cursor", a.cursor);
  return j;
}

Status decode(const json& j, DlqListArgs* out) {
  if (Status st = decode(j, &out->filter); !st) return st;
  return ArgReader(j).optional("limit", &out->limit).optional("cursor", &out->cursor).status();
}

json encode(const DeadLetterEntry& e) {
  json j = encode(e.task);
  j["letter_id"] = e.letter_id;
  j["task_id"] = e.task.id;
  j["pool"] = e.pool;
  j["dead_lettered_ms"] = e.dead_lettered_ms;
  j["payload_bytes"] = e.payload_bytes;
  return j;
}

Status decode(const json& j, DeadLetterEntry* out) {
  if (Status st = decode(j, &out->task); !st) return st;
  return ArgReader(j)
      .required("letter_id", &out->letter_id)
      .required("pool", &out->pool)
      .optional("dead_lettered_ms", &out->dead_lettered_ms)
      .optional("payload_bytes", &out->payload_bytes)
      .status();
}

json encode(const DlqListReply& r) {
  json entries = json::array();
  for (const DeadLetterEntry& e : r.entries) entries.push_back(encode(e));
  json j{{"entries", std::move(entries)}};
  put_optional(j, "next_cursor", r.next_cursor);
  return j;
}

Status decode(const json& j, DlqListReply* out) {
  if (Status st = ArgReader(j).optional("next_cursor", &out->next_cursor).status(); !st) {
    return st;
  }
  return decode_array(j, "entries", &out->entries);
}

json encode(const DlqShowArgs& a) { return {{"id", a.id}}; }

Status decode(const json& j, DlqShowArgs* out) {
  return ArgReader(j).required("id", &out->id).status();
}

json encode(const LetterOptions& o) {
  json j{{"priority", o.priority}, {"key", o.key}};
  if (o.timeout) j["timeout_ms"] = o.timeout->count();
  put_optional(j, "retries", o.retries);
  if (!o.tenant.empty()) j["tenant"] = o.tenant;
  return j;
}

Status decode(const json& j, LetterOptions* out) {
  return ArgReader(j)
      .optional("priority", &out->priority)
      .optional("key", &out->key)
      .optional("timeout_ms", &out->timeout)
      .optional("retries", &out->retries)
      .optional("tenant", &out->tenant)
      .status();
}

json encode(const DlqShowReply& r) {
  json j = encode(r.letter);
  j["options"] = encode(r.options);
  return j;
}

Status decode(const json& j, DlqShowReply* out) {
  if (Status st = decode(j, &out->letter); !st) return st;
  if (!j.contains("options")) return Status::ok();
  if (Status st = decode(j["options"], &out->options); !st) return st.with_context("options");
  return Status::ok();
}

json encode(const DlqSelector& s) {
  json j = json::object();
  put_optional(j, "id", s.id);
  if (s.filter) j["filter"] = encode(*s.filter);
  if (s.older_than_ms) j["older_than_ms"] = s.older_than_ms->count();
  if (s.all) j["all"] = true;
  return j;
}

Status decode(const json& j, DlqSelector* out) {
  Status st = ArgReader(j)
                  .optional("id", &out->id)
                  .optional("older_than_ms", &out->older_than_ms)
                  .optional("all", &out->all)
                  .status();
  if (!st || !j.contains("filter")) return st;
  out->filter.emplace();
  if (st = decode(j["filter"], &*out->filter); !st) return st.with_context("filter");
  return Status::ok();
}

json encode(const DlqReplayReply& r) {
  json j{{"replayed", r.ids.size()}, {"ids", r.ids}, {"failed", r.failed}};
  if (!r.first_error.empty()) j["first_error"] = r.first_error;
  return j;
}

Status decode(const json& j, DlqReplayReply* out) {
  Status st = ArgReader(j)
                  .optional("failed", &out->failed)
                  .optional("first_error", &out->first_error)
                  .status();
  if (!st) return st;
  return decode_numbers(j, "ids", &out->ids);
}

json encode(const DlqPurgeReply& r) {
  json j{{"purged", r.purged}};
  if (!r.first_error.empty()) j["first_error"] = r.first_error;
  return j;
}

Status decode(const json& j, DlqPurgeReply* out) {
  return ArgReader(j)
      .required("purged", &out->purged)
      .optional("first_error", &out->first_error)
      .status();
}

}  // namespace sandpool::ops
