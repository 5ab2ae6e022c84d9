// InstanceLock: one poold per state dir. An exclusive flock(2) on <state_dir>/poold.lock,
// held for the life of the object; the kernel drops it when the process dies however it
// dies, so a crash never leaves a stale lock behind.
#pragma once

#include <sys/types.h>

#include <string>

#include <sandpool/base/status.hpp>
#include <sandpool/base/unique_fd.hpp>

namespace sandpool::poold {

// Ownership: owns the lock file's descriptor (O_CLOEXEC, so workers exec'd by poold never
// hold the lock). Move-only; destroying it truncates the file and releases the lock.
// Thread-safety: none needed after acquire(); the accessors are const.
//
// flock rather than fcntl locks (or Boost.Interprocess's file_lock, which is built on them):
// an fcntl lock is dropped as soon as *any* descriptor of the file is closed anywhere in the
// process, which a library that opens files cannot rule out; a flock belongs to this one open
// file description.
class InstanceLock {
 public:
  // Creates state_dir like `mkdir -p -m 0750` (missing parents 0755; an existing directory
  // keeps its mode), opens <state_dir>/poold.lock (0640, created if missing, never through a
  // symlink), takes the lock without waiting and writes our pid into the file for humans.
  // Returns the held lock; an error naming the pid of the poold that holds it when another
  // process has it ("state dir D is in use by another poold (pid N; lock D/poold.lock)"); or
  // the failed call (mkdir, open, flock, ...) with its errno.
  static Result<InstanceLock> acquire(const std::string& state_dir);

  InstanceLock(InstanceLock&&) noexcept = default;
  InstanceLock& operator=(InstanceLock&&) noexcept;
  InstanceLock(const InstanceLock&) = delete;
  InstanceLock& operator=(const InstanceLock&) = delete;
  ~InstanceLock();

  // The lock file, <state_dir>/poold.lock.
  const std::string& path() const { return path_; }

 private:
  InstanceLock(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  void release();

  std::string path_;
  UniqueFd fd_;
};

// Returns the pid written in a lock file, or 0 when the file is missing, empty or does not
// start with a pid (its holder may not have written it yet).
pid_t read_lock_holder(const std::string& lock_path);

}  // namespace sandpool::poold
