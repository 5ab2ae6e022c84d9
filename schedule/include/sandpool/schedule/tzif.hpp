// A TZif file (RFC 8536, versions 1-4), the tz database's compiled form
// (/usr/share/zoneinfo/Europe/Berlin), read into what a schedule needs: the UTC offset at
// an instant. Version 2+ files are read from their 64-bit block and their footer's POSIX TZ
// rule (<sandpool/schedule/posix_tz.hpp>), which gives the instants after the last transition (a
// "slim" file has few transitions and leans on it; Debian's 2025b files are "fat", with
// transitions to 2037). Version 1 files are read from their 32-bit block.
//
// Every byte is hostile: the size is capped, each count is checked against the bytes that
// are there before anything is allocated or indexed, transitions must ascend, each type
// index must name a type, offsets must be within RFC 8536's bounds. Leap-second files (the
// `right/` tree) are refused: schedules run on POSIX time.
//
// Thread-safety: a parsed file is an immutable value.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/schedule/posix_tz.hpp>

namespace sandpool {

// The largest TZif file read (tzdata's largest is under 4 KiB).
inline constexpr std::size_t kMaxTzifBytes = 64 * 1024;

struct Tzif {
  int version = 1;                             // 1-4
  std::vector<std::int64_t> transitions;       // Unix seconds, strictly ascending
  std::vector<std::uint8_t> transition_types;  // per transition, an index into type_offsets
  std::vector<std::int32_t> type_offsets;      // per local time type, seconds east of UTC
  std::optional<PosixTz> footer;               // version 2+ with a non-empty TZ string

  // Returns the offset (seconds east of UTC) at Unix seconds `t`: type 0's before the first
  // transition, the footer's from the last one on, as glibc reads it (the last transition's
  // type without a footer; a valid file's footer agrees with that type).
  std::int64_t utc_offset(std::int64_t t) const;
};

// Returns the zone `bytes` holds, or an invalid-argument error saying what is wrong.
Result<Tzif> parse_tzif(std::string_view bytes);

}  // namespace sandpool
