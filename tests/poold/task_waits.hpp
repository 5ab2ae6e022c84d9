// Waiting, in a poold test, for what a task or a pool has reached, as poold itself reports it
// (`task`, `status`, `workers`): the state a test is about, observed before the test acts on
// it, instead of a sleep that hopes it was reached.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include "wire_json.hpp"

#include "poold_process.hpp"

namespace sandpool::testing {

// Polls `done` every 5 ms until it holds or kPatience passes; returns whether it held.
inline bool poll_until(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Waits until poold reports task `id` in `state` ("running", "cancelled", ...).
inline bool wait_task_state(Client& c, std::uint64_t id, const std::string& state) {
  return poll_until([&] {
    auto t = c.task(id);
    return t && t->state == state;
  });
}

// The `status` entry of pool `name`; fails the test when there is none.
inline nlohmann::json status_of(Client& c, const std::string& name) {
  auto s = as_json(c.status());
  REQUIRE(s);
  for (const auto& p : (*s)["pools"]) {
    if (p["name"] == name) return p;
  }
  FAIL("no pool " << name << " in status: " << s->dump());
  return {};
}

// The pids of the workers `workers` lists.
inline std::set<int> worker_pids(const nlohmann::json& workers) {
  std::set<int> out;
  for (const auto& w : workers["workers"]) out.insert(w["pid"].get<int>());
  return out;
}

}  // namespace sandpool::testing
