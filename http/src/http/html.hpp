// HTML for the dashboard: escaping (every value that comes from a task, a plugin or a
// request passes through escape() before it reaches a page) and the few formats the pages
// share. Pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sandpool::http {

// `text` fit for an HTML text node or a quoted attribute value: & < > " ' as entities.
// Bytes that are not well-formed UTF-8 and control characters show as \xNN (log_text()).
std::string escape(std::string_view text);
// A preview of task bytes (a payload or result): at most `max_bytes` of escaped text, with
// the total size when cut.
std::string preview(std::string_view bytes, std::size_t max_bytes = 4096);
// `text` for a URL's query value (percent-encoding all but unreserved characters).
std::string url_encode(std::string_view text);
// Wall-clock ms since the epoch as "YYYY-MM-DD HH:MM:SS" (UTC); "-" for 0.
std::string format_time(std::int64_t wall_ms);
// A duration in ms as "1h 2m", "3.4s", "12ms".
std::string format_duration(std::int64_t ms);
// Bytes as "12.3 MiB".
std::string format_bytes(std::uint64_t bytes);

}  // namespace sandpool::http
