// The per-worker shared region: a sealed memfd holding RegionHeader, the two rings and the
// plugin's config.
#pragma once

#include <cstdint>
#include <string_view>

#include <sandpool/base/status.hpp>
#include <sandpool/base/unique_fd.hpp>
#include <sandpool/ipc/layout.hpp>
#include <sandpool/ipc/ring.hpp>

namespace sandpool::ipc {

// The largest plugin config a region carries.
inline constexpr std::uint64_t kMaxPluginConfig = std::uint64_t{16} << 20;

struct RegionConfig {
  std::uint64_t task_ring_bytes = 256 * 1024;     // rounded up to a power of two, >= 4 KiB
  std::uint64_t result_ring_bytes = 256 * 1024;   // likewise
  std::uint64_t max_message = (8u << 20) + 4096;  // largest message either side accepts
};

// Owns one mmap'ed range; unmaps it on destruction. Move-only.
class MappedRegion {
 public:
  MappedRegion() = default;
  MappedRegion(void* addr, std::size_t size) : addr_(addr), size_(size) {}
  MappedRegion(MappedRegion&& o) noexcept;
  MappedRegion& operator=(MappedRegion&& o) noexcept;
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
  ~MappedRegion();
  std::byte* data() const { return static_cast<std::byte*>(addr_); }
  std::size_t size() const { return size_; }

 private:
  void* addr_ = nullptr;
  std::size_t size_ = 0;
};

// Owns the memfd and its mapping. The geometry (offsets, sizes, max_message) is kept in
// private members: after create(), nothing here is ever re-read from the worker-writable
// header. Move-only; not thread-safe (each role uses its own views from one thread).
class SharedRegion {
 public:
  // Manager side: memfd_create(MFD_CLOEXEC | MFD_ALLOW_SEALING), ftruncate, writes the
  // header, seals F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL (so the worker cannot truncate
  // it and make the manager take SIGBUS), maps it MAP_SHARED, and copies `plugin_config`
  // behind the rings. Rings or max_message over 1 GiB, or a config over kMaxPluginConfig
  // bytes, are kInvalidArgument.
  static Result<SharedRegion> create(const RegionConfig& config,
                                     std::string_view plugin_config = {});
  // Worker side: takes ownership of an inherited fd (also on failure), maps it and
  // validates the header (magic, version, size equal to the file size, rings of powers of
  // two >= 4 KiB, cache-line aligned, inside the region and apart, max_message <= 1 GiB,
  // the config inside the region behind the rings); a header that fails is kProtocol.
  static Result<SharedRegion> attach(int fd);

  RegionHeader* header() const { return reinterpret_cast<RegionHeader*>(map_.data()); }
  int fd() const { return fd_.get(); }
  std::uint64_t max_message() const { return max_message_; }
  std::uint64_t task_ring_bytes() const { return task_bytes_; }
  std::uint64_t result_ring_bytes() const { return result_bytes_; }
  // The plugin config as create() wrote it: the worker side reads it once, before the
  // plugin's init (the manager never reads it back).
  std::string_view plugin_config() const;

  // Role views. Each call returns a fresh view at position 0: take each one once.
  RingProducer task_producer() const;
  RingConsumer task_consumer() const;
  RingProducer result_producer() const;
  RingConsumer result_consumer() const;

 private:
  SharedRegion() = default;
  UniqueFd fd_;
  MappedRegion map_;
  std::uint64_t task_off_ = 0, task_bytes_ = 0, result_off_ = 0, result_bytes_ = 0;
  std::uint64_t max_message_ = 0;
  std::uint64_t config_off_ = 0, config_bytes_ = 0;
};

}  // namespace sandpool::ipc
