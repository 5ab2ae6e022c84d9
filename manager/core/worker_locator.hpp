// Finds the worker host executable.
#pragma once

#include <string>

#include <sandpool/status.hpp>

namespace sandpool::core {

// Returns `configured` when set (it must be an executable file); otherwise the first
// executable of: sandpool-worker beside the running program, $SANDPOOL_WORKER, the
// installed libexec path. The error lists where it looked.
Result<std::string> locate_worker(const std::string& configured);

}  // namespace sandpool::core
