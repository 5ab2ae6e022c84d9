#include "region_check.hpp"

#include <string_view>

namespace sandpool::worker {
namespace {

std::string differs(std::string_view word, std::uint64_t is, std::uint64_t should) {
  return std::string(word) + " is " + std::to_string(is) + ", not " + std::to_string(should);
}

}  // namespace

RegionGeometry geometry_of(const ipc::RegionHeader& h) {
  return {h.magic,
          h.version,
          h.region_size,
          h.task_ring_offset,
          h.task_ring_bytes,
          h.result_ring_offset,
          h.result_ring_bytes,
          h.max_message,
          h.config_offset,
          h.config_bytes};
}

std::string find_region_damage(const ipc::RegionHeader& h, const RegionGeometry& g,
                               const OwnWords& own) {
  const RegionGeometry now = geometry_of(h);
  const std::pair<std::string_view, std::pair<std::uint64_t, std::uint64_t>> fixed[] = {
      {"magic", {now.magic, g.magic}},
      {"version", {now.version, g.version}},
      {"region_size", {now.region_size, g.region_size}},
      {"task_ring_offset", {now.task_ring_offset, g.task_ring_offset}},
      {"task_ring_bytes", {now.task_ring_bytes, g.task_ring_bytes}},
      {"result_ring_offset", {now.result_ring_offset, g.result_ring_offset}},
      {"result_ring_bytes", {now.result_ring_bytes, g.result_ring_bytes}},
      {"max_message", {now.max_message, g.max_message}},
      {"config_offset", {now.config_offset, g.config_offset}},
      {"config_bytes", {now.config_bytes, g.config_bytes}},
  };
  for (const auto& [word, values] : fixed) {
    if (values.first != values.second) return differs(word, values.first, values.second);
  }
  constexpr auto acq = std::memory_order_acquire;
  const std::pair<std::string_view, std::pair<std::uint64_t, std::uint64_t>> own_words[] = {
      {"the task ring's tail", {h.task_ring.tail.load(acq), own.task_tail}},
      {"the result ring's head", {h.result_ring.head.load(acq), own.result_head}},
      // Set only inside the loop's own waits, which are over.
      {"the task ring's consumer_sleeping", {h.task_ring.consumer_sleeping.load(acq), 0}},
      {"the result ring's producer_waiting", {h.result_ring.producer_waiting.load(acq), 0}},
      {"started_task", {h.started_task.load(acq), own.running_task}},
      {"phase", {h.phase.load(acq), static_cast<std::uint32_t>(own.phase)}},
      // Written only on the way out (the SIGSYS reporter, the fatal-signal handler).
      {"violation_syscall", {h.violation_syscall.load(acq), 0}},
      {"fatal_report", {h.diagnostics.fatal_report.load(acq), 0}},
  };
  for (const auto& [word, values] : own_words) {
    if (values.first != values.second) return differs(word, values.first, values.second);
  }
  const std::uint64_t beat = h.heartbeat_ms.load(acq);
  const std::uint64_t clock_ms = own.now_ms();  // after the load: see OwnWords
  if (beat > clock_ms) {
    return "heartbeat_ms is " + std::to_string(beat) + ", ahead of the clock (" +
           std::to_string(clock_ms) + ")";
  }
  return {};
}

}  // namespace sandpool::worker
