// The task types a worker declares in its Ready message (the plugin's
// sp_plugin_task_types, or whatever a hostile worker forges): worker-written input that
// names routes, logs and metric labels, so it is bounded before the pool believes it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <sandpool/base/status.hpp>

namespace sandpool::core {

inline constexpr std::size_t kMaxDeclaredTypes = 64;
inline constexpr std::size_t kMaxTypeLength = 128;

// Ok iff `declared` holds at most kMaxDeclaredTypes types, each of 1..kMaxTypeLength bytes
// of printable ASCII other than space, none twice. Otherwise kPlugin naming `plugin` and
// the first offending entry (shown escaped, never raw).
Status validate_declared_types(const std::vector<std::string>& declared, const std::string& plugin);

}  // namespace sandpool::core
