// Planning the mount namespace's view over a fake file system: symlinks reproduced, nested
// paths bound once, parents first, fresh /proc and /tmp, clear errors.
#include <catch2/catch.hpp>

#include <map>

#include "supervision/mount_plan.hpp"

using namespace sandpool::supervision;
using Kind = PathInfo::Kind;

namespace {

class FakeFs final : public ViewFs {
 public:
  FakeFs& dir(const std::string& p) { return put(p, {Kind::kDirectory, {}}); }
  FakeFs& file(const std::string& p) { return put(p, {Kind::kFile, {}}); }
  FakeFs& device(const std::string& p) { return put(p, {Kind::kCharDevice, {}}); }
  FakeFs& link(const std::string& p, const std::string& to) { return put(p, {Kind::kSymlink, to}); }
  PathInfo inspect(const std::string& path) const override {
    auto it = paths_.find(path);
    return it == paths_.end() ? PathInfo{} : it->second;
  }

 private:
  FakeFs& put(const std::string& p, PathInfo info) {
    paths_[p] = std::move(info);
    return *this;
  }
  std::map<std::string, PathInfo> paths_;
};

// One line per op, so a failing test shows the whole plan.
std::vector<std::string> render(const std::vector<MountOp>& ops) {
  std::vector<std::string> out;
  for (const MountOp& op : ops) {
    switch (op.kind) {
      case MountOp::Kind::kMkdir:
        out.push_back("mkdir " + op.target);
        break;
      case MountOp::Kind::kTouch:
        out.push_back("touch " + op.target);
        break;
      case MountOp::Kind::kBind:
        out.push_back("bind " + op.target + (op.device ? " (device)" : ""));
        break;
      case MountOp::Kind::kSymlink:
        out.push_back("symlink " + op.target + " -> " + op.source);
        break;
      case MountOp::Kind::kTmpfs:
        out.push_back("tmpfs " + op.target + " " + std::to_string(op.size));
        break;
      case MountOp::Kind::kProc:
        out.push_back("proc " + op.target);
        break;
      case MountOp::Kind::kOwnProc:
        out.push_back("own-proc " + op.target);
        break;
    }
  }
  return out;
}

FakeFs debian_like() {
  FakeFs fs;
  fs.dir("/usr").dir("/usr/lib").dir("/usr/lib/x86_64-linux-gnu").link("/lib", "usr/lib");
  fs.dir("/etc").link("/etc/localtime", "/usr/share/zoneinfo/Etc/UTC");
  fs.dir("/usr/share").dir("/usr/share/zoneinfo").dir("/usr/share/zoneinfo/Etc");
  fs.file("/usr/share/zoneinfo/Etc/UTC");
  fs.dir("/dev").device("/dev/null");
  fs.dir("/opt").dir("/opt/sp").dir("/opt/sp/bin").dir("/opt/sp/plugins");
  fs.dir("/tmp");
  return fs;
}

}  // namespace

TEST_CASE("the view reproduces symlinks, binds their targets once, parents first") {
  const FakeFs fs = debian_like();
  MountViewRequest req;
  req.pid_namespace = true;
  req.required = {"/opt/sp/bin", "/opt/sp/plugins"};
  req.optional = {"/lib",           "/usr/lib",  "/usr/lib/x86_64-linux-gnu",
                  "/etc/localtime", "/dev/null", "/lib64"};
  req.tmpfs_size = 1u << 20;
  auto ops = plan_mount_view(req, fs);
  REQUIRE(ops);
  CHECK(render(*ops) == std::vector<std::string>{
                            "mkdir /dev",
                            "touch /dev/null",
                            "bind /dev/null (device)",
                            "mkdir /etc",
                            "symlink /etc/localtime -> /usr/share/zoneinfo/Etc/UTC",
                            "symlink /lib -> usr/lib",
                            "mkdir /opt",
                            "mkdir /opt/sp",
                            "mkdir /opt/sp/bin",
                            "bind /opt/sp/bin",
                            "mkdir /opt/sp/plugins",
                            "bind /opt/sp/plugins",
                            "mkdir /proc",
                            "proc /proc",
                            "mkdir /tmp",
                            "tmpfs /tmp 1048576",
                            "mkdir /usr",
                            "mkdir /usr/lib",
                            "bind /usr/lib",
                            "mkdir /usr/share",
                            "mkdir /usr/share/zoneinfo",
                            "mkdir /usr/share/zoneinfo/Etc",
                            "touch /usr/share/zoneinfo/Etc/UTC",
                            "bind /usr/share/zoneinfo/Etc/UTC",
                        });
}

