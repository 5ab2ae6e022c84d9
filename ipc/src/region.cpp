// The sealed memfd region: creation on the manager side, validated attach on the worker side.
#include <sandpool/ipc/region.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>
#include <string>
#include <tuple>
#include <utility>

#include <sandpool/base/posix_call.hpp>

namespace sandpool::ipc {
namespace {

inline constexpr std::uint64_t kMinRingBytes = 4096;
// Bounds that keep every sum below comfortably inside 64 bits and the region mappable.
inline constexpr std::uint64_t kMaxRingBytes = std::uint64_t{1} << 30;
inline constexpr std::uint64_t kMaxMessage = std::uint64_t{1} << 30;

// The rings start on the first cache line after the header, so the task ring's first
// bytes never share a line with the header's hot control words.
inline constexpr std::uint64_t kRingsStart = align_up(sizeof(RegionHeader), kCacheLine);

Result<std::uint64_t> ring_size(std::uint64_t requested, const char* which) {
  if (requested > kMaxRingBytes) {
    return Status::invalid(std::string(which) + " of " + std::to_string(requested) +
                           " bytes exceeds " + std::to_string(kMaxRingBytes));
  }
  return std::bit_ceil(requested < kMinRingBytes ? kMinRingBytes : requested);
}

// Returns true iff [off, off + bytes) lies inside [kRingsStart, size), without overflow.
bool ring_in_bounds(std::uint64_t off, std::uint64_t bytes, std::uint64_t size) {
  return off >= kRingsStart && off <= size && bytes <= size - off;
}

Result<MappedRegion> map_shared(int fd, std::size_t size) {
  Result<void*> addr = posix_call(
      "mmap", [&] { return ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0); });
  if (!addr) return addr.status();
  return MappedRegion(*addr, size);
}

}  // namespace

MappedRegion::MappedRegion(MappedRegion&& o) noexcept
    : addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)) {}

