#include <sandpool/service/instance_lock.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <filesystem>

#include <sandpool/base/posix_call.hpp>

namespace sandpool::poold {
namespace {

constexpr const char* kLockName = "poold.lock";

// mkdir -p -m 0750: parents 0755, the leaf 0750; existing directories are left as they are.
Status make_state_dir(const std::filesystem::path& dir) {
  std::filesystem::path at;
  for (auto it = dir.begin(); it != dir.end(); ++it) {
    at /= *it;
    if (at.empty() || *it == "/") continue;
    const bool leaf = std::next(it) == dir.end();
    if (::mkdir(at.c_str(), leaf ? 0750 : 0755) == 0 || errno == EEXIST) continue;
    return Status::from_errno(errno, "mkdir " + at.string());
  }
  struct stat st {};
  auto r = posix_call("stat " + dir.string(), [&] { return ::stat(dir.c_str(), &st); });
  if (!r) return r.status();
  if (!S_ISDIR(st.st_mode))
    return Status::invalid("state dir " + dir.string() + " is not a directory");
  return Status::ok();
}

// Overwrites the file's content with "<pid>\n": write first, then cut to length, so a
// reader never sees the file empty while the lock is held.
Status write_pid(int fd) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf - 1, ::getpid());
  *end++ = '\n';
  const auto len = end - buf;
  auto w = posix_call("pwrite", [&] { return ::pwrite(fd, buf, len, 0); });
  if (!w) return w.status();
  if (*w != len) return Status::error(Code::kSystem, "pwrite: short write to the lock file");
  auto t = posix_call("ftruncate", [&] { return ::ftruncate(fd, len); });
  return t ? Status::ok() : t.status();
}

}  // namespace

Result<InstanceLock> InstanceLock::acquire(const std::string& state_dir) {
  if (state_dir.empty()) return Status::invalid("state dir is empty");
  std::filesystem::path dir = std::filesystem::path(state_dir).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "var/" names "var"
  SP_RETURN_IF_ERROR(make_state_dir(dir));
  std::string path = (dir / kLockName).string();
  auto fd = posix_call("open " + path, [&] {
    return ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
  });
  if (!fd) return fd.status();
  UniqueFd owned(*fd);
  auto locked =
      posix_call("flock " + path, [&] { return ::flock(owned.get(), LOCK_EX | LOCK_NB); });
  if (!locked) {
    if (locked.status().sys_errno() != EWOULDBLOCK) return locked.status();
    const pid_t holder = read_lock_holder(path);
    const std::string who = holder > 0 ? "pid " + std::to_string(holder) : "pid not yet written";
    return Status::error(Code::kSystem, "state dir " + state_dir + " is in use by another poold (" +
                                            who + "; lock " + path + ")");
  }
  SP_RETURN_IF_ERROR(write_pid(owned.get()).with_context(path));
  return InstanceLock(std::move(path), std::move(owned));
}

InstanceLock& InstanceLock::operator=(InstanceLock&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    fd_ = std::move(o.fd_);
  }
  return *this;
}

InstanceLock::~InstanceLock() { release(); }

void InstanceLock::release() {
  if (!fd_) return;
  // Still locked here: nobody else can have written the file since we did. An empty file
  // says "no poold"; a crash leaves our pid behind, which the next holder overwrites.
  (void)::ftruncate(fd_.get(), 0);
  fd_.reset();
}

pid_t read_lock_holder(const std::string& lock_path) {
  UniqueFd fd(::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return 0;
  char buf[32];
  auto n = posix_call("read", [&] { return ::read(fd.get(), buf, sizeof buf); });
  if (!n || *n <= 0) return 0;
  pid_t pid = 0;
  auto [ptr, ec] = std::from_chars(buf, buf + *n, pid);
  return ec == std::errc() && pid > 0 ? pid : 0;
}

}  // namespace sandpool::poold
