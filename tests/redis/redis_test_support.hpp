// Helpers shared by the Redis tests: waiting for a state Redis or a node reaches (Redis has no
// event for it, so it is polled), and a task's end as a node writes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>

#include <sandpool/base/status.hpp>

#include <sandpool/redis/task_consumer.hpp>
#include <sandpool/redis/task_producer.hpp>
#include <sandpool/redis/task_upkeep.hpp>

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
