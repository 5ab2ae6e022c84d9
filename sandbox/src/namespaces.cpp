#include <sandpool/sandbox/namespaces.hpp>

#include <sched.h>

namespace sandpool::sandbox {

std::string_view namespace_name(Namespace ns) {
  switch (ns) {
    case Namespace::kUser:
      return "user";
    case Namespace::kPid:
      return "pid";
    case Namespace::kNet:
      return "net";
    case Namespace::kIpc:
      return "ipc";
    case Namespace::kUts:
      return "uts";
    case Namespace::kMount:
      return "mount";
  }
  return "unknown";
}

std::string_view namespace_short_name(Namespace ns) {
  return ns == Namespace::kMount ? "mnt" : namespace_name(ns);
}

std::optional<Namespace> parse_namespace(std::string_view name) {
  for (Namespace ns : kAllNamespaces) {
    if (namespace_name(ns) == name || namespace_short_name(ns) == name) return ns;
  }
  return std::nullopt;
}

std::uint64_t clone_flag(Namespace ns) {
  switch (ns) {
    case Namespace::kUser:
      return CLONE_NEWUSER;
    case Namespace::kPid:
      return CLONE_NEWPID;
    case Namespace::kNet:
      return CLONE_NEWNET;
    case Namespace::kIpc:
      return CLONE_NEWIPC;
    case Namespace::kUts:
      return CLONE_NEWUTS;
    case Namespace::kMount:
      return CLONE_NEWNS;
  }
  return 0;
}

NamespaceSet NamespaceSet::all() {
  NamespaceSet s;
  for (Namespace ns : kAllNamespaces) s.add(ns);
  return s;
}

std::uint64_t NamespaceSet::clone_flags() const {
  std::uint64_t flags = 0;
  for (Namespace ns : kAllNamespaces) {
    if (has(ns)) flags |= clone_flag(ns);
  }
  return flags;
}

std::string NamespaceSet::describe(std::string_view sep) const {
  std::string out;
  for (Namespace ns : kAllNamespaces) {
    if (!has(ns)) continue;
    if (!out.empty()) out += sep;
    out += namespace_short_name(ns);
  }
  return out;
}

UserNamespaceMaps plan_user_namespace(const NamespacePolicy& policy, std::uint32_t manager_uid,
                                      std::uint32_t manager_gid) {
  UserNamespaceMaps m;
  if (manager_uid != 0) {
    // Without CAP_SETUID/CAP_SETGID outside, a process may map only its own ids, and the
    // gid map only once setgroups is denied (user_namespaces(7)).
    m.uids = {{manager_uid, manager_uid, 1}};
    m.gids = {{manager_gid, manager_gid, 1}};
    m.deny_setgroups = true;
    return m;
  }
  const std::uint32_t uid = policy.run_as_uid.value_or(kOverflowId);
  const std::uint32_t gid = policy.run_as_gid.value_or(kOverflowId);
  if (uid == kOverflowId) {
    // The worker's user is the overflow user itself: it cannot be mapped beside a root that
    // is the overflow user too, so the child becomes it before exec (and has no
    // capabilities left after exec: step 4 has nothing to drop).
    m.uids = {{uid, uid, 1}};
    m.gids = {{gid, gid, 1}};
    m.become_uid = uid;
    m.become_gid = gid;
    return m;
  }
  // The namespace's root is nobody outside: capabilities inside the namespace, none over
  // the host's files. Step 4 drops from it to the worker's user, mapped 1:1.
  m.uids = {{0, kOverflowId, 1}};
  if (uid != 0) m.uids.push_back({uid, uid, 1});
  m.become_uid = 0;
  if (gid == kOverflowId) {
    m.gids = {{gid, gid, 1}};
    m.become_gid = gid;
  } else {
    m.gids = {{0, kOverflowId, 1}};
    if (gid != 0) m.gids.push_back({gid, gid, 1});
    m.become_gid = 0;
  }
  return m;
}

std::string id_map_text(const std::vector<IdMapping>& maps) {
  std::string out;
  for (const IdMapping& m : maps) {
    out += std::to_string(m.inside) + " " + std::to_string(m.outside) + " " +
           std::to_string(m.count) + "\n";
  }
  return out;
}

}  // namespace sandpool::sandbox
