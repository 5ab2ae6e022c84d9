// WorkerChannel: the worker's end of its shared region (docs/architecture.md, "Components and
// dependency direction"). It owns the mapping, the result sender, the task receiver and the
// manager's doorbell, and knows how the worker waits: spin briefly, then futex-sleep, bounded by
// the heartbeat interval.
//
// Thread-safety: the send side (send, send_if_room, flush, queued_bytes) may be called from
// any thread (the host API runs on plugin threads) and is serialised by an internal mutex,
// which is never held while sleeping. The receive side (receiver, release_tasks,
// wait_for_tasks) belongs to the task loop's thread alone. beat() and header() are
// lock-free. Not movable: the host API and the task loop hold references to it.
#pragma once

#include <time.h>

#include <cstdint>
#include <memory>
#include <string>

#include <sandpool/base/status.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/ipc/channel.hpp>
#include <sandpool/ipc/messages.hpp>
#include <sandpool/ipc/region.hpp>
#include <sandpool/ipc/wake.hpp>

#include "region_check.hpp"

namespace sandpool::worker {

class WorkerChannel {
 public:
  // Maps the inherited region fd (validating its header) and adopts the doorbell's end;
  // both fds are owned from then on, also on failure.
  static Result<std::unique_ptr<WorkerChannel>> attach(int region_fd, int doorbell_fd);
  WorkerChannel(const WorkerChannel&) = delete;
  WorkerChannel& operator=(const WorkerChannel&) = delete;

  ipc::RegionHeader& header() const { return *region_.header(); }
  std::uint64_t max_message() const { return region_.max_message(); }
  // The worker's end of the manager's doorbell: writing a byte to it is async-signal-safe.
  int doorbell_fd() const { return doorbell_.fd(); }
  // The pool's plugin config as the manager put it in the region (read it once, before
  // the plugin's init).
  std::string plugin_config() const { return std::string(region_.plugin_config()); }
  // Stores the coarse monotonic clock (vDSO, no syscall, no hardware counter: twice per
  // task) into the header's heartbeat word. It lags the fine clock the manager compares it
  // with by a tick at most, far below any heartbeat interval, and is never ahead of it.
  void beat() const {
    header().heartbeat_ms.store(static_cast<std::uint64_t>(coarse_monotonic_ms()),
                                std::memory_order_relaxed);
  }
  // CLOCK_MONOTONIC_COARSE in ms: CLOCK_MONOTONIC as of the kernel's last tick, never ahead
  // of it.
  static std::int64_t coarse_monotonic_ms() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
  }

  // Encodes `msg`, writes it (or queues it behind a full ring) and publishes; rings the
  // doorbell when the manager sleeps. Never blocks. Returns a kProtocol error when the
  // manager's tail is impossible (the ring is then unusable).
  template <typename Msg>
  Status send(const Msg& msg) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ipc::encode(msg, &scratch_);
    return send_scratch_locked(Msg::kKind);
  }
  // Like send, but only when nothing is queued and the whole message fits in the ring now;
  // returns true iff it was written. What the host API uses for traffic it may coalesce.
  template <typename Msg>
  bool send_if_room(const Msg& msg) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ipc::encode(msg, &scratch_);
    if (!has_room_locked(scratch_.size())) return false;
    return send_scratch_locked(Msg::kKind).is_ok();
  }
  // Bytes waiting behind a full result ring.
  std::uint64_t queued_bytes() EXCLUDES(mu_);
  // Writes everything queued, waiting for the manager to free space as long as it takes
  // and beating while it waits (each wait bounded by `wait_ns`). Returns a kProtocol error
  // on a corrupt ring.
  Status flush(std::int64_t wait_ns) EXCLUDES(mu_);

  // The task ring's consumer side: the task loop's thread only.
  ipc::MessageReceiver& receiver() { return receiver_; }
  // Gives consumed task-ring space back; rings the doorbell when the manager waits for it.
  void release_tasks();
  // Idle wait: spins up to the header's spin_us polling the task ring, then sleeps on its
  // data_seq futex for at most wait_ns. Returns when a task may be there or time is up.
  void wait_for_tasks(std::int64_t wait_ns);

  // The task loop's thread, after a handler returned: returns an empty string iff the
  // region is as this worker left it (region_check.hpp), else what is broken.
  std::string check_region(std::uint64_t running_task, ipc::WorkerPhase phase) EXCLUDES(mu_);

 private:
  WorkerChannel(ipc::SharedRegion region, ipc::DoorbellRinger doorbell);
  Status send_scratch_locked(ipc::MsgKind kind) REQUIRES(mu_);
  bool has_room_locked(std::uint64_t bytes) REQUIRES(mu_);

  ipc::SharedRegion region_;
  const RegionGeometry geometry_;  // the header's fixed words as attach() validated them
  ipc::DoorbellRinger doorbell_;
  ipc::MessageReceiver receiver_;
  Mutex mu_;  // the send side: a plugin thread may report while the task loop sends
  ipc::MessageSender sender_ GUARDED_BY(mu_);
  std::string scratch_ GUARDED_BY(mu_);
};

}  // namespace sandpool::worker
