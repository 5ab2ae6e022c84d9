// HostApi: the host side of sp_host_api (<sandpool/plugin.h>) for one worker process, and
// the per-task sp_call context behind it.
//
// - write_result appends to the task's result; past max_result it returns -1 and the
//   attempt ends as ipc::TaskStatus::kResultTooLarge whatever handle returns.
// - progress beats the heartbeat and sends a ProgressMsg when the result ring has room and
//   the rate allows; otherwise it keeps only the latest update (coalescing), which goes
//   out at the next chance, at the latest just before the task's result. It never blocks
//   the plugin beyond a short lock.
// - log (call may be NULL) sends a LogMsg, lines capped at kMaxLogLine bytes, rate-limited
//   by a token bucket; dropped lines are counted and reported in one later log line.
// - set_error keeps the last reason (capped at kMaxError bytes) for SP_RETRY, SP_FAIL, SP_LIMIT.
// - cancelled is non-zero iff the header's cancel_task is this task's id.
//
// Thread-safety: every entry point may be called from any plugin thread; one mutex guards
// the call state and the limiters. Calls on an sp_call whose task has ended are ignored
// (log still goes out, unattributed).
// Lifetime: at most one HostApi per process (a NULL call has no other way to reach it);
// it must outlive every use of the table it hands out.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <sandpool/plugin.h>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/base/token_bucket.hpp>
#include <sandpool/ipc/messages.hpp>

#include "worker_channel.hpp"

namespace sandpool::worker {

// What a task's call context held when handle returned.
struct CallOutcome {
  std::string result;
  std::string error;
  bool result_too_large = false;
};

struct HostLimits {
  std::uint64_t max_result = 8u << 20;
  double log_lines_per_second = 100;
  double log_burst = 200;
  double progress_per_second = 1000;
  double progress_burst = 100;
};

inline constexpr std::size_t kMaxLogLine = 4096;
inline constexpr std::size_t kMaxError = 4096;
inline constexpr std::size_t kMaxProgress = 64 * 1024;
// Log lines stop queueing (and count as dropped) once this much waits behind a full ring.
inline constexpr std::uint64_t kMaxQueuedLogBytes = 256 * 1024;

class HostApi {
 public:
  HostApi(WorkerChannel& channel, const HostLimits& limits);
  ~HostApi();
  HostApi(const HostApi&) = delete;
  HostApi& operator=(const HostApi&) = delete;

  std::uint64_t max_result() const { return limits_.max_result; }
  // The table handed to sp_plugin_init; valid as long as this object.
  const sp_host_api* table() const { return &table_; }

  // Opens the call context of task `id` (the previous one must have ended). Its result is
  // appended to `result_buffer`, emptied first: a buffer a former result left, so that a
  // task's write_result need not allocate (the task loop hands each result's back).
  sp_call* begin_task(std::uint64_t id, std::string result_buffer = {}) EXCLUDES(mu_);
  // Closes the current call: sends the coalesced progress and any drop report, then hands
  // back the result and error. Later host calls on that sp_call are ignored.
  CallOutcome end_task() EXCLUDES(mu_);

  // Sends the "dropped N log lines" report now if lines were dropped since the last one
  // (end_task does this too; the task loop calls it before the worker stops).
  void report_dropped_logs() EXCLUDES(mu_);

  // What the table's functions forward to; a NULL call reaches log only.
  int write_result(sp_call* call, const void* data, std::size_t len) EXCLUDES(mu_);
  void progress(sp_call* call, const void* data, std::size_t len) EXCLUDES(mu_);
  void heartbeat(sp_call* call) EXCLUDES(mu_);
  void set_error(sp_call* call, const char* msg, std::size_t len) EXCLUDES(mu_);
  int cancelled(sp_call* call) const;  // lock-free (the call's task_id, the header's word)
  void log(sp_call* call, int level, const char* msg, std::size_t len) EXCLUDES(mu_);

  // The last error line (level 3) logged with a NULL call, as sent: why sp_plugin_init failed,
  // in the plugin's words, for the worker's own report of the failure. Empty: none.
  std::string last_unattributed_error() EXCLUDES(mu_);

  // Dropped log lines not yet reported, and progress updates coalesced away so far.
  std::uint64_t dropped_log_lines() EXCLUDES(mu_);
  std::uint64_t coalesced_progress() EXCLUDES(mu_);

 private:
  // True iff `call` is the running task's context (its fields are then mu_'s too).
  bool active_locked(const sp_call* call) const REQUIRES(mu_);
  void try_send_pending_progress_locked(std::int64_t now_ns) REQUIRES(mu_);
  void report_dropped_logs_locked(std::uint64_t task_id) REQUIRES(mu_);
  bool send_log_locked(std::uint64_t task_id, int level, std::string text) REQUIRES(mu_);

  WorkerChannel& channel_;
  HostLimits limits_;
  sp_host_api table_{};
  // Taken before the channel's (a send under it); guards the fields below and the fields of
  // the sp_calls but their task_id (host_api.cpp).
  Mutex mu_;
  // Call contexts are recycled round-robin over kCallSlots tasks, so an sp_call kept by a
  // stray plugin thread after its handle returned stays valid memory and is recognised as
  // stale (it is not current_) instead of writing into a later task's result.
  static constexpr std::size_t kCallSlots = 64;
  // sp_call is in host_api.cpp. The array is filled by the constructor, then only read.
  std::array<std::unique_ptr<sp_call>, kCallSlots> calls_;
  std::size_t next_slot_ GUARDED_BY(mu_) = 0;
  sp_call* current_ GUARDED_BY(mu_) = nullptr;  // the running task's context; null between tasks
  TokenBucket log_bucket_ GUARDED_BY(mu_);
  TokenBucket progress_bucket_ GUARDED_BY(mu_);
  std::optional<ipc::ProgressMsg> pending_progress_ GUARDED_BY(mu_);
  std::string last_unattributed_error_ GUARDED_BY(mu_);
  std::uint64_t dropped_logs_ GUARDED_BY(mu_) = 0;
  std::uint64_t coalesced_progress_ GUARDED_BY(mu_) = 0;
};

}  // namespace sandpool::worker
