#include <sandpool/control/wire_errors.hpp>

#include <array>
#include <utility>

namespace sandpool::control {
namespace {

struct Mapping {
  std::string_view wire;
  Code code;
};

// Wire -> Code. Several wire codes share a Code; code_for_wire keeps the wire code in the
// message so nothing is lost.
constexpr std::array<Mapping, 18> kMappings{{
    {"bad_request", Code::kInvalidArgument},
    {"invalid_argument", Code::kInvalidArgument},
    {"unknown_op", Code::kInvalidArgument},
    {"forbidden", Code::kPermissionDenied},
    {"too_large", Code::kTooLarge},
    {"not_found", Code::kNotFound},
    {"unavailable", Code::kClosed},
    {"closed", Code::kClosed},
    {"busy", Code::kQueueFull},
    {"queue_full", Code::kQueueFull},
    {"timeout", Code::kTimeout},
    {"cancelled", Code::kCancelled},
    {"unsupported_version", Code::kProtocol},
    {"protocol_error", Code::kProtocol},
    {"plugin", Code::kPlugin},
    {"system", Code::kSystem},
    {"internal", Code::kInternal},
    {"conflict", Code::kInvalidArgument},
}};

}  // namespace

std::string_view wire_code(Code code) {
  switch (code) {
    case Code::kInvalidArgument:
      return "bad_request";
    case Code::kPermissionDenied:
      return "forbidden";
    case Code::kUnavailable:
      return "unavailable";
    default:
      return code_name(code);
  }
}

Code code_for_wire(std::string_view wire) {
  for (const Mapping& m : kMappings) {
    if (m.wire == wire) return m.code;
  }
  return Code::kInternal;
}

Status status_from_wire(std::string_view wire, std::string_view message) {
  std::string msg(wire);
  msg += ": ";
  msg += message;
  return Status::error(code_for_wire(wire), std::move(msg));
}

}  // namespace sandpool::control
