// LocalChannel: a WorkerChannel and the manager's end of the same shared region in one
// process, for testing the worker's pieces (host API, loader) without spawning anything.
#pragma once

#include <unistd.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include <sandpool/ipc/channel.hpp>
#include <sandpool/ipc/region.hpp>

#include "worker_channel.hpp"
#include "worker_host/worker_harness.hpp"

namespace sandpool::testing {

class LocalChannel {
 public:
  explicit LocalChannel(const ipc::RegionConfig& config = {})
      : region_(must(ipc::SharedRegion::create(config))),
        doorbell_(must(ipc::Doorbell::create())),
        worker_(
            must(worker::WorkerChannel::attach(::dup(region_.fd()), ::dup(doorbell_.worker_fd())))),
        results_(region_.result_consumer(), region_.max_message()) {}

  worker::WorkerChannel& worker() { return *worker_; }
  ipc::RegionHeader& header() { return *region_.header(); }

  // Every message the worker side has published so far, in order.
  std::vector<WorkerMessage> drain() {
    std::vector<WorkerMessage> out;
    std::uint16_t kind = 0;
    std::string bytes;
    ipc::RingStatus s;
    while ((s = results_.next(&kind, &bytes)) == ipc::RingStatus::kOk) {
      out.push_back(decode_worker_message(kind, bytes));
    }
    if (s == ipc::RingStatus::kCorrupt) throw std::runtime_error("corrupt result ring");
    results_.release();
    return out;
  }

  // The log messages among drain()'s.
  std::vector<ipc::LogMsg> drain_logs() {
    std::vector<ipc::LogMsg> logs;
    for (WorkerMessage& m : drain()) {
      if (auto* log = std::get_if<ipc::LogMsg>(&m)) logs.push_back(std::move(*log));
    }
    return logs;
  }

 private:
  template <typename T>
  static T must(Result<T> r) {
    if (!r) throw std::runtime_error(r.status().to_string());
    return std::move(r).value();
  }

  ipc::SharedRegion region_;
  ipc::Doorbell doorbell_;
  std::unique_ptr<worker::WorkerChannel> worker_;
  ipc::MessageReceiver results_;
};

}  // namespace sandpool::testing
