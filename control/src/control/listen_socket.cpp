#include "control/listen_socket.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <sandpool/base/posix_call.hpp>

namespace sandpool::control {
namespace {

sockaddr_un address_of(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

// Returns true iff a server accepts connections on `path` right now.
bool someone_listens(const std::string& path) {
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe) return false;
  const sockaddr_un addr = address_of(path);
  auto r = posix_call("connect", [&] {
    return ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  });
  // ECONNREFUSED: a socket file with no listener (its server died). EAGAIN: the backlog
  // is full, which only a live server has.
  return r.is_ok() || r.status().sys_errno() == EAGAIN;
}

}  // namespace

Status check_socket_path(const std::string& path) {
  if (path.empty()) return Status::invalid("control socket path is empty");
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return Status::invalid("control socket path is longer than " +
                           std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes: " + path);
  }
  return Status::ok();
}

Result<ListeningSocket> listen_unix(const std::string& path, std::uint32_t mode, gid_t group) {
  SP_RETURN_IF_ERROR(check_socket_path(path));
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::invalid("control socket path exists and is not a socket: " + path);
    }
    if (someone_listens(path)) {
      return Status::invalid("another server is answering on the control socket " + path);
    }
    auto r = posix_call("unlink", [&] { return ::unlink(path.c_str()); });
    if (!r && r.status().sys_errno() != ENOENT) return r.status().with_context(path);
  }
  ListeningSocket s;
  auto fd = posix_call("socket(AF_UNIX)", [] {
    return ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  });
  if (!fd) return fd.status();
  s.fd.reset(*fd);
  const sockaddr_un addr = address_of(path);
  auto b = posix_call("bind", [&] {
    return ::bind(s.fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  });
  if (!b) return b.status().with_context(path);
  // Nobody can connect before listen(): mode and group are in place before the first peer.
  auto fail = [&](Status st) {
    ::unlink(path.c_str());
    return st.with_context(path);
  };
  auto m = posix_call("chmod", [&] { return ::chmod(path.c_str(), mode); });
  if (!m) return fail(m.status());
  if (group != static_cast<gid_t>(-1)) {
    auto c = posix_call("chown", [&] { return ::chown(path.c_str(), -1, group); });
    if (!c) return fail(c.status());
  }
  if (::lstat(path.c_str(), &st) != 0) return fail(Status::from_errno(errno, "lstat"));
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  auto l = posix_call("listen", [&] { return ::listen(s.fd.get(), 128); });
  if (!l) return fail(l.status());
  return s;
}

void unlink_if_ours(const std::string& path, const ListeningSocket& s) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && st.st_dev == s.dev && st.st_ino == s.ino) {
    ::unlink(path.c_str());
  }
}

}  // namespace sandpool::control
