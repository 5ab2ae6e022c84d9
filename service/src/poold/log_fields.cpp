#include "poold/log_fields.hpp"

#include <charconv>
#include <cstdint>

namespace sandpool::poold {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// "0", "17", "-3"; not "007", "+1", "1e3" or anything beyond int64.
bool canonical_integer(std::string_view v) {
  std::string_view digits = v.substr(!v.empty() && v[0] == '-' ? 1 : 0);
  if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return false;
  if (v == "-0") return false;
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  return ec == std::errc() && end == v.data() + v.size();
}

}  // namespace

std::vector<LogField> parse_log_fields(std::string_view m) {
  std::vector<LogField> fields;
  std::size_t i = 0;
  while (i < m.size()) {
    while (i < m.size() && is_space(m[i])) ++i;
    const std::size_t word = i;
    // Key.
    std::size_t k = i;
    if (k < m.size() && is_alpha(m[k])) {
      ++k;
      while (k < m.size() && (is_alpha(m[k]) || is_digit(m[k]) || m[k] == '.')) ++k;
    }
    if (k > word && k < m.size() && m[k] == '=') {
      LogField f{.key = std::string(m.substr(word, k - word)), .value = {}, .is_integer = false};
      std::size_t v = k + 1;
      if (v < m.size() && m[v] == '"') {
        bool closed = false;
        for (++v; v < m.size(); ++v) {
          if (m[v] == '\\' && v + 1 < m.size() && (m[v + 1] == '"' || m[v + 1] == '\\')) {
            f.value += m[++v];
          } else if (m[v] == '"') {
            closed = true;
            ++v;
            break;
          } else {
            f.value += m[v];
          }
        }
        if (closed) {
          fields.push_back(std::move(f));
          i = v;
          continue;
        }
      } else {
        while (v < m.size() && !is_space(m[v])) ++v;
        f.value = std::string(m.substr(k + 1, v - k - 1));
        f.is_integer = canonical_integer(f.value);
        fields.push_back(std::move(f));
        i = v;
        continue;
      }
    }
    // Not a field: skip the word.
    while (i < m.size() && !is_space(m[i])) ++i;
  }
  return fields;
}

}  // namespace sandpool::poold
