// Creating the control socket file: refuse a live server, replace a stale socket, apply
// mode and group before anyone can connect.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include <sandpool/base/status.hpp>
#include <sandpool/base/unique_fd.hpp>

namespace sandpool::control {

struct ListeningSocket {
  UniqueFd fd;  // non-blocking, listening
  dev_t dev = 0;
  ino_t ino = 0;  // identifies our socket file, so we unlink only our own
};

// Binds and listens on `path`. If the path exists: a socket nobody answers on is unlinked
// and replaced; a socket a live server answers on, or anything that is not a socket, is an
// error that names the path.
Result<ListeningSocket> listen_unix(const std::string& path, std::uint32_t mode, gid_t group);
// Unlinks `path` iff it is still the socket file `s` created.
void unlink_if_ours(const std::string& path, const ListeningSocket& s);
// A sockaddr_un for `path`, or an error when it does not fit sun_path.
Status check_socket_path(const std::string& path);

}  // namespace sandpool::control
