#include "worker_channel.hpp"

#include <algorithm>

namespace sandpool::worker {
namespace {

// A manager bug (or a hostile header) must not make an idle worker spin for long.
constexpr std::uint32_t kMaxSpinUs = 10'000;

Status corrupt_ring(const char* which) {
  return Status::protocol(std::string("the manager published an impossible position on the ") +
                          which + " ring");
}

}  // namespace

Result<std::unique_ptr<WorkerChannel>> WorkerChannel::attach(int region_fd, int doorbell_fd) {
  ipc::DoorbellRinger doorbell = ipc::DoorbellRinger::adopt(doorbell_fd);
  Result<ipc::SharedRegion> region = ipc::SharedRegion::attach(region_fd);
  if (!region) return region.status().with_context("attaching the shared region");
  return std::unique_ptr<WorkerChannel>(
      new WorkerChannel(std::move(region).value(), std::move(doorbell)));
}

WorkerChannel::WorkerChannel(ipc::SharedRegion region, ipc::DoorbellRinger doorbell)
    : region_(std::move(region)),
      geometry_(geometry_of(*region_.header())),
      doorbell_(std::move(doorbell)),
      receiver_(region_.task_consumer(), region_.max_message()),
      sender_(region_.result_producer()) {
  scratch_.reserve(ipc::kEncodeScratchBytes);  // kept for every message: encoded uncounted
}

Status WorkerChannel::send_scratch_locked(ipc::MsgKind kind) {
  if (sender_.send(static_cast<std::uint16_t>(kind), scratch_) == ipc::RingStatus::kCorrupt) {
    return corrupt_ring("result");
  }
  if (sender_.publish()) doorbell_.ring();
  return Status::ok();
}

bool WorkerChannel::has_room_locked(std::uint64_t bytes) {
  if (sender_.has_queued()) return false;
  // The sender cuts a message into records of at most max_record_payload bytes; each
  // record costs a header and up to 7 bytes of padding.
  ipc::RingProducer& ring = sender_.ring();
  const std::uint64_t per_record = ring.max_record_payload();
  const std::uint64_t records = std::max<std::uint64_t>(1, (bytes + per_record - 1) / per_record);
  const std::uint64_t span = bytes + records * 16;
  return span <= ring.capacity() && ring.fits(span);
}

std::uint64_t WorkerChannel::queued_bytes() {
  MutexLock lock(mu_);
  return sender_.queued_bytes();
}

Status WorkerChannel::flush(std::int64_t wait_ns) {
  ipc::RingControl& ctl = header().result_ring;
  for (;;) {
    std::uint64_t want = 0;
    {
      MutexLock lock(mu_);
      const ipc::RingStatus s = sender_.pump();
      if (s == ipc::RingStatus::kCorrupt) return corrupt_ring("result");
      if (sender_.publish()) doorbell_.ring();
      if (s == ipc::RingStatus::kOk) return Status::ok();
      // Waiting for room for one whole record (or what is left) cannot stall: once the
      // manager has consumed everything the ring is empty and any record fits.
      want = std::min(sender_.queued_bytes(), sender_.ring().max_record_payload());
    }
    beat();
    const std::uint32_t seq = ctl.space_seq.load(std::memory_order_acquire);
    bool sleep;
    {
      MutexLock lock(mu_);
      sleep = sender_.ring().prepare_wait(want);
    }
    if (sleep) ipc::futex_wait(&ctl.space_seq, seq, wait_ns);
    MutexLock lock(mu_);
    sender_.ring().cancel_wait();
  }
}

void WorkerChannel::release_tasks() {
  if (receiver_.release()) doorbell_.ring();
}

void WorkerChannel::wait_for_tasks(std::int64_t wait_ns) {
  ipc::RingConsumer& ring = receiver_.ring();
  const std::uint32_t spin_us =
      std::min(header().spin_us.load(std::memory_order_relaxed), kMaxSpinUs);
  if (spin_us > 0 && ipc::spin_until([&] { return ring.has_data(); },
                                     ipc::monotonic_ns() + std::int64_t{spin_us} * 1000)) {
    return;
  }
  ipc::RingControl& ctl = header().task_ring;
  const std::uint32_t seq = ctl.data_seq.load(std::memory_order_acquire);
  if (ring.prepare_sleep()) ipc::futex_wait(&ctl.data_seq, seq, wait_ns);
  ring.cancel_sleep();
}

std::string WorkerChannel::check_region(std::uint64_t running_task, ipc::WorkerPhase phase) {
  OwnWords own;
  own.running_task = running_task;
  own.phase = phase;
  own.task_tail = receiver_.ring().published();
  // The send side's head moves under mu_ (a plugin thread may still report progress), and
  // the shared word with it: compared under the same lock.
  MutexLock lock(mu_);
  own.result_head = sender_.ring().published();
  own.now_ms = [] { return static_cast<std::uint64_t>(coarse_monotonic_ms()); };  // beat()'s
  return find_region_damage(header(), geometry_, own);
}

}  // namespace sandpool::worker
