// The worker's check of its own region after a handler (region_check.hpp), on a region
// created in this process: every word it guards, scribbled, is found; an untouched region,
// and the manager's own moves, are not.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include <sandpool/ipc/region.hpp>

#include "region_check.hpp"

using namespace sandpool;
using sandpool::worker::find_region_damage;
using sandpool::worker::geometry_of;
using sandpool::worker::OwnWords;

namespace {

struct CheckedRegion {
  CheckedRegion() : region(std::move(ipc::SharedRegion::create(ipc::RegionConfig{})).value()) {
    h().phase.store(static_cast<std::uint32_t>(ipc::WorkerPhase::kReady));
    h().started_task.store(7);
    h().heartbeat_ms.store(1000);
    geometry = geometry_of(h());
    own.running_task = 7;
    own.now_ms = [] { return std::uint64_t{2000}; };
  }
  ipc::RegionHeader& h() { return *region.header(); }
  std::string damage() { return find_region_damage(h(), geometry, own); }

  ipc::SharedRegion region;
  worker::RegionGeometry geometry;
  OwnWords own;
};

constexpr std::uint64_t kGarbage = 0xa5a5a5a5a5a5a5a5ull;

}  // namespace

TEST_CASE("an untouched region passes the worker's check") {
  CheckedRegion r;
  CHECK(r.damage().empty());
}

// A plugin thread that beats while the check runs: its beat is the clock's next tick, stored
// right after the check read the clock (here: inside the clock's read, after its value).
namespace {
ipc::RegionHeader* beating_header = nullptr;
std::uint64_t clock_then_beat() {
  beating_header->heartbeat_ms.store(2001);
  return 2000;
}
}  // namespace

TEST_CASE("a beat from a plugin thread during the check is no damage") {
  CheckedRegion r;
  beating_header = &r.h();
  r.own.now_ms = clock_then_beat;
  CHECK(r.damage().empty());
}

TEST_CASE("the manager's own moves are no damage") {
  CheckedRegion r;
  // The manager publishes tasks, consumes results, asks for a cancel, wakes the worker.
  r.h().task_ring.head.store(64);
  r.h().cancel_task.store(7);
  r.h().spin_us.store(50);
  r.h().task_ring.data_seq.fetch_add(3);
  r.h().result_ring.space_seq.fetch_add(3);
  CHECK(r.damage().empty());
}

TEST_CASE("each word the worker guards, scribbled, is found") {
  struct Row {
    const char* word;
    std::function<void(ipc::RegionHeader&)> scribble;
  };
  const Row row = GENERATE(values<Row>({
      {"magic", [](ipc::RegionHeader& h) { h.magic = 0xffffffffu; }},
      {"version", [](ipc::RegionHeader& h) { h.version = 0; }},
      {"region_size", [](ipc::RegionHeader& h) { h.region_size = kGarbage; }},
      {"task_ring_offset", [](ipc::RegionHeader& h) { h.task_ring_offset += 8; }},
      {"task_ring_bytes", [](ipc::RegionHeader& h) { h.task_ring_bytes *= 2; }},
      {"result_ring_offset", [](ipc::RegionHeader& h) { h.result_ring_offset = 0; }},
      {"result_ring_bytes", [](ipc::RegionHeader& h) { h.result_ring_bytes = 1; }},
      {"max_message", [](ipc::RegionHeader& h) { h.max_message = kGarbage; }},
      {"config_offset", [](ipc::RegionHeader& h) { h.config_offset = kGarbage; }},
      {"config_bytes", [](ipc::RegionHeader& h) { h.config_bytes = 1; }},
      {"the task ring's tail", [](ipc::RegionHeader& h) { h.task_ring.tail.store(8); }},
      {"the result ring's head", [](ipc::RegionHeader& h) { h.result_ring.head.store(kGarbage); }},
      {"consumer_sleeping", [](ipc::RegionHeader& h) { h.task_ring.consumer_sleeping.store(1); }},
      {"producer_waiting", [](ipc::RegionHeader& h) { h.result_ring.producer_waiting.store(9); }},
      {"started_task", [](ipc::RegionHeader& h) { h.started_task.store(0); }},
      {"phase", [](ipc::RegionHeader& h) { h.phase.store(0xffffffffu); }},
      {"violation_syscall", [](ipc::RegionHeader& h) { h.violation_syscall.store(42); }},
      {"fatal_report", [](ipc::RegionHeader& h) { h.diagnostics.fatal_report.store(1); }},
      {"heartbeat_ms", [](ipc::RegionHeader& h) { h.heartbeat_ms.store(kGarbage); }},
  }));
  SECTION(row.word) {
    CheckedRegion r;
    row.scribble(r.h());
    const std::string damage = r.damage();
    INFO(damage);
    CHECK(damage.find(row.word) != std::string::npos);
  }
}

TEST_CASE("a whole header of garbage or of all-ones is found") {
  const int fill = GENERATE(0xff, 0xa5, 0x00);
  CheckedRegion r;
  std::memset(static_cast<void*>(&r.h()), fill, sizeof(ipc::RegionHeader));
  CHECK_FALSE(r.damage().empty());
}
