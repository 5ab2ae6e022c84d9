// The Lua scripts of a Redis pool (redis/src/redis/lua/, task_stream_scripts.hpp) against a
// real redis-server: each one compiles, and names the consumer group only through GROUP,
// TaskStream::kGroup.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <sandpool/redis/task_stream.hpp>
#include "redis/task_stream_scripts.hpp"
#include "redis_server.hpp"

using namespace sandpool;
using sandpool::testing::RedisServer;

namespace {

const std::vector<const redis::Script*>& every_script() {
  namespace lua = redis::lua;
  static const std::vector<const redis::Script*> all = {
      &lua::Submit::kScript,    &lua::ClaimSlot::kScript,    &lua::Attempt::kScript,
      &lua::Finish::kScript,    &lua::TrimFinished::kScript, &lua::Beat::kScript,
      &lua::Discard::kScript,   &lua::Release::kScript,      &lua::Refused::kScript,
      &lua::Cancel::kScript,    &lua::Touch::kScript,        &lua::Retry::kScript,
      &lua::MoveDue::kScript,   &lua::Read::kScript,         &lua::Take::kScript,
      &lua::ClaimIdle::kScript, &lua::TakeTokens::kScript,   &lua::Throttle::kScript,
      &lua::Letters::kScript};
  return all;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("every script of a redis pool compiles on a real redis-server") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint());
  REQUIRE(c.is_ok());
  for (const redis::Script* s : every_script()) {
    INFO(s->name);
    auto sha = c->load(*s);
    CHECK(sha.is_ok());
    if (sha) CHECK(sha->size() == 40);
  }
}

TEST_CASE("the scripts name the consumer group once, from TaskStream's constant") {
  const std::string group = std::string("'") + redis::TaskStream::kGroup + "'";
  for (const redis::Script* s : every_script()) {
    INFO(s->name);
    CHECK(s->source.rfind("local GROUP = " + group + "\n", 0) == 0);
    CHECK(count_of(s->source, group) == 1);
    CHECK(count_of(s->source, "\"" + std::string(redis::TaskStream::kGroup) + "\"") == 0);
  }
}
