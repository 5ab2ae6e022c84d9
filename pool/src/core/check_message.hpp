// check_message(): what the manager accepts of a frame a worker wrote to its result ring.
// A pure function, so that every reason to refuse a (possibly hostile) worker's message is
// unit-tested without a process (tests/manager/check_message_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

#include <sandpool/base/status.hpp>
#include <sandpool/ipc/messages.hpp>

namespace sandpool::core {

// Worker-writable sizes the manager keeps, whatever a frame claims: the worker host's own
// caps (host_api.hpp), enforced again here for a worker that forges its frames.
struct MessageLimits {
  std::uint64_t max_result = 0;               // PoolOptions::max_result
  std::size_t max_task_error = 4096;          // a result's error text
  std::size_t max_progress_data = 64 * 1024;  // a progress report's data
  std::size_t max_isolation = 256;            // a Ready's isolation string
};

// One message from a worker, decoded and bounded.
using WorkerMessage = std::variant<ipc::ResultMsg, ipc::ProgressMsg, ipc::LogMsg, ipc::ReadyMsg>;

// Decodes `frame`, a message of `kind`, into *out and bounds what the worker wrote: a
// result's data over max_result makes it kResultTooLarge without data, an error text over
// max_task_error is cut (supervision::capped_log_line), progress data is cut at
// max_progress_data, a Ready's isolation is made printable and at most max_isolation bytes
// (log_text). Returns the protocol error naming what was wrong (*out is then unspecified): a
// frame that does not decode as its kind, or an unknown kind. What depends on the worker's
// state (a second Ready, a result for a task not in flight) is the caller's to check.
// Decodes in place (no copy of the frame's strings beyond the decode itself): it is on the
// path of every result.
Status check_message(std::uint16_t kind, std::string_view frame, const MessageLimits& limits,
                     WorkerMessage* out);

}  // namespace sandpool::core
