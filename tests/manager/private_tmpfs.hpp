// A size-limited tmpfs for one test, mounted in a mount namespace private to the test
// process: the host never sees it, and however the test ends, no mount is left behind (the
// namespace dies with the process). Lets a test fill a real file system to ENOSPC.
//
// The first PrivateTmpfs of a process unshares the calling thread's mount namespace and
// makes every mount in it private, so threads started afterwards (a store's writer) see the
// same mounts. Needs CAP_SYS_ADMIN; without it the test ends as skipped (exit 77, ctest's
// SKIP_RETURN_CODE), saying why on stderr.
//
// Not thread-safe: the test thread uses it.
#pragma once

#include <cstdint>
#include <string>

namespace sandpool::testing {

class PrivateTmpfs {
 public:
  // Mounts tmpfs -o size=<bytes>,mode=0700 on a new directory under /tmp.
  explicit PrivateTmpfs(std::uint64_t bytes);
  ~PrivateTmpfs();  // unmounts (detached) and removes the directory
  PrivateTmpfs(const PrivateTmpfs&) = delete;
  PrivateTmpfs& operator=(const PrivateTmpfs&) = delete;

  const std::string& path() const { return path_; }
  // Writes a filler file until the file system says ENOSPC; returns the bytes written.
  std::uint64_t fill();
  // Deletes the filler file, giving its space back.
  void free_filler();

 private:
  std::string path_;
  std::string filler_;
};

}  // namespace sandpool::testing
