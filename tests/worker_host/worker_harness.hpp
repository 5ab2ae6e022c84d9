// WorkerHarness: a small stand-in for the manager, enough to drive the real
// sandpool-worker binary in process-level tests. It creates the shared region (with the
// plugin config in it) and the doorbell, opens the plugin and its directory, forks and
// execs the worker with them on fds 3, 4, 6 and 7 and its stdout/stderr on a pipe, sends
// manager messages and waits for the worker's by polling the doorbell, the pipe and the
// worker's pidfd (never by sleeping).
//
// Ownership: owns the region, the doorbell, the pipe and the child; the destructor kills
// and reaps a worker that is still running. One thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <sandpool/base/unique_fd.hpp>
#include <sandpool/ipc/channel.hpp>
#include <sandpool/ipc/messages.hpp>
#include <sandpool/ipc/region.hpp>
#include <sandpool/ipc/wake.hpp>
#include <sandpool/sandbox/worker_args.hpp>

namespace sandpool::testing {

using WorkerMessage = std::variant<ipc::ReadyMsg, ipc::ResultMsg, ipc::ProgressMsg, ipc::LogMsg>;

inline constexpr std::chrono::milliseconds kGenerous{20000};

// Decodes a message of the result ring; throws std::runtime_error when it does not decode.
WorkerMessage decode_worker_message(std::uint16_t kind, const std::string& bytes);

std::string plugin_path(const std::string& name);       // an example plugin, lib<name>.so
std::string test_plugin_path(const std::string& name);  // a tests/worker_host plugin

// Worker arguments for `plugin` with the defaults of the contract (channel on 3 and 4).
sandbox::WorkerArgs worker_args(const std::string& plugin);

class WorkerHarness {
 public:
  static std::unique_ptr<WorkerHarness> spawn(const sandbox::WorkerArgs& args,
                                              const ipc::RegionConfig& region = {});
  ~WorkerHarness();
  WorkerHarness(const WorkerHarness&) = delete;
  WorkerHarness& operator=(const WorkerHarness&) = delete;

  pid_t pid() const { return pid_; }
  ipc::RegionHeader& header() const { return *region_.header(); }

  // Writes a manager message into the task ring (queueing it behind a full ring) without
  // making it visible; publish() does that and wakes a sleeping worker.
  template <typename Msg>
  void queue(const Msg& msg) {
    std::string bytes;
    ipc::encode(msg, &bytes);
    queue_raw(Msg::kKind, bytes);
  }
  void queue_raw(ipc::MsgKind kind, const std::string& bytes);
  void publish();
  template <typename Msg>
  void send(const Msg& msg) {
    queue(msg);
    publish();
  }
  ipc::TaskMsg task(std::uint64_t id, std::string type, std::string payload) const;

  // The next message from the worker, waiting at most `timeout`. nullopt when the worker
  // has exited and its ring is empty, or when the time ran out.
  std::optional<WorkerMessage> next(std::chrono::milliseconds timeout = kGenerous);
  // Skips progress and log messages (keeping logs in logs()) until a result or ready.
  std::optional<ipc::ReadyMsg> expect_ready();
  std::optional<ipc::ResultMsg> next_result();

  // Waits until ready() returns true (returns true) or `timeout` passes (returns false),
  // waking on the doorbell, the output pipe and the pidfd, and every 2 ms for conditions
  // that ring nothing (a header word the worker stores). Consumes no messages.
  bool wait_until(const std::function<bool()>& ready,
                  std::chrono::milliseconds timeout = kGenerous);

  // Waits for the worker to exit and returns its wait status; nullopt when it is still
  // running after `timeout`. Meanwhile it reads the worker's output and keeps consuming
  // its messages: logs go to logs(), the others to late_messages().
  std::optional<int> wait_exit(std::chrono::milliseconds timeout = kGenerous);

  const std::string& output() const { return output_; }  // stdout and stderr so far
  const std::vector<ipc::LogMsg>& logs() const { return logs_; }
  const std::vector<WorkerMessage>& late_messages() const { return late_; }
  // True iff some log line seen so far contains `text`.
  bool logged(const std::string& text) const;

 private:
  WorkerHarness(ipc::SharedRegion region, ipc::Doorbell doorbell);
  // Blocks until the doorbell, the output pipe or the pidfd is ready, or `until`.
  void wait_events(std::chrono::steady_clock::time_point until);
  void read_output();
  bool reap(int options);

  ipc::SharedRegion region_;
  ipc::Doorbell doorbell_;
  UniqueFd out_;  // read end of the worker's stdout/stderr
  UniqueFd pidfd_;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::optional<int> status_;
  ipc::MessageSender sender_;
  ipc::MessageReceiver receiver_;
  std::string output_;
  std::vector<ipc::LogMsg> logs_;
  std::vector<WorkerMessage> late_;
};

}  // namespace sandpool::testing
