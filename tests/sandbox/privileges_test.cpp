// The manager's half of step 4: resolving sandbox.user against the real user database, and
// vetting plugin file modes.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include <sandpool/base/unique_fd.hpp>
#include <sandpool/sandbox/privileges.hpp>

#include "public_dir.hpp"

using namespace sandpool::sandbox;
using sandpool::Code;
using sandpool::UniqueFd;
using sandpool::testing::PublicDir;

TEST_CASE("a user name resolves to its uid, primary gid and groups") {
  auto root = resolve_run_as("root");
  REQUIRE(root.is_ok());
  CHECK(root->uid == 0);
  CHECK(root->gid == 0);
  CHECK(std::find(root->groups.begin(), root->groups.end(), 0u) != root->groups.end());

  // Debian's nobody: 65534, primary group nogroup (65534).
  auto nobody = resolve_run_as(kDefaultSandboxUser);
  REQUIRE(nobody.is_ok());
  CHECK(nobody->uid == 65534);
  CHECK(nobody->gid == 65534);
}

TEST_CASE("a numeric uid resolves through the database when known, else to itself") {
  auto known = resolve_run_as("65534");
  REQUIRE(known.is_ok());
  CHECK(*known == *resolve_run_as("nobody"));

  auto unknown = resolve_run_as("3999999");
  REQUIRE(unknown.is_ok());
  CHECK(unknown->uid == 3999999);
  CHECK(unknown->gid == 3999999);
  CHECK(unknown->groups.empty());
}

TEST_CASE("an unknown name, an empty name or an invalid uid is refused, naming it") {
  struct Case {
    const char* user;
    Code code;
    const char* needle;
  };
  const Case c = GENERATE(
      Case{"no-such-user-sandpool", Code::kNotFound, "no user named 'no-such-user-sandpool'"},
      Case{"", Code::kInvalidArgument, "empty user name"},
      Case{"4294967295", Code::kInvalidArgument, "4294967295 is not a valid uid"},
      Case{"99999999999", Code::kInvalidArgument, "99999999999 is not a valid uid"});
  auto r = resolve_run_as(c.user);
  REQUIRE_FALSE(r.is_ok());
  INFO(r.status().to_string());
  CHECK(r.status().code() == c.code);
  CHECK(r.status().message().find(c.needle) != std::string::npos);
}

TEST_CASE("a plugin writable by group or others, or in such a directory, is refused") {
  PublicDir dir;
  const std::string plugin = dir.write("libp.so", "ELF", 0644);
  CHECK(check_plugin_permissions(plugin).is_ok());
  CHECK(check_plugin_permissions(dir.write("libro.so", "ELF", 0444)).is_ok());

  REQUIRE(::chmod(plugin.c_str(), 0664) == 0);
  sandpool::Status s = check_plugin_permissions(plugin);
  CHECK(s.code() == Code::kPermissionDenied);
  CHECK(s.message() == "plugin " + plugin +
                           " is group-writable (mode 0664): refused when running as root "
                           "(chmod go-w it)");
  REQUIRE(::chmod(plugin.c_str(), 0602) == 0);
  CHECK(check_plugin_permissions(plugin).message().find("is world-writable (mode 0602)") !=
        std::string::npos);

  REQUIRE(::chmod(plugin.c_str(), 0644) == 0);
  REQUIRE(::chmod(dir.path().c_str(), 0775) == 0);
  s = check_plugin_permissions(plugin);
  CHECK(s.code() == Code::kPermissionDenied);
  CHECK(s.message().find("plugin directory " + dir.path() + " is group-writable") !=
        std::string::npos);
}

TEST_CASE("a plugin that is not there is an error naming it") {
  sandpool::Status s = check_plugin_permissions("/nonexistent/libnothing.so");
  CHECK(s.code() == Code::kSystem);
  CHECK(s.message() == "stat(/nonexistent/libnothing.so): No such file or directory");
}

TEST_CASE("a plugin the sandbox user cannot read is refused, a closed directory above is fine") {
  PublicDir dir;
  const RunAs nobody{65534, 65534, {}};
  // A closed directory above it (a build tree under /root, mode 0700): the worker gets the
  // file as an fd, so nothing above it needs to be searchable.
  const std::string closed = dir.path() + "/home";
  REQUIRE(::mkdir(closed.c_str(), 0700) == 0);
  const std::string inside = PublicDir::copy_to(closed, "/bin/true", 0644);
  CHECK(check_readable_by(inside, nobody, "nobody").is_ok());

  // The file itself unreadable by nobody, whom the mode's "other" bits govern.
  REQUIRE(::chmod(inside.c_str(), 0640) == 0);
  const sandpool::Status s = check_readable_by(inside, nobody, "nobody");
  REQUIRE_FALSE(s);
  CHECK(s.code() == Code::kPermissionDenied);
  CHECK(s.message().find("cannot read " + inside + " (mode 0640") != std::string::npos);
  CHECK(s.message().find("sandbox.user") != std::string::npos);
  // Its owner, or a member of its group, gets through.
  struct stat st {};
  REQUIRE(::stat(inside.c_str(), &st) == 0);
  CHECK(check_readable_by(inside, RunAs{st.st_uid, 65534, {}}, "owner").is_ok());
  CHECK(check_readable_by(inside, RunAs{65534, 65534, {st.st_gid}}, "member").is_ok());
  REQUIRE(::chmod(inside.c_str(), 0600) == 0);
  CHECK_FALSE(check_readable_by(inside, RunAs{65534, 65534, {st.st_gid}}, "member"));
}

TEST_CASE("the permission check on opened fds names the file and directory as the path does") {
  PublicDir dir;
  const std::string plugin = dir.copy("/bin/true", 0644);
  UniqueFd dir_fd(::open(dir.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  UniqueFd file_fd(::open(plugin.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(dir_fd);
  REQUIRE(file_fd);
  CHECK(check_plugin_permissions(file_fd.get(), dir_fd.get(), plugin).is_ok());
  REQUIRE(::chmod(plugin.c_str(), 0664) == 0);
  sandpool::Status s = check_plugin_permissions(file_fd.get(), dir_fd.get(), plugin);
  CHECK(s.message().find("plugin " + plugin + " is group-writable (mode 0664)") !=
        std::string::npos);
  REQUIRE(::chmod(plugin.c_str(), 0644) == 0);
  REQUIRE(::chmod(dir.path().c_str(), 0777) == 0);
  s = check_plugin_permissions(file_fd.get(), dir_fd.get(), plugin);
  CHECK(s.message().find("plugin directory " + dir.path() + " is world-writable") !=
        std::string::npos);
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
}
