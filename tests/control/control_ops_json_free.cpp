// Compiled, never run: the public headers of the control protocol (the operations' types and
// the Client) bring in no JSON library, so a user of them does not inherit one (the mapping
// is the control library's own, control/include/sandpool/control/op_json.hpp; the wire-level calls
// are in the non-public control/src/control/raw_client.hpp). The build fails here if that changes.
#include <sandpool/control/client.hpp>
#include <sandpool/control/control_ops.hpp>

#ifdef NLOHMANN_JSON_VERSION_MAJOR
#error \
    "<sandpool/control/client.hpp> and <sandpool/control/control_ops.hpp> must not include nlohmann/json"
#endif

namespace sandpool::ops {
// One use of each public type, so the headers are compiled in earnest.
[[maybe_unused]] WaitArgs json_free_wait_args{1, std::chrono::milliseconds(5)};
[[maybe_unused]] auto json_free_call = &Client::call<Scale>;
}  // namespace sandpool::ops
