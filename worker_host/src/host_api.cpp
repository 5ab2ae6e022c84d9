#include "host_api.hpp"

#include <algorithm>
#include <atomic>
#include <new>

#include <sandpool/ipc/wake.hpp>

// The per-task context behind the ABI's opaque `sp_call`. The ABI declares the tag in the
// global namespace, so the definition lives there too.
struct sp_call {
  sandpool::worker::HostApi* host = nullptr;
  std::atomic<std::uint64_t> task_id{0};  // 0 between tasks; read lock-free by cancelled()
  // Guarded by the HostApi's mutex:
  bool active = false;
  std::string result;
  std::string error;
  bool result_too_large = false;
};

namespace sandpool::worker {
namespace {

// The ABI gives log(NULL, ...) no context pointer, so the process's one HostApi is found
// through this.
HostApi* g_host = nullptr;

constexpr std::string_view kTruncated = " [truncated]";

// The table's entry points. Nothing may unwind into plugin code (it may be C), so each
// one swallows exceptions (in practice std::bad_alloc) and reports failure where it can.
int api_write_result(sp_call* call, const void* data, size_t len) noexcept {
  if (call == nullptr) return -1;
  try {
    return call->host->write_result(call, data, len);
  } catch (...) {
    return -1;
  }
}

void api_progress(sp_call* call, const void* data, size_t len) noexcept {
  if (call == nullptr) return;
  try {
    call->host->progress(call, data, len);
  } catch (...) {
  }
}

void api_heartbeat(sp_call* call) noexcept {
  if (call == nullptr) return;
  try {
    call->host->heartbeat(call);
  } catch (...) {
  }
}

void api_set_error(sp_call* call, const char* msg, size_t len) noexcept {
  if (call == nullptr) return;
  try {
    call->host->set_error(call, msg, len);
  } catch (...) {
  }
}

int api_cancelled(sp_call* call) noexcept {
  return call == nullptr ? 0 : call->host->cancelled(call);
}

void api_log(sp_call* call, int level, const char* msg, size_t len) noexcept {
  HostApi* host = call != nullptr ? call->host : g_host;
  if (host == nullptr) return;
  try {
    host->log(call, level, msg, len);
  } catch (...) {
  }
}

}  // namespace

HostApi::HostApi(WorkerChannel& channel, const HostLimits& limits)
    : channel_(channel),
      limits_(limits),
      log_bucket_(limits.log_lines_per_second, limits.log_burst),
      progress_bucket_(limits.progress_per_second, limits.progress_burst) {
  table_.abi_version = SP_PLUGIN_ABI_VERSION;
  table_.size = sizeof(sp_host_api);
  table_.write_result = api_write_result;
  table_.progress = api_progress;
  table_.heartbeat = api_heartbeat;
  table_.set_error = api_set_error;
  table_.cancelled = api_cancelled;
  table_.log = api_log;
  for (std::unique_ptr<sp_call>& c : calls_) {
    c = std::make_unique<sp_call>();
    c->host = this;
  }
  g_host = this;
}

HostApi::~HostApi() {
  if (g_host == this) g_host = nullptr;
}

bool HostApi::active_locked(const sp_call* call) const {
  return call != nullptr && call == current_ && call->active;
}

sp_call* HostApi::begin_task(std::uint64_t id, std::string result_buffer) {
  MutexLock lock(mu_);
  current_ = calls_[next_slot_++ % kCallSlots].get();
  sp_call& c = *current_;
  c.task_id.store(id, std::memory_order_relaxed);
  c.active = true;
  c.result = std::move(result_buffer);
  c.result.clear();
  c.error.clear();
  c.result_too_large = false;
  pending_progress_.reset();
  return current_;
}

CallOutcome HostApi::end_task() {
  MutexLock lock(mu_);
  if (current_ == nullptr) return {};
  sp_call& c = *current_;
  const std::uint64_t id = c.task_id.load(std::memory_order_relaxed);
  // The latest progress goes out before the result, so the submitter's last view is
  // current. A corrupt ring fails the result's send right after; nothing to do here.
  if (pending_progress_) (void)channel_.send(*pending_progress_);
  pending_progress_.reset();
  report_dropped_logs_locked(id);
  c.active = false;
  c.task_id.store(0, std::memory_order_relaxed);
  CallOutcome out{std::move(c.result), std::move(c.error), c.result_too_large};
  c.result = std::string();
  c.error = std::string();
  current_ = nullptr;
  return out;
}

int HostApi::write_result(sp_call* call, const void* data, std::size_t len) {
  if (data == nullptr && len > 0) return -1;
  MutexLock lock(mu_);
  if (!active_locked(call) || call->result_too_large) return -1;
  if (len > limits_.max_result - call->result.size()) {
    // The attempt is lost anyway: free what was kept.
    call->result_too_large = true;
    call->result = std::string();
    return -1;
  }
  call->result.append(static_cast<const char*>(data), len);
  return 0;
}

void HostApi::progress(sp_call* call, const void* data, std::size_t len) {
  channel_.beat();
  if (data == nullptr && len > 0) return;
  const std::int64_t now = ipc::monotonic_ns();
  MutexLock lock(mu_);
  if (!active_locked(call)) return;
  ipc::ProgressMsg msg;
  msg.id = call->task_id.load(std::memory_order_relaxed);
  msg.data.assign(static_cast<const char*>(data), std::min(len, kMaxProgress));
  if (progress_bucket_.take(now) && channel_.send_if_room(msg)) {
    pending_progress_.reset();  // superseded
    return;
  }
  if (pending_progress_) ++coalesced_progress_;
  pending_progress_ = std::move(msg);
}

void HostApi::heartbeat(sp_call* call) {
  channel_.beat();
  MutexLock lock(mu_);
  if (active_locked(call)) try_send_pending_progress_locked(ipc::monotonic_ns());
}

void HostApi::try_send_pending_progress_locked(std::int64_t now_ns) {
  if (pending_progress_ && progress_bucket_.take(now_ns) &&
      channel_.send_if_room(*pending_progress_)) {
    pending_progress_.reset();
  }
}

void HostApi::set_error(sp_call* call, const char* msg, std::size_t len) {
  MutexLock lock(mu_);
  if (!active_locked(call)) return;
  if (msg == nullptr) len = 0;
  call->error.assign(msg == nullptr ? "" : msg, std::min(len, kMaxError));
}

int HostApi::cancelled(sp_call* call) const {
  const std::uint64_t id = call->task_id.load(std::memory_order_relaxed);
  return id != 0 && channel_.header().cancel_task.load(std::memory_order_acquire) == id ? 1 : 0;
}

void HostApi::log(sp_call* call, int level, const char* msg, std::size_t len) {
  if (msg == nullptr) len = 0;
  level = std::clamp(level, 0, 3);
  const std::int64_t now = ipc::monotonic_ns();
  MutexLock lock(mu_);
  const std::uint64_t task_id =
      active_locked(call) ? call->task_id.load(std::memory_order_relaxed) : 0;
  if (!log_bucket_.take(now)) {
    ++dropped_logs_;
    return;
  }
  report_dropped_logs_locked(task_id);
  std::string text(msg == nullptr ? "" : msg, std::min(len, kMaxLogLine));
  if (len > kMaxLogLine) {
    text.resize(kMaxLogLine - kTruncated.size());
    text += kTruncated;
  }
  if (call == nullptr && level >= 3) last_unattributed_error_ = text;
  if (!send_log_locked(task_id, level, std::move(text))) ++dropped_logs_;
}

bool HostApi::send_log_locked(std::uint64_t task_id, int level, std::string text) {
  // Behind a full ring, queueing more lines would only grow memory: drop instead.
  if (channel_.queued_bytes() > kMaxQueuedLogBytes) return false;
  ipc::LogMsg msg;
  msg.id = task_id;
  msg.level = static_cast<std::uint8_t>(level);
  msg.text = std::move(text);
  return channel_.send(msg).is_ok();
}

void HostApi::report_dropped_logs_locked(std::uint64_t task_id) {
  if (dropped_logs_ == 0) return;
  const std::string text = "plugin log: dropped " + std::to_string(dropped_logs_) +
                           " line(s) over the limit of " +
                           std::to_string(static_cast<int>(limits_.log_lines_per_second)) +
                           " lines/s or behind a full result ring";
  if (send_log_locked(task_id, 2, text)) dropped_logs_ = 0;
}

void HostApi::report_dropped_logs() {
  MutexLock lock(mu_);
  report_dropped_logs_locked(0);
}

std::string HostApi::last_unattributed_error() {
  MutexLock lock(mu_);
  return last_unattributed_error_;
}

std::uint64_t HostApi::dropped_log_lines() {
  MutexLock lock(mu_);
  return dropped_logs_;
}

std::uint64_t HostApi::coalesced_progress() {
  MutexLock lock(mu_);
  return coalesced_progress_;
}

}  // namespace sandpool::worker
