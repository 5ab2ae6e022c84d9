// The service's administration: reload, shutdown (docs/protocol.md, docs/operations.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/control/ops/op_info.hpp>

namespace sandpool::ops {

// `reload`: a pool the reload reconfigured in place.
struct ReloadReconfigured {
  std::string pool;
  bool rolling_restart = false;  // its workers are replaced one by one
};

// `reload`: a pool whose worker target the reload changed.
struct ReloadScaled {
  std::string pool;
  std::uint32_t workers = 0;
};

// `reload`: a pool the reload could not start or reconfigure (it keeps running as it was).
struct ReloadFailure {
  std::string pool;
  std::string error;
};

struct ReloadReply {
  std::vector<std::string> added;
  std::vector<std::string> removed;
  std::vector<std::string> replaced;
  std::vector<ReloadReconfigured> reconfigured;
  std::vector<ReloadScaled> scaled;
  std::vector<std::string> strategy_changed;
  std::vector<ReloadFailure> failed;
  bool service_section_needs_restart = false;
};

// `shutdown`: how long the pools may take to finish (none: the configured default).
struct ShutdownArgs {
  std::optional<std::chrono::milliseconds> timeout;  // wire: timeout_ms
};

struct ShutdownReply {
  bool stopping = true;
};

struct Reload {
  static constexpr std::string_view kName = "reload";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kJobs;
  using Args = NoArgs;
  using Reply = ReloadReply;
};
struct Shutdown {
  static constexpr std::string_view kName = "shutdown";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kServer;
  using Args = ShutdownArgs;
  using Reply = ShutdownReply;
};

}  // namespace sandpool::ops
