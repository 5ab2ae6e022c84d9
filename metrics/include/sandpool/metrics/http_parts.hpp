// The HTTP server's small pure pieces, apart so that tests and the fuzzer reach them without
// a socket: the listen address, a request target split and decoded, error answers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <sandpool/base/status.hpp>

#include <sandpool/metrics/http_server.hpp>

namespace sandpool::http_parts {

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};
// "host:port" or "[v6]:port"; errors name `what` (the config key).
Result<HostPort> parse_listen(std::string_view listen, std::string_view what);

// Fills `req`'s path (percent-decoded), query and params from `target` ("/p?a=1"). Fails
// (kInvalidArgument, the message names the part) when the target is not an absolute path,
// an escape is malformed, or a decoded text is not UTF-8 or holds a control character.
Status split_target(std::string_view target, HttpRequest* req);

// `res` as the JSON error {"error": code, "message": message} with `status`; the code is
// the wire vocabulary's for the status (too_large, busy, ...). Never throws on bad bytes.
void error_answer(HttpResponse& res, int status, std::string_view message);

// `s` fit for a log line or an error message: at most 200 bytes, bytes that are not
// printable UTF-8 as \xNN.
std::string printable(std::string_view s);

}  // namespace sandpool::http_parts
