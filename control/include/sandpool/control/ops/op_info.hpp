// What every control operation's definition has (<sandpool/control/control_ops.hpp>): the poold
// thread that runs it, its table row, and the argument, reply and event types an operation
// without any uses.
#pragma once

#include <cstdint>
#include <string_view>

#include <sandpool/control/rights.hpp>

namespace sandpool::ops {

// Where poold runs an operation (docs/protocol.md, "Threading contract of the server").
enum class Lane : std::uint8_t {
  kServer,    // on the control server's thread: answers at once, never blocks
  kReads,     // sp-reads: snapshots, never queued behind submits or jobs
  kRequests,  // sp-request: one at a time in arrival order
  kJobs,      // sp-jobs: slow work (the store, reload)
};

// An operation's row of the table the server dispatches by (ops::kOps).
struct OpInfo {
  std::string_view name;
  Rights rights;
  Lane lane;
  bool stream;  // counts against the stream caps while open (ControlServerOptions)
};

// No arguments.
struct NoArgs {};

// A final reply with no member (`events` once its stream ends).
struct EmptyReply {};

// What an operation that sends no event frames has as its Event type.
struct NoEvent {};

}  // namespace sandpool::ops
