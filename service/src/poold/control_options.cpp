#include <sandpool/service/control_options.hpp>

#include <grp.h>
#include <pwd.h>

#include <vector>

namespace sandpool::poold {
namespace {

Result<gid_t> group_id(const std::string& name) {
  std::vector<char> buf(16384);
  struct group g {};
  struct group* found = nullptr;
  const int rc = ::getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &found);
  if (rc != 0) return Status::from_errno(rc, "getgrnam_r(" + name + ")");
  if (found == nullptr) return Status::error(Code::kNotFound, "no group named '" + name + "'");
  return g.gr_gid;
}

Result<uid_t> user_id(const std::string& name) {
  std::vector<char> buf(16384);
  struct passwd p {};
  struct passwd* found = nullptr;
  const int rc = ::getpwnam_r(name.c_str(), &p, buf.data(), buf.size(), &found);
  if (rc != 0) return Status::from_errno(rc, "getpwnam_r(" + name + ")");
  if (found == nullptr) return Status::error(Code::kNotFound, "no user named '" + name + "'");
  return p.pw_uid;
}

// What `status` needs while a batch saturates the CPUs: the server thread woken ahead of
// the loop, the workers and the submits (measured in performance.md, session 4).
constexpr int kControlThreadNice = -10;

}  // namespace

Result<ControlServerOptions> control_options(const ServiceConfig& service) {
  ControlServerOptions o;
  o.path = service.socket_path;
  o.mode = service.socket_mode;
  if (!service.socket_group.empty()) {
    auto g = group_id(service.socket_group);
    if (!g) return g.status().with_context("service.socket_group");
    o.group = *g;
  }
  for (const AllowRule& rule : service.allow) {
    AccessGrant grant;
    grant.kind = rule.is_group ? AccessGrant::Kind::kGid : AccessGrant::Kind::kUid;
    grant.rights = rule.rights;
    if (rule.id) {
      grant.id = *rule.id;
    } else if (rule.is_group) {
      auto g = group_id(rule.name);
      if (!g) return g.status().with_context("service.allow");
      grant.id = *g;
    } else {
      auto u = user_id(rule.name);
      if (!u) return u.status().with_context("service.allow");
      grant.id = *u;
    }
    o.access.grants.push_back(grant);
  }
  o.max_connections = service.max_connections;
  o.max_outstanding = service.max_outstanding_requests;
  o.max_output_bytes = service.max_buffered_bytes;
  o.admin_reserved_connections = service.admin_reserved_connections;
  o.max_connections_per_uid = service.connections_per_uid;
  o.max_streams_per_connection = service.streams_per_connection;
  o.max_streams_per_uid = service.streams_per_uid;
  o.idle_timeout = service.idle_timeout;
  // The control plane ahead of the data path (operations.md, "Control responsiveness").
  o.thread_nice = kControlThreadNice;
  return o;
}

}  // namespace sandpool::poold
