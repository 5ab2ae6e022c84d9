// Linux namespaces for workers: the vocabulary the pool's config, the clone3 spawner and
// `poolctl workers` share. Plain values, no system calls; the spawner that creates the
// namespaces lives in the manager (namespace_spawner.cpp) and docs/security.md
// ("Namespaces") says what each one stops.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandpool::sandbox {

enum class Namespace : std::uint8_t { kUser, kPid, kNet, kIpc, kUts, kMount };
inline constexpr Namespace kAllNamespaces[] = {Namespace::kUser, Namespace::kPid,
                                               Namespace::kNet,  Namespace::kIpc,
                                               Namespace::kUts,  Namespace::kMount};

// The config's name: "user", "pid", "net", "ipc", "uts", "mount".
std::string_view namespace_name(Namespace ns);
// The short name /proc/<pid>/ns uses and `poolctl workers` shows ("mnt" for mount).
std::string_view namespace_short_name(Namespace ns);
// Accepts the config name or the short name.
std::optional<Namespace> parse_namespace(std::string_view name);
// The CLONE_NEW* flag that creates it.
std::uint64_t clone_flag(Namespace ns);

// A set of namespaces, a small value type.
class NamespaceSet {
 public:
  constexpr NamespaceSet() = default;
  static NamespaceSet all();

  bool has(Namespace ns) const { return (bits_ & bit(ns)) != 0; }
  bool empty() const { return bits_ == 0; }
  void add(Namespace ns) { bits_ |= bit(ns); }
  void remove(Namespace ns) { bits_ &= static_cast<std::uint8_t>(~bit(ns)); }
  NamespaceSet operator&(NamespaceSet o) const { return NamespaceSet(bits_ & o.bits_); }
  NamespaceSet operator-(NamespaceSet o) const { return NamespaceSet(bits_ & ~o.bits_); }
  bool operator==(const NamespaceSet&) const = default;

  // The CLONE_NEW* flags of every member, or-ed.
  std::uint64_t clone_flags() const;
  // The members' short names in kAllNamespaces order, joined by `sep` ("user,pid,net").
  std::string describe(std::string_view sep = ",") const;

 private:
  explicit constexpr NamespaceSet(unsigned bits) : bits_(static_cast<std::uint8_t>(bits)) {}
  static constexpr std::uint8_t bit(Namespace ns) {
    return static_cast<std::uint8_t>(1u << static_cast<unsigned>(ns));
  }
  std::uint8_t bits_ = 0;
};

// What a pool asks of namespaces (YAML `sandbox.namespaces`, `require`, `readonly_paths`,
// `tmpfs_size`). Empty `wanted`: no namespaces, the plain vfork spawner.
struct NamespacePolicy {
  NamespaceSet wanted;
  // A member the kernel refuses makes every spawn fail; other missing members are logged as
  // a warning and the worker starts without them.
  NamespaceSet required;
  // Shown read-only in the mount namespace's view besides the plugin's and the worker host's
  // directories, the system library directories and what glibc needs of /etc.
  std::vector<std::string> readonly_paths;
  // Size of the empty tmpfs mounted on /tmp in the view; 0: no writable /tmp.
  std::uint64_t tmpfs_size = 0;
  // The unprivileged user the worker runs as (`sandbox.user`, resolved by the manager); when
  // poold is root these ids are mapped 1:1 into the user namespace so that the worker host's
  // privilege drop (lock-down step 4) can switch to them inside it. Unset: the worker
  // becomes the overflow user (nobody, 65534) before exec.
  std::optional<std::uint32_t> run_as_uid;
  std::optional<std::uint32_t> run_as_gid;
  bool operator==(const NamespacePolicy&) const = default;
};

// One line of /proc/<pid>/uid_map or gid_map: `count` ids from `inside` map to `outside`.
struct IdMapping {
  std::uint32_t inside = 0;
  std::uint32_t outside = 0;
  std::uint32_t count = 1;
  bool operator==(const IdMapping&) const = default;
};

// The user namespace's maps and what the clone3 child does with its ids before exec.
struct UserNamespaceMaps {
  std::vector<IdMapping> uids;
  std::vector<IdMapping> gids;
  // "deny" makes an unprivileged gid_map write legal (and setgroups impossible inside);
  // "allow" when a privileged manager writes the maps.
  bool deny_setgroups = false;
  // The child switches to these ids (namespace view) before exec: 0 (the namespace's root)
  // so that step 4 can drop to the worker's user, or that user directly when it cannot be
  // mapped beside the root. nullopt: keep the ids it has (a non-root manager's own ids).
  std::optional<std::uint32_t> become_uid;
  std::optional<std::uint32_t> become_gid;
};

// The overflow id (nobody): what the namespace's root is outside when the manager is root.
inline constexpr std::uint32_t kOverflowId = 65534;

// Builds the maps. A root manager (`manager_uid` 0): the namespace's root maps to the
// overflow id and the worker's user (run_as ids) maps 1:1 beside it, the child becoming the
// namespace's root before exec; when that user *is* the overflow id (or none is configured),
// only it is mapped and the child becomes it before exec. A non-root manager
// maps its own uid/gid 1:1 (the only ids it may map) and denies setgroups.
UserNamespaceMaps plan_user_namespace(const NamespacePolicy& policy, std::uint32_t manager_uid,
                                      std::uint32_t manager_gid);
// The text written to uid_map/gid_map: one "inside outside count" line per mapping.
std::string id_map_text(const std::vector<IdMapping>& maps);

}  // namespace sandpool::sandbox
