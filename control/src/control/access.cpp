// Rights: who may connect (the allow-list) and what each operation needs (the table of
// operations in <sandpool/control/control_ops.hpp>).
#include <algorithm>
#include <optional>
#include <string_view>

#include <sandpool/control/control.hpp>
#include <sandpool/control/control_ops.hpp>

namespace sandpool {

Rights rights_for(const PeerCredentials& peer, const AccessPolicy& policy, uid_t server_uid) {
  if (policy.root_is_admin && peer.uid == 0) return Rights::kAdmin;
  if (policy.self_is_admin && peer.uid == server_uid) return Rights::kAdmin;
  std::optional<Rights> by_uid;
  Rights by_gid = Rights::kNone;
  for (const AccessGrant& g : policy.grants) {
    if (g.kind == AccessGrant::Kind::kUid && g.id == peer.uid) {
      by_uid = std::max(by_uid.value_or(Rights::kNone), g.rights);
    } else if (g.kind == AccessGrant::Kind::kGid && g.id == peer.gid) {
      by_gid = std::max(by_gid, g.rights);
    }
  }
  return by_uid.value_or(by_gid);
}

bool ControlServer::known_op(std::string_view op) { return ops::find_op(op) != nullptr; }

bool ControlServer::is_stream(std::string_view op) {
  const ops::OpInfo* info = ops::find_op(op);
  return info != nullptr && info->stream;
}

Rights ControlServer::required_rights(std::string_view op) {
  const ops::OpInfo* info = ops::find_op(op);
  return info != nullptr ? info->rights : Rights::kAdmin;
}

}  // namespace sandpool
