// Dead letters as JSON lines: the spill files DeadLetterStore writes when it cannot put a
// letter in its database, and what `poolctl dlq import` reads back (docs/dead-letters.md,
// "Spill files", documents the format).
//
// One letter per line, one JSON object each, holding every field a replay needs: pool, task
// id, type, payload (base64), options, reason, error, every attempt and dead_lettered_ms. A
// text field that is not valid UTF-8 is written as {"base64": "..."} so that it comes back
// byte for byte.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/store/dead_letters.hpp>

namespace sandpool::dead_letter_file {

// Spill files are named <state_dir>/<kSpillPrefix><UTC time>.jsonl.
inline constexpr std::string_view kSpillPrefix = "unwritten-dead-letters-";
// The format version every line carries ("version"); parse() refuses other versions.
inline constexpr int kFormatVersion = 1;

// Returns the letter as one line of JSON, ending in '\n'. letter_id is not written.
std::string to_line(const DeadLetter& letter);

// Parses JSON-lines text; empty lines are skipped. Returns every letter (letter_id 0, state
// kDeadLettered), or, for the first line that is not a complete letter, kInvalidArgument
// "<source> line N: <what is wrong>", N counting from first_line.
Result<std::vector<DeadLetter>> parse(std::string_view text, std::string_view source,
                                      std::uint64_t first_line = 1);

// Writes the letters to a new file <dir>/unwritten-dead-letters-<UTC time>.jsonl (mode 0600,
// never an existing file: a suffix -2, -3, ... when the name is taken), fsyncs it and then
// `dir`, and returns its path. now_ms names the file. On an error the partial file is
// removed and nothing is left behind.
Result<std::string> write_spill(const std::string& dir,
                                const std::vector<const DeadLetter*>& letters, std::int64_t now_ms);

// Returns the whole content of the file at `path`.
Result<std::string> read_file(const std::string& path);

// Base64 (RFC 4648, with padding). decode_base64 returns nullopt for anything else.
std::string encode_base64(std::string_view bytes);
std::optional<std::string> decode_base64(std::string_view text);

}  // namespace sandpool::dead_letter_file
