// Tests read poold's replies by name, as JSON: the typed Client's replies in their wire form
// (the one mapping, op_json.hpp) and the wire-level calls (raw_client.hpp) for what the typed
// API cannot send (a malformed argument, an unknown operation).
#pragma once

#include <string>
#include <utility>

#include <nlohmann/json.hpp>
#include <sandpool/control/client.hpp>

#include <sandpool/control/op_json.hpp>
#include "control/raw_client.hpp"

namespace sandpool {

// A typed reply as the JSON poold sent.
template <class T>
Result<nlohmann::json> as_json(const Result<T>& r) {
  if (!r) return r.status();
  return ops::encode(*r);
}

// A task's account as the JSON poold sent.
inline nlohmann::json account_json(const TaskReply& t) { return ops::encode(t.account); }

// The final reply's JSON of `op` sent as is.
inline Result<nlohmann::json> raw_body(Client& client, const std::string& op,
                                       nlohmann::json args = nlohmann::json::object(),
                                       std::string blob = {}) {
  auto r = raw_call(client, op, std::move(args), std::move(blob));
  if (!r) return r.status();
  return std::move(r->body);
}

}  // namespace sandpool
