// The control server's options from the config's service section: socket, mode, group,
// limits, and the allow-list with user and group names resolved to ids (at start and at
// every check, so a name that does not exist is an error, not a silent no-op).
#pragma once

#include <sandpool/base/status.hpp>
#include <sandpool/config/config.hpp>
#include <sandpool/control/control.hpp>

namespace sandpool::poold {

// Errors: kNotFound naming an unknown user or group.
Result<ControlServerOptions> control_options(const ServiceConfig& service);

}  // namespace sandpool::poold
