// How sandpool-run prints one task: a JSON object per line, or LINE<TAB>STATE<TAB>TEXT.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <sandpool/task/task.hpp>

namespace sandpool::run {

// Returns true iff `s` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool is_utf8(std::string_view s);

// {"line":N,"id":..,"state":..,["reason":..,]"attempts":N,["result"|"result_base64":..,]"error":..
//  [,"history":[{"number","outcome","error","worker_pid","started_ms","ended_ms"[,"backtrace"]}..]]}
// "history" is there unless the task completed on its first attempt; "backtrace" only for an
// attempt that has one.
// With `result_file` (the completed result was written there, --result-file), "result_file"
// and "result_bytes" stand in place of "result"/"result_base64".
std::string json_line(std::uint64_t line, const TaskResult& r, std::string_view result_file = {});

// LINE<TAB>STATE<TAB>RESULT-or-ERROR, with \n, \t, \r, \\ and other control bytes escaped
// so that one task is always one line. With `result_file`, a completed task's third field is
// "wrote N bytes to PATH".
std::string text_line(std::uint64_t line, const TaskResult& r, std::string_view result_file = {});

}  // namespace sandpool::run
