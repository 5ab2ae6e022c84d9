// What `poold --check` asks of this host beyond the file itself: that the names and paths the
// config gives exist here. A file that parses can still fail at start (a sandbox user, an
// allow-list entry or a socket group this host does not have, a plugin that is not there);
// --check finds those without starting anything.
#pragma once

#include <string>
#include <vector>

#include <sandpool/config/config.hpp>

namespace sandpool::poold {

// Every problem found, one message each, naming the pool or the key; empty: none. Checks:
// the control socket's group and allow-list names (control_options), each pool's plugin (a
// regular file this process can open for reading, its path made absolute as poold does),
// and, when running as root (the only case poold drops to it), each pool's sandbox.user.
// Reads the user and group databases and the file system; writes nothing.
std::vector<std::string> check_host(Config config);

}  // namespace sandpool::poold
