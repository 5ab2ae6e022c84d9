// Compiled, never run: the public header of the operations' types brings in no JSON library,
// so a user of them does not inherit one (the mapping is the control library's own,
// manager/control/op_json.hpp). The build fails here if that changes.
#include <sandpool/control_ops.hpp>

#ifdef NLOHMANN_JSON_VERSION_MAJOR
#error "<sandpool/control_ops.hpp> must not include nlohmann/json"
#endif

namespace sandpool::ops {
// One use of each request type, so the header is compiled in earnest.
[[maybe_unused]] WaitArgs json_free_wait_args{1, std::chrono::milliseconds(5)};
}  // namespace sandpool::ops
