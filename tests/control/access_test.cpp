#include <catch2/catch.hpp>

#include <sandpool/control/client.hpp>
#include <sandpool/control/control.hpp>

#include <sandpool/control/wire_errors.hpp>

using sandpool::AccessGrant;
using sandpool::AccessPolicy;
using sandpool::Code;
using sandpool::ControlServer;
using sandpool::PeerCredentials;
using sandpool::Rights;
using sandpool::rights_for;

namespace {
constexpr uid_t kServer = 1000;
AccessGrant uid_grant(std::uint32_t id, Rights r) { return {AccessGrant::Kind::kUid, id, r}; }
AccessGrant gid_grant(std::uint32_t id, Rights r) { return {AccessGrant::Kind::kGid, id, r}; }
}  // namespace

TEST_CASE("root and the server's own uid are admin by default, and only when allowed") {
  AccessPolicy p;
  CHECK(rights_for({1, 0, 0}, p, kServer) == Rights::kAdmin);
  CHECK(rights_for({1, kServer, 5}, p, kServer) == Rights::kAdmin);
  CHECK(rights_for({1, 2000, 5}, p, kServer) == Rights::kNone);
  p.root_is_admin = false;
  p.self_is_admin = false;
  CHECK(rights_for({1, 0, 0}, p, kServer) == Rights::kNone);
  CHECK(rights_for({1, kServer, 5}, p, kServer) == Rights::kNone);
}

TEST_CASE("a uid grant wins over gid grants, among gid grants the highest applies") {
  AccessPolicy p;
  p.grants = {gid_grant(100, Rights::kAdmin), uid_grant(2000, Rights::kRead),
              gid_grant(200, Rights::kRead), gid_grant(200, Rights::kAdmin)};
  CHECK(rights_for({1, 2000, 100}, p, kServer) == Rights::kRead);
  CHECK(rights_for({1, 2001, 100}, p, kServer) == Rights::kAdmin);
  CHECK(rights_for({1, 2001, 200}, p, kServer) == Rights::kAdmin);
  CHECK(rights_for({1, 2001, 300}, p, kServer) == Rights::kNone);
}

TEST_CASE("read rights cover the observing operations, admin everything else") {
  for (const char* op : {"status", "workers", "stats", "events", "task"}) {
    CHECK(ControlServer::required_rights(op) == Rights::kRead);
    CHECK(ControlServer::known_op(op));
  }
  for (const char* op : {"submit", "submit_batch", "cancel", "scale", "strategy", "drain", "resume",
                         "restart", "kill_worker", "dlq_list", "dlq_show", "dlq_replay",
                         "dlq_purge", "dlq_import", "reload", "shutdown"}) {
    CHECK(ControlServer::required_rights(op) == Rights::kAdmin);
    CHECK(ControlServer::known_op(op));
  }
  CHECK_FALSE(ControlServer::known_op(""));
  CHECK_FALSE(ControlServer::known_op("hello"));
  CHECK_FALSE(ControlServer::known_op("STATUS"));
  CHECK(ControlServer::required_rights("no_such_op") == Rights::kAdmin);
}

TEST_CASE("wire error codes map to Status codes and back to the wire code") {
  using sandpool::control::status_from_wire;
  auto [wire, code] = GENERATE(table<const char*, Code>({{"bad_request", Code::kInvalidArgument},
                                                         {"unknown_op", Code::kInvalidArgument},
                                                         {"forbidden", Code::kPermissionDenied},
                                                         {"too_large", Code::kTooLarge},
                                                         {"not_found", Code::kNotFound},
                                                         {"busy", Code::kQueueFull},
                                                         {"queue_full", Code::kQueueFull},
                                                         {"unavailable", Code::kClosed},
                                                         {"cancelled", Code::kCancelled},
                                                         {"unsupported_version", Code::kProtocol},
                                                         {"internal", Code::kInternal},
                                                         {"something_new", Code::kInternal}}));
  const sandpool::Status s = status_from_wire(wire, "why");
  CHECK(s.code() == code);
  CHECK(s.message() == std::string(wire) + ": why");
  CHECK(sandpool::error_code_of(s) == wire);
}

TEST_CASE("a failure to reach the service reads as unavailable") {
  const sandpool::Status s = sandpool::Status::error(Code::kUnavailable, "cannot connect to x");
  CHECK(sandpool::error_code_of(s) == "unavailable");
  CHECK(sandpool::control::wire_code(Code::kInvalidArgument) == "bad_request");
  CHECK(sandpool::control::wire_code(Code::kPermissionDenied) == "forbidden");
  CHECK(sandpool::control::wire_code(Code::kQueueFull) == "queue_full");
}
