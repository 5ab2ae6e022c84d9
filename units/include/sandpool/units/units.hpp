// Human units for sizes and durations, shared by the CLI tools and the config parser.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include <sandpool/base/status.hpp>

namespace sandpool {

// "250ms", "30s", "1m", "2h", "1.5s"; a bare number means `bare_unit` (seconds for the
// command lines); with a zero `bare_unit` a unit is required (bare "0" still means zero).
// Negative or malformed values are errors that quote the text.
Result<std::chrono::milliseconds> parse_duration(
    std::string_view text, std::chrono::milliseconds bare_unit = std::chrono::seconds(1));
// "512", "64KiB", "256MiB", "1GiB", "10MB" (powers of 1000 for KB/MB/GB).
Result<std::uint64_t> parse_size(std::string_view text);

}  // namespace sandpool
