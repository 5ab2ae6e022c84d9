// The JSON mapping of the admin operations' types: dlq_import, reload, shutdown (op_json.hpp).
#include <utility>

#include <sandpool/control/op_json.hpp>

namespace sandpool::ops {
namespace {

using nlohmann::json;

template <class T>
json encode_all(const std::vector<T>& items) {
  json out = json::array();
  for (const T& item : items) out.push_back(encode(item));
  return out;
}

}  // namespace

json encode(const DlqImportArgs& a) { return {{"source", a.source}, {"first_line", a.first_line}}; }

Status decode(const json& j, DlqImportArgs* out) {
  Status st = ArgReader(j)
                  .optional("source", &out->source)
                  .optional("first_line", &out->first_line)
                  .status();
  if (st && out->first_line == 0) {
    return Status::invalid("field \"first_line\": expected a line number from 1");
  }
  return st;
}

json encode(const DlqImportReply& r) {
  return {{"imported", r.imported}, {"already_present", r.already_present}};
}

Status decode(const json& j, DlqImportReply* out) {
  return ArgReader(j)
      .required("imported", &out->imported)
      .required("already_present", &out->already_present)
      .status();
}

json encode(const ReloadReconfigured& r) {
  return {{"pool", r.pool}, {"rolling_restart", r.rolling_restart}};
}

Status decode(const json& j, ReloadReconfigured* out) {
  return ArgReader(j)
      .required("pool", &out->pool)
      .optional("rolling_restart", &out->rolling_restart)
      .status();
}

json encode(const ReloadScaled& r) { return {{"pool", r.pool}, {"workers", r.workers}}; }

Status decode(const json& j, ReloadScaled* out) {
  return ArgReader(j).required("pool", &out->pool).required("workers", &out->workers).status();
}

json encode(const ReloadFailure& r) { return {{"pool", r.pool}, {"error", r.error}}; }

Status decode(const json& j, ReloadFailure* out) {
  return ArgReader(j).required("pool", &out->pool).optional("error", &out->error).status();
}

json encode(const ReloadReply& r) {
  return {{"added", r.added},
          {"removed", r.removed},
          {"replaced", r.replaced},
          {"reconfigured", encode_all(r.reconfigured)},
          {"scaled", encode_all(r.scaled)},
          {"strategy_changed", r.strategy_changed},
          {"failed", encode_all(r.failed)},
          {"service_section_needs_restart", r.service_section_needs_restart}};
}

Status decode(const json& j, ReloadReply* out) {
  Status st = ArgReader(j)
                  .optional("added", &out->added)
                  .optional("removed", &out->removed)
                  .optional("replaced", &out->replaced)
                  .optional("strategy_changed", &out->strategy_changed)
                  .optional("service_section_needs_restart", &out->service_section_needs_restart)
                  .status();
  if (!st) return st;
  if (st = decode_array(j, "reconfigured", &out->reconfigured); !st) return st;
  if (st = decode_array(j, "scaled", &out->scaled); !st) return st;
  return decode_array(j, "failed", &out->failed);
}

json encode(const ShutdownArgs& a) {
  json j = json::object();
  if (a.timeout) j["timeout_ms"] = a.timeout->count();
  return j;
}

Status decode(const json& j, ShutdownArgs* out) {
  return ArgReader(j).optional("timeout_ms", &out->timeout).status();
}

json encode(const ShutdownReply& r) { return {{"stopping", r.stopping}}; }

Status decode(const json& j, ShutdownReply* out) {
  return ArgReader(j).required("stopping", &out->stopping).status();
}

}  // namespace sandpool::ops
