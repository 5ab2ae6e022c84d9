#include "core/declared_types.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

namespace sandpool::core {
namespace {

bool printable(char c) { return c > 0x20 && c < 0x7f; }

// At most 40 bytes of `s`, each byte outside printable ASCII as \xHH.
std::string shown(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < 40; ++i) {
    if (printable(s[i])) {
      out += s[i];
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(s[i]));
      out += hex;
    }
  }
  if (s.size() > 40) out += "...";
  return out;
}

}  // namespace

Status validate_declared_types(const std::vector<std::string>& declared,
                               const std::string& plugin) {
  auto refuse = [&](const std::string& why) {
    return Status::error(Code::kPlugin, "plugin " + plugin + " " + why);
  };
  if (declared.size() > kMaxDeclaredTypes) {
    return refuse("declares " + std::to_string(declared.size()) + " task types (at most " +
                  std::to_string(kMaxDeclaredTypes) + ")");
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < declared.size(); ++i) {
    const std::string& t = declared[i];
    const std::string entry = "task type " + std::to_string(i) + " (\"" + shown(t) + "\")";
    if (t.empty() || t.size() > kMaxTypeLength) {
      return refuse("declares " + entry + " of " + std::to_string(t.size()) + " bytes (1 to " +
                    std::to_string(kMaxTypeLength) + ")");
    }
    if (!std::all_of(t.begin(), t.end(), printable)) {
      return refuse("declares " + entry +
                    " with a byte that is not printable ASCII (spaces and control characters "
                    "are refused)");
    }
    if (!seen.insert(t).second) return refuse("declares " + entry + " twice");
  }
  return Status::ok();
}

}  // namespace sandpool::core
