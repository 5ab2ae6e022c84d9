// Hostile plugins against the channel: garbage over the shared rings from inside the
// worker, the channel's fds closed, a result over max_result. Guarantee 3: such a worker
// only fails its own task; the manager neither crashes, nor hangs, nor allocates without
// bound.
#include <catch2/catch.hpp>

#include <cstddef>

#include <sandpool/ipc/layout.hpp>
#include <sandpool/ipc/messages.hpp>

#include "hostile_world.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::hostile::hostile_options;
using sandpool::hostile::HostileWorld;
using sandpool::hostile::integration_plugin;
using sandpool::hostile::worker_host_plugin;

namespace {

constexpr std::size_t result_ring_word(std::size_t field) {
  return offsetof(ipc::RegionHeader, result_ring) + field;
}
constexpr std::size_t kResultHead = result_ring_word(offsetof(ipc::RingControl, head));

// scribble's "record" order: a forged record in the result ring, `length` claimed, `bytes`
// of garbage after the record header (see scribble.c).
std::string forged_record(std::uint32_t length, std::uint16_t kind, std::uint32_t bytes) {
  return "record " + std::to_string(offsetof(ipc::RegionHeader, result_ring_offset)) + " " +
         std::to_string(offsetof(ipc::RegionHeader, result_ring_bytes)) + " " +
         std::to_string(kResultHead) + " " + std::to_string(length) + " " + std::to_string(kind) +
         " " + std::to_string(bytes);
}

constexpr auto kResult = static_cast<std::uint16_t>(ipc::MsgKind::kResult);

}  // namespace

TEST_CASE("garbage over the result ring ends the attempt as protocol_error") {
  const auto [what, order] = GENERATE(table<std::string, std::string>({
      {"an impossible head index", "poke " + std::to_string(kResultHead) + " 18446744073709551608"},
      {"an unaligned head index", "poke " + std::to_string(kResultHead) + " 3"},
      {"a record longer than what was published", forged_record(0x7fffffff, kResult, 0)},
      {"a record over max_message", forged_record(0xfffffff0, kResult, 0)},
      {"a result frame of garbage bytes", forged_record(16, kResult, 16)},
      {"a frame of an unknown kind", forged_record(8, 99, 8)},
      {"an empty frame", forged_record(0, kResult, 0)},
  }));
  INFO(what);
  HostileWorld world;
  PoolOptions o = hostile_options(integration_plugin("scribble"));
  o.timeout = 60s;  // the manager must notice, not the timeout
  world.start(o);
  const TaskResult r = world.attack("scribble", order);
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kProtocolError);
  CHECK(r.history[0].error.find("protocol_error") != std::string::npos);
  world.close_and_check_clean();
}

TEST_CASE("a storm of 0xff over the region's first page is a protocol_error") {
  // The same storm as pool_faults_test's, here beside ordinary tasks.
  HostileWorld world;
  world.start(hostile_options(integration_plugin("scribble")));
  const TaskResult r = world.attack("scribble", "storm");
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kProtocolError);
  world.close_and_check_clean();
}

TEST_CASE("closing the channel's fds is a sandbox_violation") {
  HostileWorld world;
  world.start(hostile_options());
  const TaskResult r = world.attack("close_channel", "");
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kSandboxViolation);
  CHECK(r.history[0].error == "sandbox_violation: close");
  world.close_and_check_clean();
}

TEST_CASE("closing the channel's fds under relaxed costs only its own worker's doorbell") {
  // relaxed allows close(): the region stays mapped, only the doorbell is gone, so the
  // worker's wake-ups fail and the manager must not depend on them (it polls its workers'
  // rings while tasks run and at every heartbeat interval when idle).
  HostileWorld world;
  PoolOptions o = hostile_options();
  o.sandbox.profile = sandbox::SeccompProfile::kRelaxed;
  world.start(o);
  const TaskResult r = world.attack("close_channel", "still answered");
  INFO(r.error);
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.result == "still answered");
  world.close_and_check_clean();
}

TEST_CASE("a result larger than max_result fails the task permanently") {
  HostileWorld world;
  PoolOptions o = hostile_options(worker_host_plugin("big_result"));
  o.max_result = 64 * 1024;
  world.start(o);
  const TaskResult r = world.attack("default", "");
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kPermanent);
  CHECK(r.history[0].outcome == Outcome::kFailed);
  CHECK(r.history[0].error.find("exceeds max_result") != std::string::npos);
  CHECK(r.result.empty());
  world.close_and_check_clean();
}
