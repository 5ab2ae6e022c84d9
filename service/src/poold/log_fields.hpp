// The structured fields of a log message: `key=value` pairs written into the text, which the
// JSON log format lifts into fields of their own.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sandpool::poold {

struct LogField {
  std::string key;
  std::string value;        // unquoted, unescaped
  bool is_integer = false;  // a canonical decimal integer that fits int64 (`pid=123`, `n=-4`)

  bool operator==(const LogField&) const = default;
};

// Returns the fields of `message`, in order. A field is a word (at the start or after
// whitespace) of the form key=value:
// - key: a letter or '_', then letters, digits, '_' or '.';
// - value: up to the next whitespace (possibly empty), or a double-quoted string in which
//   \" and \\ stand for " and \ (an unterminated quote makes the word no field);
// so "worker pid=42 exited reason=\"out of memory\" ok" has pid=42 and reason=out of memory.
// Anything else is text. Pure function; thread-safe.
std::vector<LogField> parse_log_fields(std::string_view message);

}  // namespace sandpool::poold
