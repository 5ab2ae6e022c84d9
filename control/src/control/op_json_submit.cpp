// The JSON mapping of submit and submit_batch (docs/protocol.md, "submit", "submit_batch").
#include <string>
#include <utility>
#include <vector>

#include <sandpool/control/op_json.hpp>

#include "task_option_fields.hpp"

namespace sandpool::ops {

using nlohmann::json;

namespace {

// One task's arguments of a batch (submit_batch's `defaults` and `tasks`), each under its
// wire name: the first part of submit_fields() and what batch_task_arg_names() prints.
template <class Args, class Field>
void batch_task_fields(Args& a, Field&& field) {
  field("type", a.type);
  field("pool", a.pool);
  task_option_fields(a.options, field);  // priority, timeout_ms, retries, key, idempotency_key
  field("not_before_ms", a.options.not_before);
  field("delay_ms", a.delay);
  field("tenant", a.options.tenant);
}

// submit's arguments, each under its wire name: the one list encode(), decode() and
// submit_arg_names() read. `Args` is SubmitArgs or const SubmitArgs. A batch's task reads
// the first part only (wait, progress and request_token are the request's).
template <class Args, class Field>
void submit_fields(Args& a, Field&& field) {
  batch_task_fields(a, field);
  field("wait", a.wait);
  field("progress", a.progress);
  field("request_token", a.request_token);
}

}  // namespace

json encode(const SubmitArgs& a) {
  json j{{"type", a.type}};  // type even when empty
  submit_fields(a, TaskFieldWriter{&j});
  return j;
}

// `type` may be missing here: a batch's task without one is refused on its own (an entry of
// the reply's errors), not the whole request; the handler checks it.
Status decode(const json& j, SubmitArgs* out) {
  ArgReader r(j);
  submit_fields(*out, [&r](std::string_view name, auto& member) { r.optional(name, &member); });
  return r.status();
}

std::vector<std::string_view> submit_arg_names() {
  std::vector<std::string_view> names;
  SubmitArgs a;
  submit_fields(a, [&names](std::string_view name, auto&) { names.push_back(name); });
  return names;
}

std::vector<std::string_view> batch_task_arg_names() {
  std::vector<std::string_view> names;
  SubmitArgs a;
  batch_task_fields(a, [&names](std::string_view name, auto&) { names.push_back(name); });
  return names;
}

json encode(const SubmitReply& r) {
  if (r.task) return encode(*r.task);
  return {{"id", r.id}, {"existing", r.existing}};
}

Status decode(const json& j, SubmitReply* out) {
  if (j.is_object() && j.contains("state")) {
    TaskAccount task;
    if (Status st = decode(j, &task); !st) return st;
    out->id = task.id;
    out->task = std::move(task);
    return Status::ok();
  }
  return ArgReader(j).required("id", &out->id).optional("existing", &out->existing).status();
}

json encode(const SubmitEvent& e) {
  json j{{"event", e.event}, {"id", e.id}};
  if (e.event == "accepted") j["existing"] = e.existing;
  return j;
}

Status decode(const json& j, SubmitEvent* out) {
  return ArgReader(j)
      .required("event", &out->event)
      .required("id", &out->id)
      .optional("existing", &out->existing)
      .status();
}

json encode(const SubmitBatchArgs& a) {
  json j{{"payload_lens", a.payload_lens}};
  if (a.defaults) j["defaults"] = encode(*a.defaults);
  if (a.tasks) {
    json tasks = json::array();
    for (const SubmitArgs& t : *a.tasks) tasks.push_back(encode(t));
    j["tasks"] = std::move(tasks);
  }
  if (!a.request_token.empty()) j["request_token"] = a.request_token;
  return j;
}

Status decode(const json& j, SubmitBatchArgs* out) {
  if (!j.is_object()) return Status::invalid("arguments: expected an object");
  if (!j.contains("payload_lens")) {
    return Status::invalid("field \"payload_lens\": missing, expected one length per task");
  }
  if (Status st = decode_numbers(j, "payload_lens", &out->payload_lens); !st) return st;
  if (const auto d = j.find("defaults"); d != j.end()) {
    if (!d->is_object()) return Status::invalid("field \"defaults\": expected an object");
    SubmitArgs defaults;
    if (Status st = decode(*d, &defaults); !st) return st.with_context("defaults");
    out->defaults = std::move(defaults);
  }
  if (j.contains("tasks")) {
    std::vector<SubmitArgs> tasks;
    if (Status st = decode_array(j, "tasks", &tasks); !st) return st;
    if (tasks.size() != out->payload_lens.size()) {
      return Status::invalid("field \"tasks\": expected one object per payload_lens entry");
    }
    out->tasks = std::move(tasks);
  }
  return ArgReader(j).optional("request_token", &out->request_token).status();
}

std::string request_key(const std::string& token, std::optional<std::size_t> index) {
  std::string key = "req:" + token;
  if (index) key += ":" + std::to_string(*index);
  return key;
}

json encode(const BatchRefusal& r) {
  return {{"index", r.index}, {"code", r.code}, {"message", r.message}};
}

Status decode(const json& j, BatchRefusal* out) {
  return ArgReader(j)
      .required("index", &out->index)
      .required("code", &out->code)
      .optional("message", &out->message)
      .status();
}

json encode(const SubmitBatchReply& r) {
  json j{{"ids", r.ids}};
  if (!r.existing.empty()) j["existing"] = r.existing;
  if (!r.errors.empty()) {
    json errors = json::array();
    for (const BatchRefusal& e : r.errors) errors.push_back(encode(e));
    j["errors"] = std::move(errors);
  }
  if (r.refused_from) j["refused_from"] = encode(*r.refused_from);
  return j;
}

Status decode(const json& j, SubmitBatchReply* out) {
  if (!j.is_object() || !j.contains("ids")) {
    return Status::invalid("field \"ids\": missing, expected an array");
  }
  if (Status st = decode_numbers(j, "ids", &out->ids); !st) return st;
  if (Status st = decode_numbers(j, "existing", &out->existing); !st) return st;
  if (Status st = decode_array(j, "errors", &out->errors); !st) return st;
  if (const auto rf = j.find("refused_from"); rf != j.end()) {
    BatchRefusal refusal;
    if (Status st = decode(*rf, &refusal); !st) return st.with_context("refused_from");
    out->refused_from = std::move(refusal);
  }
  return Status::ok();
}

}  // namespace sandpool::ops
