// redis::Connection against a real redis-server of the test's own (redis_server.hpp).
#include <catch2/catch.hpp>

#include <string>

#include <sandpool/redis/redis_client.hpp>
#include "redis_server.hpp"

using namespace sandpool;
using sandpool::testing::RedisServer;

TEST_CASE("addresses are a unix socket's absolute path or host:port") {
  auto u = redis::Endpoint::parse("unix:/run/redis/redis.sock");
  REQUIRE(u.is_ok());
  CHECK(u->unix_path == "/run/redis/redis.sock");
  CHECK(u->describe() == "unix:/run/redis/redis.sock");
  auto h = redis::Endpoint::parse("10.0.0.5:6380");
  REQUIRE(h.is_ok());
  CHECK(h->host == "10.0.0.5");
  CHECK(h->port == 6380);
  CHECK(redis::Endpoint::parse("redis.internal")->port == 6379);
  CHECK_FALSE(redis::Endpoint::parse("unix:relative.sock").is_ok());
  CHECK_FALSE(redis::Endpoint::parse("host:70000").is_ok());
  CHECK_FALSE(redis::Endpoint::parse(":6379").is_ok());
}

TEST_CASE("commands and replies are binary safe, and an error reply is a value") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint());
  REQUIRE(c.is_ok());
  const std::string value("a\0b\r\nc", 6);
  REQUIRE(c->command({"SET", "k", value})->str == "OK");
  auto got = c->command({"GET", "k"});
  REQUIRE(got.is_ok());
  CHECK(got->type == redis::Reply::Type::kString);
  CHECK(got->str == value);
  CHECK(c->command({"GET", "missing"})->is_nil());
  CHECK(c->command({"INCR", "n"})->integer == 1);
  auto wrong = c->command({"INCR", "k"});
  REQUIRE(wrong.is_ok());
  CHECK(wrong->is_error());
  CHECK(wrong->status().code() == Code::kInternal);
  CHECK_FALSE(c->broken());

  // Streams: an entry's fields come back as an array of arrays.
  auto id = c->command({"XADD", "s", "*", "type", "echo", "payload", value});
  REQUIRE(id.is_ok());
  auto range = c->command({"XRANGE", "s", "-", "+"});
  REQUIRE(range.is_ok());
  REQUIRE(range->elements.size() == 1);
  const redis::Reply& entry = range->elements[0];
  CHECK(entry.elements[0].str == id->str);
  REQUIRE(entry.elements[1].elements.size() == 4);
  CHECK(entry.elements[1].elements[3].str == value);
}

TEST_CASE("pipelined commands answer in order") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint());
  REQUIRE(c.is_ok());
  for (int i = 0; i < 100; ++i) REQUIRE(c->append({"RPUSH", "l", std::to_string(i)}).is_ok());
  for (int i = 0; i < 100; ++i) CHECK(c->read()->integer == i + 1);
  CHECK(c->command({"LINDEX", "l", "99"})->str == "99");
}

TEST_CASE("a password is sent with AUTH, and a wrong one is refused by name") {
  RedisServer::Options o;
  o.password = "s3cret";
  RedisServer server(o);
  auto good = redis::Connection::open(server.endpoint());
  REQUIRE(good.is_ok());
  CHECK(good->command({"PING"})->str == "PONG");
  redis::Endpoint wrong = server.endpoint();
  wrong.password = "nope";
  auto bad = redis::Connection::open(wrong);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == Code::kPermissionDenied);
  CHECK_THAT(bad.status().message(), Catch::Contains("AUTH refused"));
  redis::Endpoint none = server.endpoint();
  none.password.clear();
  auto anonymous = redis::Connection::open(none);
  REQUIRE(anonymous.is_ok());  // the server asks only at the first command
  CHECK(anonymous->command({"GET", "x"})->is_error());
}

TEST_CASE("a database other than 0 is selected") {
  RedisServer server;
  redis::Endpoint e = server.endpoint();
  e.db = 3;
  auto c3 = redis::Connection::open(e);
  REQUIRE(c3.is_ok());
  REQUIRE(c3->command({"SET", "where", "three"}).is_ok());
  auto c0 = redis::Connection::open(server.endpoint());
  CHECK(c0->command({"GET", "where"})->is_nil());
  e.db = 99;
  CHECK_FALSE(redis::Connection::open(e).is_ok());
}

TEST_CASE("a server that goes away breaks the connection, with its address named") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint());
  REQUIRE(c.is_ok());
  server.kill9();
  auto r = c->command({"PING"});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == Code::kUnavailable);
  CHECK_THAT(r.status().message(), Catch::Contains("unix:" + server.socket()));
  CHECK(c->broken());
  CHECK_FALSE(c->command({"PING"}).is_ok());  // broken for good
  auto again = redis::Connection::open(server.endpoint());
  CHECK_FALSE(again.is_ok());
  CHECK(again.status().code() == Code::kUnavailable);
  server.start();
  CHECK(redis::Connection::open(server.endpoint()).is_ok());
}

TEST_CASE("a script runs by its SHA-1, and is loaded again after the server lost it") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint());
  REQUIRE(c.is_ok());
  const redis::Script add{"add", "return redis.call('INCRBY', KEYS[1], ARGV[1])"};
  CHECK(c->eval(add, {"n"}, {"5"})->integer == 5);
  CHECK(c->eval(add, {"n"}, {"2"})->integer == 7);
  REQUIRE(c->command({"SCRIPT", "FLUSH"}).is_ok());
  CHECK(c->eval(add, {"n"}, {"1"})->integer == 8);  // NOSCRIPT, loaded again
  const redis::Script fenced{"fenced", "return redis.error_reply('FENCED not yours')"};
  auto r = c->eval(fenced, {}, {});
  REQUIRE(r.is_ok());
  CHECK(r->is_error());
  CHECK(r->str == "FENCED not yours");
}

TEST_CASE("what the append-only file holds survives a SIGKILL and a clean shutdown") {
  RedisServer::Options o;
  o.append_only = true;
  RedisServer server(o);
  {
    auto c = redis::Connection::open(server.endpoint());
    REQUIRE(c->command({"SET", "a", "1"}).is_ok());
  }
  server.kill9();
  server.start();
  {
    auto c = redis::Connection::open(server.endpoint());
    CHECK(c->command({"GET", "a"})->str == "1");
    REQUIRE(c->command({"SET", "b", "2"}).is_ok());
  }
  server.shutdown();
  server.start();
  auto c = redis::Connection::open(server.endpoint());
  CHECK(c->command({"GET", "b"})->str == "2");
}
