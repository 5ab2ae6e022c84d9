// Helpers shared by the Redis tests: waiting for a state Redis or a node reaches (Redis has no
// event for it, so it is polled), and a task's end as a node writes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include <sandpool/base/status.hpp>

#include <sandpool/redis/task_stream.hpp>

namespace sandpool::testing {

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

// One task's end, written as a node writes its ends (TaskStream::end_all, here of this one
// end and no attempts): its answer, or the call's error.
inline Result<redis::Fenced> end_one(const redis::TaskStream& stream, redis::Connection& c,
                                     const redis::StreamEntry& e, const std::string& consumer,
                                     const std::string& state, const std::string& result,
                                     const std::string& error, const std::string& reason,
                                     std::int64_t now_ms) {
  redis::TaskStream::EndWrite end;
  end.entry = &e;
  end.state = state;
  end.result = result;
  end.error = error;
  end.reason = reason;
  end.now_ms = now_ms;
  auto answers = stream.end_all(c, consumer, {end});
  if (!answers) return answers.status();
  if (answers->size() != 1) return Status::error(Code::kInternal, "end_all: not one answer");
  return answers->front();
}

}  // namespace sandpool::testing
