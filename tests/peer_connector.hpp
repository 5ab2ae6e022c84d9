// Connections to a Unix socket made as another user: a forked child becomes `uid` (and gid
// `uid`), connects `n` times and hands the connected sockets back over SCM_RIGHTS. The
// kernel keeps the credentials of connect() time (SO_PEERCRED), so the server sees that
// uid on every one of them while the test, as root, drives them. The child makes only
// system calls (safe after fork in a process with threads); the socket's directory must be
// searchable and the socket writable by that uid. Needs root (setuid).
#pragma once

#include <grp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include <sandpool/base/unique_fd.hpp>

namespace sandpool::testing {

inline std::vector<UniqueFd> connect_as(uid_t uid, const std::string& path, int n) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof addr.sun_path);
  std::memcpy(addr.sun_path, path.data(), path.size());
  int pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(pair[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(90);
    for (int i = 0; i < n; ++i) {
      const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::_exit(91);
      }
      char one = 'f';
      iovec iov{&one, 1};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
      if (::sendmsg(pair[1], &msg, 0) != 1) ::_exit(92);
      ::close(fd);
    }
    ::_exit(0);
  }
  ::close(pair[1]);
  UniqueFd from_child(pair[0]);
  std::vector<UniqueFd> out;
  for (int i = 0; i < n; ++i) {
    char one = 0;
    iovec iov{&one, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (::recvmsg(from_child.get(), &msg, MSG_CMSG_CLOEXEC) != 1) break;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    REQUIRE(c != nullptr);
    REQUIRE(c->cmsg_type == SCM_RIGHTS);
    int fd = -1;
    std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    out.emplace_back(fd);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO("the connecting child's exit status: " << status);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(out.size() == static_cast<std::size_t>(n));
  return out;
}

}  // namespace sandpool::testing
