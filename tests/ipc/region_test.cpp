// SharedRegion: creation, sealing, and attach's validation of the header it is handed.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>

#include <catch2/catch.hpp>

#include <sandpool/ipc/region.hpp>

namespace sandpool::ipc {
namespace {

SharedRegion make_region(RegionConfig config = {}) {
  Result<SharedRegion> r = SharedRegion::create(config);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

// attach() owns the fd it is given; tests keep the original and hand over a copy.
int dup_fd(int fd) {
  const int copy = ::dup(fd);
  REQUIRE(copy >= 0);
  return copy;
}

TEST_CASE("a region attached through its fd shares the creator's rings and geometry") {
  SharedRegion manager = make_region(RegionConfig{8192, 16384, 100000});
  Result<SharedRegion> attached = SharedRegion::attach(dup_fd(manager.fd()));
  INFO(attached.status().to_string());
  REQUIRE(attached.is_ok());
  SharedRegion& worker = attached.value();
  CHECK(worker.task_ring_bytes() == 8192);
  CHECK(worker.result_ring_bytes() == 16384);
  CHECK(worker.max_message() == 100000);
  CHECK(worker.header() != manager.header());  // two mappings of one file

  RingProducer tasks = manager.task_producer();
  RingConsumer worker_tasks = worker.task_consumer();
  RingProducer results = worker.result_producer();
  RingConsumer manager_results = manager.result_consumer();
  REQUIRE(tasks.try_push(1, 0, "task") == RingStatus::kOk);
  tasks.publish();
  REQUIRE(results.try_push(17, 0, "result") == RingStatus::kOk);
  results.publish();
  RecordHeader h{};
  std::string out;
  REQUIRE(worker_tasks.try_pop(&h, &out, 100) == RingStatus::kOk);
  CHECK(out == "task");
  REQUIRE(manager_results.try_pop(&h, &out, 100) == RingStatus::kOk);
  CHECK(out == "result");
  CHECK(h.kind == 17);
}

TEST_CASE("the plugin config rides behind the rings and reads back whole on attach") {
  const std::string config = GENERATE(std::string(), std::string(R"({"api_key": "s3cr3t"})"),
                                      std::string(100000, 'x') + std::string(1, '\0') + "tail");
  Result<SharedRegion> created = SharedRegion::create(RegionConfig{8192, 8192, 4096}, config);
  REQUIRE(created.is_ok());
  SharedRegion& manager = created.value();
  CHECK(manager.header()->region_size == manager.header()->config_offset + config.size());
  Result<SharedRegion> attached = SharedRegion::attach(dup_fd(manager.fd()));
  INFO(attached.status().to_string());
  REQUIRE(attached.is_ok());
  CHECK(attached->plugin_config() == config);
}

TEST_CASE("create refuses a plugin config over kMaxPluginConfig") {
  const std::string config(kMaxPluginConfig + 1, 'x');
  Result<SharedRegion> r = SharedRegion::create(RegionConfig{}, config);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == Code::kInvalidArgument);
  CHECK(r.status().message().find("plugin config") != std::string::npos);
}

TEST_CASE("ring sizes are rounded up to powers of two of at least 4 KiB") {
  struct Case {
    std::uint64_t asked, got;
  };
  const Case k = GENERATE(Case{0, 4096}, Case{1, 4096}, Case{4096, 4096}, Case{4097, 8192},
                          Case{300000, 524288});
  SharedRegion r = make_region(RegionConfig{k.asked, k.asked, 1024});
  CHECK(r.task_ring_bytes() == k.got);
  CHECK(r.result_ring_bytes() == k.got);
  const RegionHeader* h = r.header();
  CHECK(h->task_ring_offset % kCacheLine == 0);
  CHECK(h->task_ring_offset >= sizeof(RegionHeader));
  CHECK(h->result_ring_offset == h->task_ring_offset + k.got);
  CHECK(h->region_size == h->result_ring_offset + k.got);
}

TEST_CASE("create refuses rings or messages over 1 GiB") {
  const RegionConfig config =
      GENERATE(RegionConfig{(1ull << 30) + 1, 4096, 1024}, RegionConfig{4096, ~0ull, 1024},
               RegionConfig{4096, 4096, (1ull << 30) + 1});
  Result<SharedRegion> r = SharedRegion::create(config);
  CHECK(r.status().code() == Code::kInvalidArgument);
}

TEST_CASE("the region is sealed against resizing, and the seals are sealed") {
  SharedRegion r = make_region();
  const int seals = ::fcntl(r.fd(), F_GET_SEALS);
  REQUIRE(seals >= 0);
  CHECK((seals & F_SEAL_SHRINK) != 0);
  CHECK((seals & F_SEAL_GROW) != 0);
  CHECK((seals & F_SEAL_SEAL) != 0);
  CHECK((seals & F_SEAL_WRITE) == 0);  // the rings must stay writable
  for (off_t size : {off_t{0}, off_t{4096}, static_cast<off_t>(r.header()->region_size + 4096)}) {
    errno = 0;
    CHECK(::ftruncate(r.fd(), size) == -1);
    CHECK(errno == EPERM);
  }
  errno = 0;
  CHECK(::fcntl(r.fd(), F_ADD_SEALS, F_SEAL_WRITE) == -1);
  CHECK(errno == EPERM);
}

TEST_CASE("attach refuses a header that does not describe a sane region") {
  struct Case {
    const char* what;
    std::function<void(RegionHeader&)> scribble;
  };
  const Case k = GENERATE(
      Case{"bad magic", [](RegionHeader& h) { h.magic ^= 1; }},
      Case{"other version", [](RegionHeader& h) { h.version = kRegionVersion + 1; }},
      Case{"size not the file's", [](RegionHeader& h) { h.region_size += 4096; }},
      Case{"ring not a power of two", [](RegionHeader& h) { h.task_ring_bytes = 6144; }},
      Case{"ring under 4 KiB", [](RegionHeader& h) { h.result_ring_bytes = 2048; }},
      Case{"ring past the end", [](RegionHeader& h) { h.result_ring_offset += 64; }},
      Case{"offset overflowing", [](RegionHeader& h) { h.task_ring_offset = ~0ull - 63; }},
      Case{"ring inside the header", [](RegionHeader& h) { h.task_ring_offset = 0; }},
      Case{"ring misaligned", [](RegionHeader& h) { h.task_ring_offset += 8; }},
      Case{"rings overlapping", [](RegionHeader& h) { h.result_ring_offset = h.task_ring_offset; }},
      Case{"max_message over 1 GiB", [](RegionHeader& h) { h.max_message = (1ull << 30) + 1; }},
      Case{"config inside the rings", [](RegionHeader& h) { h.config_offset -= 64; }},
      Case{"config past the end", [](RegionHeader& h) { h.config_bytes += 1; }},
      Case{"config bytes overflowing", [](RegionHeader& h) { h.config_bytes = ~0ull; }});
  INFO(k.what);
  Result<SharedRegion> made = SharedRegion::create(RegionConfig{8192, 8192, 4096}, "{}");
  REQUIRE(made.is_ok());
  SharedRegion& r = made.value();
  k.scribble(*r.header());
  Result<SharedRegion> attached = SharedRegion::attach(dup_fd(r.fd()));
  INFO(attached.status().to_string());
  CHECK(attached.status().code() == Code::kProtocol);
}

TEST_CASE("attach refuses a file shorter than the header says, or too short for any region") {
  SharedRegion r = make_region(RegionConfig{8192, 8192, 4096});
  const std::uint64_t full = r.header()->region_size;
  const std::uint64_t size =
      GENERATE_COPY(full - 4096, full - 64, std::uint64_t{100}, std::uint64_t{0});
  // A copy of the valid region in an unsealed memfd, cut short.
  const int fd = ::memfd_create("truncated-region", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0);
  if (size > 0) REQUIRE(::pwrite(fd, r.header(), size, 0) == static_cast<ssize_t>(size));
  Result<SharedRegion> attached = SharedRegion::attach(fd);
  INFO(attached.status().to_string());
  CHECK(attached.status().code() == Code::kProtocol);
}

TEST_CASE("attach takes ownership of the fd even when it refuses it") {
  SharedRegion r = make_region();
  r.header()->magic = 0;
  const int fd = dup_fd(r.fd());
  REQUIRE_FALSE(SharedRegion::attach(fd).is_ok());
  errno = 0;
  CHECK(::fcntl(fd, F_GETFD) == -1);
  CHECK(errno == EBADF);
}

TEST_CASE("a moved-from region and mapping own nothing") {
  SharedRegion a = make_region();
  const int fd = a.fd();
  RegionHeader* h = a.header();
  SharedRegion b = std::move(a);
  CHECK(b.fd() == fd);
  CHECK(b.header() == h);
  // Checking the moved-from state is the point here.
  CHECK(a.fd() == -1);           // NOLINT(bugprone-use-after-move,clang-analyzer-cplusplus.Move)
  CHECK(a.header() == nullptr);  // NOLINT(bugprone-use-after-move,clang-analyzer-cplusplus.Move)
}

}  // namespace
}  // namespace sandpool::ipc
