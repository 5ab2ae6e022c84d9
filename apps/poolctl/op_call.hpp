// poolctl speaks the typed operations (<sandpool/control/control_ops.hpp>) through Client::call<Op>
// and prints each reply from its JSON form (the one mapping,
// control/include/sandpool/control/op_json.hpp): as is with --json, or rendered for people
// (output.hpp), which reads any reply alike.
#pragma once

#include <string>
#include <utility>

#include <nlohmann/json.hpp>
#include <sandpool/control/client.hpp>

#include <sandpool/control/op_json.hpp>

namespace sandpool::poolctl {

// Runs Op and returns its reply as JSON.
template <class Op>
Result<nlohmann::json> json_call(Client& client, const typename Op::Args& args) {
  auto r = client.call<Op>(args);
  if (!r) return r.status();
  return ops::encode(*r);
}

// The same with a request blob (dlq_import's lines); the reply's blob is dropped.
template <class Op>
Result<nlohmann::json> json_call_with_blob(Client& client, const typename Op::Args& args,
                                           std::string blob) {
  auto r = client.call_with_blob<Op>(args, std::move(blob));
  if (!r) return r.status();
  return ops::encode(r->reply);
}

// The same with Op's arguments given as JSON (the dlq filters, which the offline store reads
// too): decoded first, so a malformed one is refused here as the service would refuse it.
template <class Op>
Result<nlohmann::json> json_call_from(Client& client, const nlohmann::json& args) {
  typename Op::Args typed;
  if (Status st = ops::decode(args, &typed); !st) return st;
  return json_call<Op>(client, typed);
}

}  // namespace sandpool::poolctl
