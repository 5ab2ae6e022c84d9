#include "private_tmpfs.hpp"

#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace sandpool::testing {
namespace {

[[noreturn]] void skip(const std::string& why) {
  std::fprintf(stderr, "SKIPPED: %s\n", why.c_str());
  std::fflush(stderr);
  std::_Exit(77);
}

// Once per process: a mount namespace of our own, with no propagation back to the host.
void enter_private_mount_namespace() {
  static bool entered = false;
  if (entered) return;
  if (::unshare(CLONE_NEWNS) != 0) {
    skip(std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno) +
         " (the disk tests need CAP_SYS_ADMIN)");
  }
  // Without this, a mount under a shared / would propagate to the host's namespace.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    skip(std::string("mount(/, MS_REC|MS_PRIVATE): ") + std::strerror(errno));
  }
  entered = true;
}

}  // namespace

PrivateTmpfs::PrivateTmpfs(std::uint64_t bytes) {
  enter_private_mount_namespace();
  char tmpl[] = "/tmp/sp-tmpfs-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  path_ = tmpl;
  const std::string opts = "size=" + std::to_string(bytes) + ",mode=0700";
  if (::mount("tmpfs", path_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
    const int err = errno;
    ::rmdir(path_.c_str());
    skip("mount(tmpfs, " + opts + "): " + std::strerror(err));
  }
  filler_ = path_ + "/filler";
}

PrivateTmpfs::~PrivateTmpfs() {
  ::umount2(path_.c_str(), MNT_DETACH);
  ::rmdir(path_.c_str());
}

std::uint64_t PrivateTmpfs::fill() {
  const int fd = ::open(filler_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  std::vector<char> block(1 << 16, 'x');
  std::uint64_t written = 0;
  // Big blocks first, then single bytes for the last partial page.
  for (std::size_t size = block.size(); size > 0; size /= 2) {
    for (;;) {
      const ssize_t n = ::write(fd, block.data(), size);
      if (n > 0) {
        written += static_cast<std::uint64_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      REQUIRE((n < 0 && errno == ENOSPC));
      break;
    }
  }
  ::close(fd);
  return written;
}

void PrivateTmpfs::free_filler() { REQUIRE(::unlink(filler_.c_str()) == 0); }

}  // namespace sandpool::testing
