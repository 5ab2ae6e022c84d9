// An `events` follow stream on a connection of its own, collected in the background, so a
// poold test waits for the lifecycle event it expects instead of sleeping or polling.
#pragma once

#include <catch2/catch.hpp>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include "wire_json.hpp"

#include "poold_process.hpp"

namespace sandpool::testing {

class EventWatcher {
 public:
  // Follows the events of `pool` (all pools when empty). Returns once the stream is open:
  // its backlog always holds the pool's first worker_started, so the first event proves it.
  EventWatcher(const std::string& socket, const std::string& pool) {
    auto c = Client::connect(socket);
    if (!c) FAIL("connect: " << c.status().to_string());
    client_.emplace(std::move(c).value());
    nlohmann::json args{{"follow", true}};
    if (!pool.empty()) args["pool"] = pool;
    auto id = raw_start(
        *client_, "events", std::move(args), {},
        [this](const Reply& e) {
          std::lock_guard<std::mutex> lock(mu_);
          events_.push_back(e.body);
          cv_.notify_all();
        },
        [this](Result<Reply> r) {
          std::lock_guard<std::mutex> lock(mu_);
          ended_ = true;
          end_status_ = r.status();
          cv_.notify_all();
        });
    REQUIRE(id);
    REQUIRE(wait([](const std::vector<nlohmann::json>& es) { return !es.empty(); }));
  }
  ~EventWatcher() { client_.reset(); }  // fails the stream; nothing waits for it

  // Waits (kPatience at most) until `done(events so far)` holds; false if the stream ended
  // or time ran out first.
  bool wait(const std::function<bool(const std::vector<nlohmann::json>&)>& done) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kPatience, [&] { return done(events_) || ended_; }) && done(events_);
  }
  std::vector<nlohmann::json> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  std::optional<Client> client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<nlohmann::json> events_;
  bool ended_ = false;
  Status end_status_;
};

// The events named `name` in `events`.
inline std::vector<nlohmann::json> named(const std::vector<nlohmann::json>& events,
                                         const std::string& name) {
  std::vector<nlohmann::json> out;
  for (const auto& e : events) {
    if (e.value("event", std::string()) == name) out.push_back(e);
  }
  return out;
}

}  // namespace sandpool::testing
