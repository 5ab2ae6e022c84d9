// Rights: who may connect (the allow-list) and what each operation needs.
#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

#include <sandpool/control.hpp>

namespace sandpool {
namespace {

struct OpRights {
  std::string_view op;
  Rights rights;
};

constexpr std::array<OpRights, 21> kOps{{
    {"status", Rights::kRead},        {"workers", Rights::kRead},
    {"stats", Rights::kRead},         {"events", Rights::kRead},
    {"task", Rights::kRead},          {"submit", Rights::kAdmin},
    {"submit_batch", Rights::kAdmin}, {"cancel", Rights::kAdmin},
    {"scale", Rights::kAdmin},        {"strategy", Rights::kAdmin},
    {"drain", Rights::kAdmin},        {"resume", Rights::kAdmin},
    {"restart", Rights::kAdmin},      {"kill_worker", Rights::kAdmin},
    {"dlq_list", Rights::kAdmin},     {"dlq_show", Rights::kAdmin},
    {"dlq_replay", Rights::kAdmin},   {"dlq_purge", Rights::kAdmin},
    {"reload", Rights::kAdmin},       {"shutdown", Rights::kAdmin},
    {"dlq_import", Rights::kAdmin},
}};

}  // namespace

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

bool ControlServer::known_op(std::string_view op) {
  return std::any_of(kOps.begin(), kOps.end(), [&](const OpRights& o) { return o.op == op; });
}

bool ControlServer::is_stream(std::string_view op) { return op == "events"; }

Rights ControlServer::required_rights(std::string_view op) {
  for (const OpRights& o : kOps) {
    if (o.op == op) return o.rights;
  }
  return Rights::kAdmin;
}

}  // namespace sandpool
