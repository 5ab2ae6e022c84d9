// Helpers shared by the Redis tests: waiting for a state Redis or a node reaches (Redis has no
// event for it, so it is polled), and a task's end as a node writes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <sandpool/base/status.hpp>

#include <sandpool/redis/task_consumer.hpp>
#include <sandpool/redis/task_producer.hpp>
#include <sandpool/redis/task_upkeep.hpp>
#include "redis_server.hpp"

namespace sandpool::testing {

// A pool's three sides over one set of keys, as a test drives them all (poold holds a
// producer; a node's feeder a consumer and an upkeep).
struct PoolSides {
  PoolSides(std::string prefix, std::string pool, const redis::PoolLimits& limits = {})
      : keys(std::move(prefix), std::move(pool)),
        producer(keys),
        consumer(keys, limits),
        upkeep(keys, limits) {}
  redis::PoolKeys keys;
  redis::TaskProducer producer;
  redis::TaskConsumer consumer;
  redis::TaskUpkeep upkeep;
};

// One pool ("sp:", "echo", keeping `keep` finished tasks) on a redis-server of the test's own,
// with its group made and one connection: what the scripts' tests drive.
struct ScriptPool {
  RedisServer server;
  redis::Connection c = redis::Connection::open(server.endpoint()).value();
  PoolSides stream;
  explicit ScriptPool(std::uint64_t keep = 1000)
      : stream("sp:", "echo", redis::PoolLimits{.finished = keep}) {
    REQUIRE(stream.upkeep.ensure_group(c).is_ok());
  }
  // `n` echo tasks submitted one by one, payloads "0", "1", ...: their ids.
  std::vector<std::uint64_t> submit(int n) {
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < n; ++i) {
      redis::StreamTask t;
      t.type = "echo";
      t.payload = std::to_string(i);
      ids.push_back(stream.producer.submit(c, t, 1000).value().id);
    }
    return ids;
  }
  std::int64_t integer(std::initializer_list<std::string_view> command) {
    auto r = c.command(command);
    REQUIRE(r.is_ok());
    return r->integer;
  }
};

// Task `id` as `task ID` reads it from Redis (TaskProducer::task: its attempts and its count
// of ends, from whichever layout wrote them); an empty one when Redis does not know it.
inline redis::StoredTask stored_task(redis::Connection& c, std::uint64_t id,
                                     const std::string& prefix = "sandpool:") {
  auto t = redis::TaskProducer(redis::PoolKeys(prefix, "any")).task(c, id);
  return t ? std::move(t).value() : redis::StoredTask{};
}

// Polls `done` every 10 ms until it holds (true) or `patience` passes (false).
template <class Done>
bool eventually(Done done, std::chrono::milliseconds patience = std::chrono::seconds(60)) {
  const auto until = std::chrono::steady_clock::now() + patience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// One task's end, written as a node writes its ends (TaskConsumer::end_all, here of this one
// end and no attempts): its answer, or the call's error.
inline Result<redis::Fenced> end_one(const PoolSides& stream, redis::Connection& c,
                                     const redis::StreamEntry& e, const std::string& consumer,
                                     const std::string& state, const std::string& result,
                                     const std::string& error, const std::string& reason,
                                     std::int64_t now_ms) {
  redis::TaskConsumer::EndWrite end;
  end.entry = &e;
  end.state = state;
  end.result = result;
  end.error = error;
  end.reason = reason;
  end.now_ms = now_ms;
  auto answers = stream.consumer.end_all(c, consumer, {end});
  if (!answers) return answers.status();
  if (answers->size() != 1) return Status::error(Code::kInternal, "end_all: not one answer");
  return answers->front();
}

}  // namespace sandpool::testing