TEST_CASE("a path under a bound directory is not bound again") {
  const FakeFs fs = debian_like();
  MountViewRequest req;
  req.pid_namespace = true;
  req.required = {"/opt/sp/plugins", "/opt"};
  auto ops = plan_mount_view(req, fs);
  REQUIRE(ops);
  CHECK(render(*ops) ==
        std::vector<std::string>{"mkdir /opt", "bind /opt", "mkdir /proc", "proc /proc"});
}

TEST_CASE("a plugin directory under /tmp is bound inside the fresh tmpfs") {
  FakeFs fs = debian_like();
  fs.dir("/tmp/plugins");
  MountViewRequest req;
  req.pid_namespace = true;
  req.required = {"/tmp/plugins"};
  SECTION("with a tmpfs: mounted first, the directory made inside it") {
    req.tmpfs_size = 4096;
    auto ops = plan_mount_view(req, fs);
    REQUIRE(ops);
    CHECK(render(*ops) == std::vector<std::string>{"mkdir /proc", "proc /proc", "mkdir /tmp",
                                                   "tmpfs /tmp 4096", "mkdir /tmp/plugins",
                                                   "bind /tmp/plugins"});
  }
  SECTION("without: /tmp is a plain directory of the read-only root") {
    auto ops = plan_mount_view(req, fs);
    REQUIRE(ops);
    CHECK(render(*ops) == std::vector<std::string>{"mkdir /proc", "proc /proc", "mkdir /tmp",
                                                   "mkdir /tmp/plugins", "bind /tmp/plugins"});
  }
}

TEST_CASE("a path through a symlinked directory resolves like the kernel does") {
  FakeFs fs = debian_like();
  fs.link("/opt/current", "sp").link("/srv", "/opt/current/plugins");
  MountViewRequest req;
  req.pid_namespace = true;
  req.required = {"/srv"};
  auto ops = plan_mount_view(req, fs);
  REQUIRE(ops);
  CHECK(render(*ops) ==
        std::vector<std::string>{"mkdir /opt", "symlink /opt/current -> sp", "mkdir /opt/sp",
                                 "mkdir /opt/sp/plugins", "bind /opt/sp/plugins", "mkdir /proc",
                                 "proc /proc", "symlink /srv -> /opt/current/plugins"});
}

TEST_CASE("the host's /proc is never bound: a fresh one with a pid namespace, else its own") {
  FakeFs fs = debian_like();
  fs.dir("/proc").dir("/proc/sys");
  MountViewRequest req;
  req.required = {"/proc/sys"};
  SECTION("a pid namespace: a fresh procfs shows the worker's namespace only") {
    req.pid_namespace = true;
    auto ops = plan_mount_view(req, fs);
    REQUIRE(ops);
    CHECK(render(*ops) == std::vector<std::string>{"mkdir /proc", "proc /proc"});
  }
  SECTION("none: a fresh procfs would show the host's processes; the worker gets its own") {
    auto ops = plan_mount_view(req, fs);
    REQUIRE(ops);
    CHECK(render(*ops) == std::vector<std::string>{"mkdir /proc", "own-proc /proc"});
  }
}

TEST_CASE("a view that cannot be planned names the path") {
  FakeFs fs = debian_like();
  fs.link("/loop", "/loop");
  auto [path, expected] = GENERATE(table<std::string, std::string>({
      {"/opt/nowhere", "/opt/nowhere: no such file or directory"},
      {"/loop", "too many levels of symbolic links"},
      {"/", "/: the whole root cannot be in the view"},
      {"opt/sp", "opt/sp: not an absolute path"},
  }));
  MountViewRequest req;
  req.required = {path};
  auto ops = plan_mount_view(req, fs);
  REQUIRE_FALSE(ops);
  CHECK_THAT(ops.status().message(), Catch::Contains(expected));
}

TEST_CASE("a missing optional path is left out") {
  const FakeFs fs = debian_like();
  MountViewRequest req;
  req.pid_namespace = true;
  req.optional = {"/lib64", "/etc/ld.so.cache"};
  auto ops = plan_mount_view(req, fs);
  REQUIRE(ops);
  CHECK(render(*ops) == std::vector<std::string>{"mkdir /proc", "proc /proc"});
}

TEST_CASE("the real file system's default paths plan into a view") {
  MountViewRequest req;
  req.optional = default_view_paths();
  auto ops = plan_mount_view(req, posix_view_fs());
  REQUIRE(ops);
  bool libc_dir = false;
  for (const MountOp& op : *ops) libc_dir = libc_dir || op.target == "/usr/lib";
  CHECK(libc_dir);
}
