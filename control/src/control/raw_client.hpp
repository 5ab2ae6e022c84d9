// The Client at the wire's level: any operation name, JSON arguments and replies as they
// travel. Not public (<sandpool/control/client.hpp> has no JSON type): the typed Client is built on
// it, and tests use it to send what the typed API cannot (a malformed argument, an unknown
// operation, a raw event stream).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>
#include <sandpool/base/status.hpp>
#include <sandpool/control/client.hpp>

namespace sandpool {

// A reply or event frame as it came: its JSON object and its blob.
struct Reply {
  nlohmann::json body;  // an object
  std::string blob;     // raw bytes (a task's result), may be empty
};

using EventFn = std::function<void(const Reply& event)>;
using ReplyFn = std::function<void(Result<Reply>)>;

namespace control {

// What the free functions below reach inside a Client.
struct RawAccess {
  static Client::Impl& impl(Client& c) { return *c.impl_; }
  static const Client::Impl& impl(const Client& c) { return *c.impl_; }
};

}  // namespace control

// Sends op/args/blob and waits for the final reply (at most ClientOptions::call_timeout);
// event frames are dropped.
Result<Reply> raw_call(Client& client, const std::string& op,
                       nlohmann::json args = nlohmann::json::object(), std::string blob = {});
// Like raw_call(), with on_event for each event frame before the final reply; no time limit.
Result<Reply> raw_call_streaming(Client& client, const std::string& op, nlohmann::json args,
                                 std::string blob, EventFn on_event);
// Async: on_event for each event frame, then on_done once. Returns the request id (for
// Client::cancel_stream) or the error that kept it from being sent.
Result<std::uint64_t> raw_start(Client& client, const std::string& op, nlohmann::json args,
                                std::string blob, EventFn on_event, ReplyFn on_done);
// The server's hello: {"version","server","rights",...}.
const nlohmann::json& server_hello(const Client& client);

}  // namespace sandpool
