// The task options that both submit's arguments (op_json_submit.cpp) and the `task` reply's
// `submitted` (op_json.cpp) carry, under their wire names: the one list each of them visits.
// not_before_ms and tenant are not in it: submit carries them among its own arguments, but
// the `task` reply carries them at the account's top level for every task (TaskAccount), not
// in `submitted`, which only a task poold holds in memory has.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include <sandpool/base/wall_clock.hpp>

namespace sandpool::ops {

// Calls field(wire name, member) for each shared option of `o` (a TaskOptions, const or not).
template <class Options, class Field>
void task_option_fields(Options& o, Field&& field) {
  field("priority", o.priority);
  field("timeout_ms", o.timeout);
  field("retries", o.retries);
  field("key", o.key);
  field("idempotency_key", o.idempotency_key);
}

// Writes a field that is set: a present optional, true, priority always, and a non-empty
// string, or every string with `every_string` (the `submitted` object writes key and
// idempotency_key even when empty, as it always has).
struct TaskFieldWriter {
  nlohmann::json* j;
  bool every_string = false;
  void operator()(std::string_view name, const std::string& v) const {
    if (every_string || !v.empty()) (*j)[std::string(name)] = v;
  }
  void operator()(std::string_view name, bool v) const {
    if (v) (*j)[std::string(name)] = true;
  }
  void operator()(std::string_view name, std::int32_t v) const { (*j)[std::string(name)] = v; }
  template <class T>
  void operator()(std::string_view name, const std::optional<T>& v) const {
    if (v) (*j)[std::string(name)] = wire(*v);
  }
  static std::int64_t wire(std::chrono::milliseconds d) { return d.count(); }
  static std::uint32_t wire(std::uint32_t n) { return n; }
  static std::int64_t wire(std::chrono::system_clock::time_point t) { return wall_ms_of(t); }
};

}  // namespace sandpool::ops
