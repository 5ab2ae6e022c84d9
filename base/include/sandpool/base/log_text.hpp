// log_text(): text that a worker or a client wrote, made fit for one line of the manager's
// log. Every log call that carries such text (a worker's output and log lines, its errors,
// isolation string and backtrace, a client's name) passes it through here first, so a peer
// can neither split a line (forging the lines after it), nor send escape sequences to the
// terminal that shows the log, nor make one line arbitrarily long.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sandpool {

// The longest text log_text() returns by default (a worker's log or output line).
inline constexpr std::size_t kMaxLogText = 4096;

// Returns `text` with each byte that could act on a terminal or end the line escaped: the C0
// controls and DEL as \xNN (except \t, \n, \r, written so), the C1 controls (U+0080..U+009F)
// and every byte that is not part of well-formed UTF-8 as \xNN per byte, and a backslash as
// \\ (so an escape in the output always stands for a byte of the input). Printable ASCII and
// well-formed UTF-8 pass unchanged. The result is at most `max_bytes` long (at least 16):
// when the escaped text would be longer it is cut before the escape or character that does
// not fit and ends in " [truncated]". Pure; thread-safe.
inline std::string log_text(std::string_view text, std::size_t max_bytes = kMaxLogText) {
  static constexpr std::string_view kTruncated = " [truncated]";
  static constexpr char kHex[] = "0123456789abcdef";
  if (max_bytes < 16) max_bytes = 16;
  std::string out;
  out.reserve(text.size() < max_bytes ? text.size() : max_bytes);
  std::size_t fits = 0;  // the length of `out` up to which the marker still fits after it
  auto emit = [&](std::string_view piece) -> bool {
    if (out.size() + piece.size() > max_bytes) return false;
    out += piece;
    if (out.size() + kTruncated.size() <= max_bytes) fits = out.size();
    return true;
  };
  auto escaped = [](unsigned char c) {
    std::string e = "\\x";
    e += kHex[c >> 4];
    e += kHex[c & 0xf];
    return e;
  };
  // The length of the well-formed UTF-8 sequence starting at text[i] that encodes a
  // character outside the C1 range; 0 when there is none.
  auto utf8_length = [&](std::size_t i) -> std::size_t {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
    const std::size_t left = text.size() - i;
    const auto cont = [&](std::size_t k) { return k < left && (b(k) & 0xc0) == 0x80; };
    const unsigned char c = b(0);
    if (c >= 0xc2 && c <= 0xdf && cont(1)) return c == 0xc2 && b(1) < 0xa0 ? 0 : 2;  // no C1
    if (c >= 0xe0 && c <= 0xef && cont(1) && cont(2)) {
      if (c == 0xe0 && b(1) < 0xa0) return 0;   // overlong
      if (c == 0xed && b(1) >= 0xa0) return 0;  // a UTF-16 surrogate
      return 3;
    }
    if (c >= 0xf0 && c <= 0xf4 && cont(1) && cont(2) && cont(3)) {
      if (c == 0xf0 && b(1) < 0x90) return 0;   // overlong
      if (c == 0xf4 && b(1) >= 0x90) return 0;  // beyond U+10FFFF
      return 4;
    }
    return 0;
  };
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    bool ok = true;
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      ok = emit(text.substr(i, 1));
      ++i;
    } else if (c == '\\' || c == '\t' || c == '\n' || c == '\r') {
      ok = emit(c == '\\' ? "\\\\" : c == '\t' ? "\\t" : c == '\n' ? "\\n" : "\\r");
      ++i;
    } else if (const std::size_t n = c >= 0x80 ? utf8_length(i) : 0; n != 0) {
      ok = emit(text.substr(i, n));
      i += n;
    } else {
      ok = emit(escaped(c));
      ++i;
    }
    if (!ok) {
      out.resize(fits);
      out += kTruncated;
      return out;
    }
  }
  return out;
}

}  // namespace sandpool
