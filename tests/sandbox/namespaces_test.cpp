// The namespace vocabulary: names, clone flags, sets, the user namespace's id maps and the
// isolation text `poolctl workers` shows.
#include <catch2/catch.hpp>

#include <sched.h>

#include <sandpool/sandbox/namespaces.hpp>
#include <sandpool/sandbox/policy.hpp>

using namespace sandpool::sandbox;

TEST_CASE("every namespace round-trips through its config name and its short name") {
  const Namespace ns = GENERATE(from_range(std::begin(kAllNamespaces), std::end(kAllNamespaces)));
  CHECK(parse_namespace(namespace_name(ns)) == ns);
  CHECK(parse_namespace(namespace_short_name(ns)) == ns);
}

TEST_CASE("namespace names and clone flags match the kernel's") {
  auto [ns, name, flag] = GENERATE(table<Namespace, std::string_view, std::uint64_t>({
      {Namespace::kUser, "user", CLONE_NEWUSER},
      {Namespace::kPid, "pid", CLONE_NEWPID},
      {Namespace::kNet, "net", CLONE_NEWNET},
      {Namespace::kIpc, "ipc", CLONE_NEWIPC},
      {Namespace::kUts, "uts", CLONE_NEWUTS},
      {Namespace::kMount, "mount", CLONE_NEWNS},
  }));
  CHECK(namespace_name(ns) == name);
  CHECK(clone_flag(ns) == flag);
}

TEST_CASE("an unknown namespace name is refused") {
  CHECK_FALSE(parse_namespace("cgroup"));
  CHECK_FALSE(parse_namespace(""));
  CHECK_FALSE(parse_namespace("Net"));
}

TEST_CASE("a namespace set ors its flags and describes its members in a fixed order") {
  NamespaceSet s;
  CHECK(s.empty());
  CHECK(s.describe().empty());
  s.add(Namespace::kMount);
  s.add(Namespace::kNet);
  s.add(Namespace::kUser);
  CHECK(s.describe() == "user,net,mnt");
  CHECK(s.clone_flags() == (CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS));
  NamespaceSet net;
  net.add(Namespace::kNet);
  CHECK((s & net) == net);
  CHECK((s - net).describe() == "user,mnt");
  s.remove(Namespace::kUser);
  CHECK(s.describe(" ") == "net mnt");
  CHECK(NamespaceSet::all().describe() == "user,pid,net,ipc,uts,mnt");
}

TEST_CASE("a non-root manager maps only its own ids and denies setgroups") {
  NamespacePolicy p;
  p.run_as_uid = 4321;  // cannot be honoured without privilege: ignored
  const UserNamespaceMaps m = plan_user_namespace(p, 1000, 1001);
  CHECK(m.uids == std::vector<IdMapping>{{1000, 1000, 1}});
  CHECK(m.gids == std::vector<IdMapping>{{1001, 1001, 1}});
  CHECK(m.deny_setgroups);
  CHECK_FALSE(m.become_uid);
  CHECK_FALSE(m.become_gid);
}

TEST_CASE("a root manager maps the namespace's root to nobody and the worker's user 1:1") {
  NamespacePolicy p;
  p.run_as_uid = 4321;
  p.run_as_gid = 4322;
  const UserNamespaceMaps m = plan_user_namespace(p, 0, 0);
  CHECK(m.uids == std::vector<IdMapping>{{0, kOverflowId, 1}, {4321, 4321, 1}});
  CHECK(m.gids == std::vector<IdMapping>{{0, kOverflowId, 1}, {4322, 4322, 1}});
  CHECK_FALSE(m.deny_setgroups);
  CHECK(m.become_uid == 0u);  // step 4 drops from the namespace's root to 4321
  CHECK(m.become_gid == 0u);
  CHECK(id_map_text(m.uids) == "0 65534 1\n4321 4321 1\n");
}

TEST_CASE("a root manager without a worker user makes the worker nobody before exec") {
  const UserNamespaceMaps m = plan_user_namespace(NamespacePolicy{}, 0, 0);
  CHECK(m.uids == std::vector<IdMapping>{{kOverflowId, kOverflowId, 1}});
  CHECK(m.gids == std::vector<IdMapping>{{kOverflowId, kOverflowId, 1}});
  CHECK(m.become_uid == kOverflowId);
  CHECK(m.become_gid == kOverflowId);
}

TEST_CASE("a worker group that is the overflow group is mapped alone and joined before exec") {
  NamespacePolicy p;
  p.run_as_uid = 4321;
  p.run_as_gid = kOverflowId;
  const UserNamespaceMaps m = plan_user_namespace(p, 0, 0);
  CHECK(m.uids == std::vector<IdMapping>{{0, kOverflowId, 1}, {4321, 4321, 1}});
  CHECK(m.gids == std::vector<IdMapping>{{kOverflowId, kOverflowId, 1}});
  CHECK(m.become_uid == 0u);
  CHECK(m.become_gid == kOverflowId);
}

TEST_CASE("the isolation text lists the namespaces in effect before rlimits and seccomp") {
  SandboxPolicy p;
  CHECK(describe_isolation(p, NamespaceSet{}) == "rlimits+seccomp:strict");
  p.profile = SeccompProfile::kRelaxed;
  CHECK(describe_isolation(p, NamespaceSet::all()) ==
        "ns:user,pid,net,ipc,uts,mnt+rlimits+seccomp:relaxed");
}
