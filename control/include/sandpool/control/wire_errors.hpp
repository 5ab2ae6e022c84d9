// The control protocol's error vocabulary (docs/protocol.md, "Errors") and its mapping to
// and from sandpool::Code. Shared by the server and the client.
#pragma once

#include <string>
#include <string_view>

#include <sandpool/base/status.hpp>

namespace sandpool::control {

// The wire code for a Status ("bad_request" for kInvalidArgument, "forbidden", ...).
std::string_view wire_code(Code code);
// The Code a wire error code maps to (unknown codes: kInternal).
Code code_for_wire(std::string_view wire);
// A Status for a server error reply: code_for_wire(wire), message "<wire>: <message>".
Status status_from_wire(std::string_view wire, std::string_view message);

}  // namespace sandpool::control
