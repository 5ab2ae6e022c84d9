// The pool controls: scale, strategy, drain, resume, restart, kill_worker
// (docs/protocol.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/control/ops/op_info.hpp>

namespace sandpool::ops {

// `drain`, `resume`: the pool.
struct PoolArgs {
  std::string pool;
};

struct ScaleArgs {
  std::string pool;
  std::uint32_t workers = 0;
};

struct StrategyArgs {
  std::string pool;
  std::string strategy;  // round-robin, least-loaded, random, affinity
};

struct RestartArgs {
  std::string pool;
  bool rolling = false;
};

struct KillWorkerArgs {
  std::string pool;
  std::int32_t pid = 0;
  int signal = 9;
};

// The reply of every pool control (scale, strategy, drain, resume, restart, kill_worker).
struct PoolStateReply {
  std::string pool;
  std::string state;
};

struct Scale {
  static constexpr std::string_view kName = "scale";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kRequests;
  using Args = ScaleArgs;
  using Reply = PoolStateReply;
};
struct Strategy {
  static constexpr std::string_view kName = "strategy";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kRequests;
  using Args = StrategyArgs;
  using Reply = PoolStateReply;
};
struct Drain {
  static constexpr std::string_view kName = "drain";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kRequests;
  using Args = PoolArgs;
  using Reply = PoolStateReply;
};
struct Resume {
  static constexpr std::string_view kName = "resume";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kRequests;
  using Args = PoolArgs;
  using Reply = PoolStateReply;
};
struct Restart {
  static constexpr std::string_view kName = "restart";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kRequests;
  using Args = RestartArgs;
  using Reply = PoolStateReply;
};
struct KillWorker {
  static constexpr std::string_view kName = "kill_worker";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kRequests;
  using Args = KillWorkerArgs;
  using Reply = PoolStateReply;
};

}  // namespace sandpool::ops
