// HttpAccess: the token files' checks, which operations each kind of caller may run and
// with which rights, loopback addresses, sessions.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include <sandpool/control/control_ops.hpp>

#include "http/html.hpp"
#include "http/http_access.hpp"
#include "poold_test_support.hpp"

namespace sandpool::testing {
namespace {

using http::Access;

void access_test_token(const std::filesystem::path& p, const std::string& text, mode_t mode) {
  std::ofstream(p) << text;
  REQUIRE(::chmod(p.c_str(), mode) == 0);
}

TEST_CASE("http access: the token files must be the owner's alone and hold a real token") {
  TempDir dir;
  HttpConfig c;
  c.admin_token_file = (dir.path / "admin").string();
  access_test_token(c.admin_token_file, "0123456789abcdef0123\n", 0600);
  auto ok = http::HttpAccess::load(c);
  REQUIRE(ok);
  CHECK(ok->check_token("0123456789abcdef0123") == Access::kAdmin);
  CHECK_FALSE(ok->check_token("0123456789abcdef012"));
  CHECK_FALSE(ok->check_token(""));

  access_test_token(c.admin_token_file, "0123456789abcdef0123\n", 0640);
  auto group_readable = http::HttpAccess::load(c);
  REQUIRE_FALSE(group_readable);
  CHECK(group_readable.status().message().find("mode 0640") != std::string::npos);

  access_test_token(c.admin_token_file, "two words here, long enough\n", 0600);
  CHECK_FALSE(http::HttpAccess::load(c));

  c.admin_token_file = (dir.path / "missing").string();
  CHECK_FALSE(http::HttpAccess::load(c));
}

TEST_CASE("http access: a non-loopback listener needs a token") {
  HttpConfig c;
  c.host = "0.0.0.0";
  CHECK_FALSE(http::HttpAccess::load(c));
  c.host = "127.0.0.2";
  CHECK(http::HttpAccess::load(c));
  CHECK(http::is_loopback("::1"));
  CHECK(http::is_loopback("localhost"));
  CHECK_FALSE(http::is_loopback("::"));
  CHECK_FALSE(http::is_loopback("10.0.0.1"));
}

TEST_CASE("http access: each caller gets the operations and rights of its token") {
  const auto& task = *ops::find_op("task");
  const auto& list = *ops::find_op("dlq_list");
  const auto& submit = *ops::find_op("submit");
  // Anonymous: the socket's read operations, results withheld.
  CHECK(http::grant_for(task, Access::kAnonymous).allowed);
  CHECK(http::grant_for(task, Access::kAnonymous).rights == Rights::kRead);
  CHECK_FALSE(http::grant_for(list, Access::kAnonymous).allowed);
  // Read: every read, with contents.
  CHECK(http::grant_for(list, Access::kRead).allowed);
  CHECK(http::grant_for(task, Access::kRead).rights == Rights::kAdmin);
  CHECK_FALSE(http::grant_for(submit, Access::kRead).allowed);
  for (const ops::OpInfo& op : ops::kOps) {
    INFO(op.name);
    CHECK(http::grant_for(op, Access::kAdmin).allowed);
    // Nothing that changes the service is a read.
    if (http::is_read(op)) CHECK(op.lane != ops::Lane::kRequests);
    if (http::is_read(op)) CHECK(op.lane != ops::Lane::kJobs);
  }
}

TEST_CASE("http access: sessions are found by their id until closed") {
  auto a = http::HttpAccess::with_tokens("", "0123456789abcdef");
  const std::string id = a.open_session(Access::kAdmin);
  auto s = a.session(id);
  REQUIRE(s);
  CHECK(s->access == Access::kAdmin);
  CHECK(s->csrf.size() == 32);
  CHECK_FALSE(a.session("nope"));
  a.close_session(id);
  CHECK_FALSE(a.session(id));
}

TEST_CASE("http access: a moved access keeps its sessions and its login throttle") {
  auto a = http::HttpAccess::with_tokens("", "0123456789abcdef");
  const std::string id = a.open_session(Access::kAdmin);
  for (std::size_t i = 0; i < http::HttpAccess::kLoginFailures; ++i) a.login_failed("10.0.0.7");
  REQUIRE(a.login_throttled("10.0.0.7"));
  http::HttpAccess moved(std::move(a));
  CHECK(moved.session(id));
  CHECK(moved.login_throttled("10.0.0.7"));
  CHECK_FALSE(moved.login_throttled("10.0.0.8"));
}

TEST_CASE("html: escape() leaves no markup and no raw control byte") {
  CHECK(http::escape("<a href='x'>&\"</a>") == "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
  CHECK(http::escape(std::string("a\x01\xff", 3)) == "a\\x01\\xff");
  CHECK(http::preview(std::string(5000, 'x'), 10).find("5000 bytes in all") != std::string::npos);
}

}  // namespace
}  // namespace sandpool::testing
