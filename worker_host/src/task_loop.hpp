// TaskLoop: the worker's main loop after the sandbox is in place. It drains the task ring
// into a local FIFO (handling CancelMsg for queued tasks and StopMsg), runs the tasks one
// at a time through the plugin, sends one ResultMsg per task and publishes it at once
// (round-trip latency matters more than batching here), and waits when idle: spinning for
// the header's spin_us, then sleeping on the task ring's futex, beating the heartbeat at
// least every heartbeat interval.
//
// Thread-safety: run() on one thread (the worker's main thread). Holds references to the
// channel, the plugin and the host API, which must outlive it.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <sandpool/ipc/messages.hpp>

#include "host_api.hpp"
#include "plugin_loader.hpp"
#include "worker_channel.hpp"

namespace sandpool::worker {

class TaskLoop {
 public:
  TaskLoop(WorkerChannel& channel, LoadedPlugin& plugin, HostApi& host, std::uint32_t heartbeat_ms);

  // Runs until a StopMsg has been handled (queued tasks finished, sp_plugin_shutdown
  // called, every message flushed) and returns sandbox::kExitOk; or until the manager
  // breaks the protocol, and returns sandbox::kExitProtocol after printing why to stderr.
  int run();

 private:
  // Moves every message available now into the FIFO. Returns a non-ok Status when a
  // message cannot be read or decoded.
  Status drain();
  Status accept(std::uint16_t kind, std::string_view bytes);
  Status run_task(const ipc::TaskMsg& msg);
  int stop();
  // A TaskMsg to decode into: a spare one (its strings keep their buffers), else a new one.
  ipc::TaskMsg take_spare();
  // Keeps a run task's message as a spare while the spares hold at most kSpareBytes.
  void keep_spare(ipc::TaskMsg msg);

  WorkerChannel& channel_;
  LoadedPlugin& plugin_;
  HostApi& host_;
  std::int64_t wait_ns_;  // the longest idle sleep: half the heartbeat interval
  std::deque<ipc::TaskMsg> queue_;
  bool stop_requested_ = false;
  bool drained_after_task_ = false;  // run_task's post-handler drain stands for the next one
  std::string message_;              // scratch for the receiver
  // Buffers kept from one task for the next, so that a task of small payload and result
  // allocates nothing here: the run tasks' messages (their payloads' buffers), and the last
  // result's (handed to HostApi::begin_task). Bounded: kSpareBytes of spare messages, their
  // buffers included; a result buffer of at most kSpareBytes.
  static constexpr std::size_t kSpareBytes = 1 << 20;
  std::vector<ipc::TaskMsg> spares_;
  std::size_t spare_bytes_ = 0;
  std::string result_buffer_;
};

}  // namespace sandpool::worker
