// A ring in ordinary process memory, so ring and channel logic is tested without a region.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <sandpool/ipc/layout.hpp>
#include <sandpool/ipc/ring.hpp>

namespace sandpool::ipc::testing {

class LocalRing {
 public:
  // capacity: a power of two, a multiple of 8.
  explicit LocalRing(std::uint64_t capacity)
      : ctl_(std::make_unique<RingControl>()), data_(capacity) {}

  RingProducer producer() { return RingProducer(ctl_.get(), data_.data(), data_.size()); }
  RingConsumer consumer() { return RingConsumer(ctl_.get(), data_.data(), data_.size()); }
  RingControl& control() { return *ctl_; }
  std::byte* data() { return data_.data(); }
  std::uint64_t capacity() const { return data_.size(); }

 private:
  std::unique_ptr<RingControl> ctl_;  // heap: RingControl is cache-line aligned
  std::vector<std::byte> data_;
};

}  // namespace sandpool::ipc::testing
