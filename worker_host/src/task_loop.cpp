#include "task_loop.hpp"

#include "memory_reporter.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include <sandpool/ipc/wake.hpp>
#include <sandpool/sandbox/worker_args.hpp>

namespace sandpool::worker {
namespace {

// What a spare message holds, as TaskLoop's bound counts it.
std::size_t spare_size(const ipc::TaskMsg& msg) {
  return sizeof(ipc::TaskMsg) + msg.type.capacity() + msg.payload.capacity();
}

// sp_task.deadline_ms: what is left of the task's timeout now; -1 when it has none.
std::int64_t ms_left(std::int64_t deadline_mono_ms) {
  if (deadline_mono_ms == 0) return -1;
  return std::max<std::int64_t>(0, deadline_mono_ms - ipc::monotonic_ms());
}

ipc::ResultMsg make_result(const ipc::TaskMsg& msg, int rc, CallOutcome outcome,
                           std::uint64_t max_result) {
  ipc::ResultMsg r;
  r.id = msg.id;
  // write_result past the limit fails the attempt permanently, whatever handle says.
  if (outcome.result_too_large) {
    r.status = ipc::TaskStatus::kResultTooLarge;
    r.error = "result exceeds max_result (" + std::to_string(max_result) + " bytes)";
    return r;
  }
  switch (rc) {
    case SP_OK:
      r.status = ipc::TaskStatus::kOk;
      r.data = std::move(outcome.result);  // the result is kept only on SP_OK
      break;
    case SP_RETRY:
      r.status = ipc::TaskStatus::kRetry;
      r.error = std::move(outcome.error);
      break;
    case SP_FAIL:
      r.status = ipc::TaskStatus::kFail;
      r.error = std::move(outcome.error);
      break;
    case SP_LIMIT:  // the handler stopped itself at a limit it enforces
      r.status = ipc::TaskStatus::kLimit;
      r.error = std::move(outcome.error);
      break;
    default:
      r.status = ipc::TaskStatus::kFail;
      r.error = "handle returned " + std::to_string(rc);
      if (!outcome.error.empty()) r.error += ": " + outcome.error;
      break;
  }
  return r;
}

// A handler scribbled on the region: leave before answering or reading another task, with
// the task still marked started, so the manager charges this attempt (protocol_error,
// retried) and the next task goes to a fresh worker and region. Nothing is flushed: the
// result ring is part of what is broken.
[[noreturn]] void leave_region_corrupt(std::uint64_t task, const std::string& damage) {
  std::fprintf(stderr,
               "sandpool-worker: task %llu's handler scribbled on the shared region: %.300s\n",
               static_cast<unsigned long long>(task), damage.c_str());
  std::fflush(stderr);
  ::_exit(sandbox::kExitRegionCorrupt);
}

}  // namespace

TaskLoop::TaskLoop(WorkerChannel& channel, LoadedPlugin& plugin, HostApi& host,
                   std::uint32_t heartbeat_ms)
    : channel_(channel),
      plugin_(plugin),
      host_(host),
      wait_ns_(std::max<std::int64_t>(1, heartbeat_ms) * 1'000'000 / 2) {}

int TaskLoop::run() {
  for (;;) {
    channel_.beat();
    // run_task drained the ring after its handler: another load of the manager's head (a
    // line it writes at every publish) would only find what arrived since, which the idle
    // wait below notices as well.
    Status s = drained_after_task_ ? Status::ok() : drain();
    drained_after_task_ = false;
    if (s && !queue_.empty()) {
      ipc::TaskMsg msg = std::move(queue_.front());
      queue_.pop_front();
      s = run_task(msg);
      keep_spare(std::move(msg));
    }
    // Results stuck behind a full ring: wait for the manager before taking more work, so
    // memory stays bounded.
    if (s && channel_.queued_bytes() > 0) s = channel_.flush(wait_ns_);
    if (!s) {
      std::fprintf(stderr, "sandpool-worker: %s\n", s.to_string().c_str());
      return sandbox::kExitProtocol;
    }
    if (!queue_.empty()) continue;
    if (stop_requested_) return stop();
    channel_.wait_for_tasks(wait_ns_);
  }
}

Status TaskLoop::drain() {
  ipc::MessageReceiver& receiver = channel_.receiver();
  std::uint16_t kind = 0;
  ipc::RingStatus rs;
  while ((rs = receiver.next(&kind, &message_)) == ipc::RingStatus::kOk) {
    SP_RETURN_IF_ERROR(accept(kind, message_));
  }
  // Give the space back before anything can sleep: a message larger than the ring only
  // completes once its first fragments' space is free again.
  channel_.release_tasks();
  if (rs == ipc::RingStatus::kCorrupt) {
    return Status::protocol("the manager broke the task ring (impossible position or record)");
  }
  return Status::ok();
}

Status TaskLoop::accept(std::uint16_t kind, std::string_view bytes) {
  switch (static_cast<ipc::MsgKind>(kind)) {
    case ipc::MsgKind::kTask: {
      ipc::TaskMsg task = take_spare();
      SP_RETURN_IF_ERROR(ipc::decode(bytes, &task).with_context("decoding TaskMsg"));
      queue_.push_back(std::move(task));
      return Status::ok();
    }
    case ipc::MsgKind::kCancel: {
      ipc::CancelMsg cancel;
      SP_RETURN_IF_ERROR(ipc::decode(bytes, &cancel).with_context("decoding CancelMsg"));
      // Only a task still queued here can be cancelled by message; a running one sees the
      // header's cancel_task through cancelled(). Unknown ids are late and harmless.
      auto it = std::find_if(queue_.begin(), queue_.end(),
                             [&](const ipc::TaskMsg& t) { return t.id == cancel.id; });
      if (it == queue_.end()) return Status::ok();
      queue_.erase(it);
      ipc::ResultMsg r;
      r.id = cancel.id;
      r.status = ipc::TaskStatus::kCancelled;
      return channel_.send(r);
    }
    case ipc::MsgKind::kStop: {
      ipc::StopMsg stop;
      SP_RETURN_IF_ERROR(ipc::decode(bytes, &stop).with_context("decoding StopMsg"));
      stop_requested_ = true;
      channel_.header().phase.store(static_cast<std::uint32_t>(ipc::WorkerPhase::kStopping),
                                    std::memory_order_release);
      return Status::ok();
    }
    default:
      return Status::protocol("unexpected message kind " + std::to_string(kind) +
                              " on the task ring");
  }
}

Status TaskLoop::run_task(const ipc::TaskMsg& msg) {
  ipc::RegionHeader& header = channel_.header();
  // Published before handle runs: if the worker dies now, the manager knows this task was
  // started (an attempt) and the ones behind it were not.
  header.started_task.store(msg.id, std::memory_order_release);
  sp_task task{};
  task.size = sizeof(sp_task);
  task.attempt = msg.attempt;
  task.id = msg.id;
  task.type = msg.type.data();
  task.type_len = msg.type.size();
  task.payload = reinterpret_cast<const std::uint8_t*>(msg.payload.data());
  task.payload_len = msg.payload.size();
  task.deadline_ms = ms_left(msg.deadline_mono_ms);
  task.max_result = host_.max_result();

  sp_call* call = host_.begin_task(msg.id, std::move(result_buffer_));
  const int rc = plugin_.handle(&task, call);
  CallOutcome outcome = host_.end_task();
  if (rc != SP_OK && address_space_exhausted()) {
    // The handler failed because the worker is out of address space (it cannot tell its
    // limit from bad input), and every later task would too: leave with the task still
    // marked started, so the manager charges it as resource_limit: memory and replaces us.
    std::fprintf(stderr, "sandpool-worker: task %llu failed: %.200s\n",
                 static_cast<unsigned long long>(msg.id), outcome.error.c_str());
    (void)channel_.flush(wait_ns_);  // what earlier tasks finished still counts
    leave_memory_exhausted();
  }
  // Checked before the region is read again: first the words only this worker writes,
  // then the manager's frames that arrived meanwhile (decoded into the FIFO now, so an
  // undecodable one is charged to this attempt, not to the next task's).
  const auto phase = stop_requested_ ? ipc::WorkerPhase::kStopping : ipc::WorkerPhase::kReady;
  std::string damage = channel_.check_region(msg.id, phase);
  if (damage.empty()) {
    if (Status s = drain(); !s) damage = s.message();
    drained_after_task_ = true;
  }
  if (!damage.empty()) leave_region_corrupt(msg.id, damage);
  header.started_task.store(0, std::memory_order_release);
  channel_.beat();
  ipc::ResultMsg result = make_result(msg, rc, std::move(outcome), host_.max_result());
  Status sent = channel_.send(result);  // encoded: its buffer serves the next task
  if (result.data.capacity() <= kSpareBytes) result_buffer_ = std::move(result.data);
  return sent;
}

ipc::TaskMsg TaskLoop::take_spare() {
  if (spares_.empty()) return {};
  ipc::TaskMsg msg = std::move(spares_.back());
  spares_.pop_back();
  spare_bytes_ -= spare_size(msg);
  return msg;
}

void TaskLoop::keep_spare(ipc::TaskMsg msg) {
  const std::size_t bytes = spare_size(msg);
  if (spare_bytes_ + bytes > kSpareBytes) return;
  spare_bytes_ += bytes;
  spares_.push_back(std::move(msg));
}

int TaskLoop::stop() {
  plugin_.shutdown();
  host_.report_dropped_logs();
  if (Status s = channel_.flush(wait_ns_); !s) {
    std::fprintf(stderr, "sandpool-worker: %s\n", s.to_string().c_str());
    return sandbox::kExitProtocol;
  }
  return sandbox::kExitOk;
}

}  // namespace sandpool::worker
