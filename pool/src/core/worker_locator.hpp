// Finds the worker host executable.
#pragma once

#include <string>

#include <sandpool/base/status.hpp>

namespace sandpool::core {

// Returns `configured` when set (it must be an executable file); otherwise the first
// executable of: sandpool-worker beside the running program, $SANDPOOL_WORKER, the libexec
// directory of the install tree the program sits in (bin/../libexec/sandpool), the libexec
// path of the configured install prefix. The error lists where it looked.
Result<std::string> locate_worker(const std::string& configured);

}  // namespace sandpool::core
