// How an attempt is written into a task's hash (feeder::encode, redis_feeder_threads.hpp):
// the JSON every reader of the hash parses, once per end the writer sends; and the compact
// form most attempts are stored in (feeder::encode_stored), read back as that JSON.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include <sandpool/task/enum_names.hpp>

#include "redis/redis_feeder_threads.hpp"

namespace sandpool::redis {

std::string feeder::encode_json(const Attempt& a) {
  nlohmann::json j = {{"number", a.number},         {"outcome", std::string(to_string(a.outcome))},
                      {"error", a.error},           {"worker_pid", a.worker_pid},
                      {"started_ms", a.started_ms}, {"ended_ms", a.ended_ms}};
  if (!a.backtrace.empty()) j["backtrace"] = a.backtrace;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

// Appends `s` as a JSON string, escaped as nlohmann::json's dump() escapes it. False when `s`
// has a byte above 0x7f: UTF-8 to check (and an invalid one to replace), which is
// encode_json()'s to do.
bool append_ascii_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (u >= 0x80) return false;
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < 0x20) {
          constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out.push_back(kHex[u >> 4]);
          out.push_back(kHex[u & 0xf]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
  return true;
}

}  // namespace

std::string feeder::encode(const Attempt& a) {
  // The members in nlohmann::json's order (its objects are sorted by key), so that the two
  // encodings are the same bytes; written by hand, as every end carries one (a json object
  // of six members costs more than the rest of the end's encoding).
  std::string out;
  out.reserve(160 + a.error.size() + a.backtrace.size());
  out += '{';
  if (!a.backtrace.empty()) {
    out += "\"backtrace\":";
    if (!append_ascii_string(out, a.backtrace)) return encode_json(a);
    out += ',';
  }
  out += "\"ended_ms\":";
  out += std::to_string(a.ended_ms);
  out += ",\"error\":";
  if (!append_ascii_string(out, a.error)) return encode_json(a);
  out += ",\"number\":";
  out += std::to_string(a.number);
  out += ",\"outcome\":\"";
  out += to_string(a.outcome);
  out += "\",\"started_ms\":";
  out += std::to_string(a.started_ms);
  out += ",\"worker_pid\":";
  out += std::to_string(a.worker_pid);
  out += '}';
  return out;
}

namespace {

// Appends `n` in decimal.
template <class T>
void append_decimal(std::string& out, T n) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, r.ptr);
}

// The word of `s` from `at` to the next space (or the end) as a number, `at` moved past it;
// false when it is not one.
template <class T>
bool take_decimal(std::string_view s, std::size_t& at, T* out) {
  const std::size_t end = std::min(s.find(' ', at), s.size());
  const auto r = std::from_chars(s.data() + at, s.data() + end, *out);
  if (end == at || r.ec != std::errc() || r.ptr != s.data() + end) return false;
  at = end + 1;
  return true;
}

}  // namespace

std::string feeder::encode_stored(const Attempt& a) {
  if (!a.error.empty() || !a.backtrace.empty() || a.ended_ms < a.started_ms) return encode(a);
  std::string out;
  out.reserve(64);
  append_decimal(out, a.number);
  out += ' ';
  out += to_string(a.outcome);
  out += ' ';
  append_decimal(out, a.worker_pid);
  out += ' ';
  append_decimal(out, a.started_ms);
  out += ' ';
  append_decimal(out, a.ended_ms - a.started_ms);
  if (out.size() > kMaxCompact) return encode(a);
  return out;
}

std::string feeder::stored_as_json(std::string s) {
  if (s.empty() || s.front() == '{') return s;
  Attempt a;
  std::size_t at = 0;
  if (!take_decimal(s, at, &a.number)) return s;
  const std::size_t outcome_end = s.find(' ', at);
  if (outcome_end == std::string::npos) return s;
  const auto outcome =
      parse_enum(std::string_view(s.data() + at, outcome_end - at), Outcome::kCancelled);
  if (!outcome) return s;
  a.outcome = *outcome;
  at = outcome_end + 1;
  std::int64_t took = 0;
  if (!take_decimal(s, at, &a.worker_pid) || !take_decimal(s, at, &a.started_ms) ||
      !take_decimal(s, at, &took) || at <= s.size()) {
    return s;
  }
  a.ended_ms = a.started_ms + took;
  return encode(a);
}

}  // namespace sandpool::redis
