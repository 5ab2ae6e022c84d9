// The messages between the manager and a worker, and their codec (cereal, through
// bounded archives: every declared length is checked against the bytes present before
// anything is allocated, because the bytes come from worker-writable memory).
//
// Conversation (docs/protocol.md, "Worker channel"):
//   worker: ReadyMsg once, after the plugin's init and the sandbox are in place.
//   manager: TaskMsg ... ; CancelMsg for a task not yet started; StopMsg to drain and exit.
//   worker: per task, any ProgressMsg / LogMsg, then exactly one ResultMsg.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/base/status.hpp>

namespace sandpool::ipc {

enum class MsgKind : std::uint16_t {
  // manager -> worker (task ring)
  kTask = 1,
  kCancel = 2,
  kStop = 3,
  // worker -> manager (result ring)
  kReady = 16,
  kResult = 17,
  kProgress = 18,
  kLog = 19,
};

struct TaskMsg {
  static constexpr MsgKind kKind = MsgKind::kTask;
  std::uint64_t id = 0;
  std::uint32_t attempt = 1;
  std::int64_t deadline_mono_ms = 0;  // CLOCK_MONOTONIC ms when the timeout fires; 0: none
  std::string type;
  std::string payload;
};

// TaskMsg's wire form built from borrowed strings (the manager's hot path: no copy of the
// payload before it is encoded). Encodes byte for byte like the TaskMsg with the same values.
struct TaskMsgView {
  static constexpr MsgKind kKind = MsgKind::kTask;
  std::uint64_t id = 0;
  std::uint32_t attempt = 1;
  std::int64_t deadline_mono_ms = 0;
  std::string_view type;
  std::string_view payload;
};

struct CancelMsg {
  static constexpr MsgKind kKind = MsgKind::kCancel;
  std::uint64_t id = 0;
};

struct StopMsg {
  static constexpr MsgKind kKind = MsgKind::kStop;
};

struct ReadyMsg {
  static constexpr MsgKind kKind = MsgKind::kReady;
  std::uint32_t pid = 0;
  std::vector<std::string> task_types;  // from sp_plugin_task_types; empty when undeclared
  // The lock-down in effect, as the worker applied it: "+"-joined layers, e.g.
  // "rlimits+uid:65534+caps:none+landlock:v7+seccomp:strict" (docs/security.md).
  std::string isolation;
};

// What handle() came to. kCancelled: the task was cancelled before it started.
// kResultTooLarge: write_result went past max_result (a permanent failure). kLimit: handle
// returned SP_LIMIT, it stopped at a limit of its own (outcome resource_limit, retried).
enum class TaskStatus : std::uint8_t {
  kOk = 0,
  kRetry = 1,
  kFail = 2,
  kCancelled = 3,
  kResultTooLarge = 4,
  kLimit = 5
};

struct ResultMsg {
  static constexpr MsgKind kKind = MsgKind::kResult;
  std::uint64_t id = 0;
  TaskStatus status = TaskStatus::kOk;
  std::string data;   // the result (kept only for kOk)
  std::string error;  // set_error's text, for kRetry / kFail / kLimit
};

struct ProgressMsg {
  static constexpr MsgKind kKind = MsgKind::kProgress;
  std::uint64_t id = 0;
  std::string data;
};

struct LogMsg {
  static constexpr MsgKind kKind = MsgKind::kLog;
  std::uint64_t id = 0;    // the task being handled, 0 when none (init, shutdown)
  std::uint8_t level = 1;  // 0 debug, 1 info, 2 warn, 3 error
  std::string text;
};

// Encoders replace *out's contents. They count a message's bytes first and reserve them,
// unless *out's capacity is kEncodeScratchBytes or more: a buffer kept for encoding (a
// channel's scratch, reserved so once) then only grows when a message needs it.
inline constexpr std::size_t kEncodeScratchBytes = 4096;
// Decoders return Status::protocol(...) naming what was wrong for truncated input, a length
// beyond the bytes present, an out-of-range enum, more than kMaxListItems list items, or
// trailing bytes; *m is then unspecified.
inline constexpr std::uint32_t kMaxListItems = 1024;

void encode(const TaskMsg& m, std::string* out);
void encode(const TaskMsgView& m, std::string* out);
void encode(const CancelMsg& m, std::string* out);
void encode(const StopMsg& m, std::string* out);
void encode(const ReadyMsg& m, std::string* out);
void encode(const ResultMsg& m, std::string* out);
void encode(const ProgressMsg& m, std::string* out);
void encode(const LogMsg& m, std::string* out);

Status decode(std::string_view in, TaskMsg* m);
Status decode(std::string_view in, CancelMsg* m);
Status decode(std::string_view in, StopMsg* m);
Status decode(std::string_view in, ReadyMsg* m);
Status decode(std::string_view in, ResultMsg* m);
Status decode(std::string_view in, ProgressMsg* m);
Status decode(std::string_view in, LogMsg* m);

}  // namespace sandpool::ipc