MappedRegion& MappedRegion::operator=(MappedRegion&& o) noexcept {
  if (this != &o) {
    if (addr_ != nullptr) ::munmap(addr_, size_);
    addr_ = std::exchange(o.addr_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

MappedRegion::~MappedRegion() {
  // munmap only fails for a range we never mapped; nothing useful to do about it here.
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

Result<SharedRegion> SharedRegion::create(const RegionConfig& config,
                                          std::string_view plugin_config) {
  Result<std::uint64_t> task_bytes = ring_size(config.task_ring_bytes, "task ring");
  if (!task_bytes) return task_bytes.status();
  Result<std::uint64_t> result_bytes = ring_size(config.result_ring_bytes, "result ring");
  if (!result_bytes) return result_bytes.status();
  if (config.max_message > kMaxMessage) {
    return Status::invalid("max_message of " + std::to_string(config.max_message) +
                           " bytes exceeds " + std::to_string(kMaxMessage));
  }
  if (plugin_config.size() > kMaxPluginConfig) {
    return Status::invalid("plugin config of " + std::to_string(plugin_config.size()) +
                           " bytes exceeds " + std::to_string(kMaxPluginConfig));
  }

  SharedRegion r;
  r.task_off_ = kRingsStart;
  r.task_bytes_ = *task_bytes;
  r.result_off_ = r.task_off_ + r.task_bytes_;  // a power of two >= 4096: still aligned
  r.result_bytes_ = *result_bytes;
  r.max_message_ = config.max_message;
  r.config_off_ = r.result_off_ + r.result_bytes_;
  r.config_bytes_ = plugin_config.size();
  const std::uint64_t size = r.config_off_ + r.config_bytes_;

  Result<int> fd = posix_call("memfd_create", [] {
    return ::memfd_create("sandpool-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  });
  if (!fd) return fd.status();
  r.fd_ = UniqueFd(*fd);
  Result<int> truncated = posix_call(
      "ftruncate(memfd)", [&] { return ::ftruncate(r.fd_.get(), static_cast<off_t>(size)); });
  if (!truncated) return truncated.status();
  // Sealed before anyone else can see the fd: a worker that could shrink the file would
  // make every manager access past the new end a SIGBUS.
  Result<int> sealed = posix_call("fcntl(F_ADD_SEALS)", [&] {
    return ::fcntl(r.fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  });
  if (!sealed) return sealed.status();
  Result<MappedRegion> map = map_shared(r.fd_.get(), size);
  if (!map) return map.status();
  r.map_ = std::move(*map);

  // A fresh memfd reads as zeros, which is every atomic's initial value; constructing the
  // header formally starts the objects' lifetime before we store into them.
  auto* h = new (r.map_.data()) RegionHeader();
  h->magic = kRegionMagic;
  h->version = kRegionVersion;
  h->region_size = size;
  h->task_ring_offset = r.task_off_;
  h->task_ring_bytes = r.task_bytes_;
  h->result_ring_offset = r.result_off_;
  h->result_ring_bytes = r.result_bytes_;
  h->max_message = r.max_message_;
  h->config_offset = r.config_off_;
  h->config_bytes = r.config_bytes_;
  if (!plugin_config.empty()) {
    std::memcpy(r.map_.data() + r.config_off_, plugin_config.data(), plugin_config.size());
  }
  return r;
}

Result<SharedRegion> SharedRegion::attach(int fd) {
  SharedRegion r;
  r.fd_ = UniqueFd(fd);  // owned from here on, also when validation fails
  struct stat st {};
  Result<int> stat_ok = posix_call("fstat(region)", [&] { return ::fstat(fd, &st); });
  if (!stat_ok) return stat_ok.status();
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (st.st_size < static_cast<off_t>(kRingsStart + 2 * kMinRingBytes) ||
      size > kRingsStart + 2 * kMaxRingBytes + kMaxPluginConfig) {
    return Status::protocol("region: file size " + std::to_string(st.st_size) +
                            " is outside the possible region sizes");
  }
  Result<MappedRegion> map = map_shared(fd, size);
  if (!map) return map.status();
  r.map_ = std::move(*map);

  // Each field is read exactly once into a local; only the locals are checked and kept.
  const RegionHeader* h = r.header();
  const std::uint32_t magic = h->magic;
  const std::uint32_t version = h->version;
  const std::uint64_t region_size = h->region_size;
  r.task_off_ = h->task_ring_offset;
  r.task_bytes_ = h->task_ring_bytes;
  r.result_off_ = h->result_ring_offset;
  r.result_bytes_ = h->result_ring_bytes;
  r.max_message_ = h->max_message;
  r.config_off_ = h->config_offset;
  r.config_bytes_ = h->config_bytes;

  auto bad = [](std::string what) { return Status::protocol("region: " + std::move(what)); };
  if (magic != kRegionMagic) return bad("bad magic " + std::to_string(magic));
  if (version != kRegionVersion) return bad("unsupported version " + std::to_string(version));
  if (region_size != size) {
    return bad("header says " + std::to_string(region_size) + " bytes, file has " +
               std::to_string(size));
  }
  for (auto [off, bytes, name] : {std::tuple{r.task_off_, r.task_bytes_, "task ring"},
                                  std::tuple{r.result_off_, r.result_bytes_, "result ring"}}) {
    if (!std::has_single_bit(bytes) || bytes < kMinRingBytes || bytes > kMaxRingBytes) {
      return bad(std::string(name) + " size " + std::to_string(bytes) +
                 " is not a power of two in [4096, 1 GiB]");
    }
    if (off % kCacheLine != 0 || !ring_in_bounds(off, bytes, size)) {
      return bad(std::string(name) + " at offset " + std::to_string(off) +
                 " is misaligned or outside the region");
    }
  }
  // Both in bounds; they must not overlap either (the sides would corrupt each other).
  if (r.task_off_ < r.result_off_ + r.result_bytes_ &&
      r.result_off_ < r.task_off_ + r.task_bytes_) {
    return bad("task and result rings overlap");
  }
  if (r.max_message_ > kMaxMessage) {
    return bad("max_message " + std::to_string(r.max_message_) + " exceeds 1 GiB");
  }
  // The config comes after both rings and runs to the end of the region.
  const std::uint64_t rings_end =
      std::max(r.task_off_ + r.task_bytes_, r.result_off_ + r.result_bytes_);
  if (r.config_bytes_ > kMaxPluginConfig || r.config_off_ < rings_end || r.config_off_ > size ||
      r.config_bytes_ != size - r.config_off_) {
    return bad("plugin config of " + std::to_string(r.config_bytes_) + " bytes at offset " +
               std::to_string(r.config_off_) + " is not what follows the rings");
  }
  return r;
}

std::string_view SharedRegion::plugin_config() const {
  return {reinterpret_cast<const char*>(map_.data() + config_off_),
          static_cast<std::size_t>(config_bytes_)};
}

RingProducer SharedRegion::task_producer() const {
  return RingProducer(&header()->task_ring, map_.data() + task_off_, task_bytes_);
}
RingConsumer SharedRegion::task_consumer() const {
  return RingConsumer(&header()->task_ring, map_.data() + task_off_, task_bytes_);
}
RingProducer SharedRegion::result_producer() const {
  return RingProducer(&header()->result_ring, map_.data() + result_off_, result_bytes_);
}
RingConsumer SharedRegion::result_consumer() const {
  return RingConsumer(&header()->result_ring, map_.data() + result_off_, result_bytes_);
}

}  // namespace sandpool::ipc
