// dlq --state-dir: poolctl reads and purges a real dead-letter store without the service.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sandpool/dead_letters.hpp>

#include "poolctl_runner.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using nlohmann::json;

namespace {

// Writes letters for tasks 1..n of pool "images" (task 2 shut down, the rest exhausted).
void write_letters(const std::string& dir, std::uint64_t n) {
  DeadLetterStoreOptions o;
  o.state_dir = dir;
  auto store = DeadLetterStore::open(o);
  REQUIRE(store);
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  for (std::uint64_t i = 1; i <= n; ++i) {
    DeadLetter l;
    l.pool = "images";
    l.payload = "payload " + std::to_string(i);
    l.task.id = i;
    l.task.type = "resize";
    l.task.state = TaskState::kDeadLettered;
    l.task.reason = i == 2 ? DeadReason::kShutdown : DeadReason::kRetriesExhausted;
    l.task.error = "boom";
    l.task.history.push_back({1, Outcome::kTimedOut, "timed out", 4242, 1000, 2000, "#0 f\n"});
    l.dead_lettered_ms = now_ms - 60000 + 1000 * static_cast<std::int64_t>(i);  // kept 30 days
    REQUIRE((*store)->enqueue(std::move(l)).is_ok());
  }
  REQUIRE((*store)->close().is_ok());
}

}  // namespace

TEST_CASE("dlq --state-dir lists, shows and purges the store without the service") {
  TempDir dir;
  write_letters(dir.path(), 3);
  const std::string absent = dir.path() + "/no.sock";  // the service is not needed
  auto list = poolctl(absent, {"dlq", "--state-dir", dir.path(), "list"});
  REQUIRE(list.exit_code == 0);
  CHECK(list.out.find("retries_exhausted") != std::string::npos);
  CHECK(list.out.find("shutdown") != std::string::npos);

  auto page = poolctl(absent, {"--json", "dlq", "list", "--state-dir", dir.path(), "--limit", "2"});
  REQUIRE(page.exit_code == 0);
  const json first = json::parse(page.out);
  REQUIRE(first["entries"].size() == 2);
  auto next = poolctl(absent, {"--json", "dlq", "list", "--state-dir", dir.path(), "--cursor",
                               first["next_cursor"].get<std::string>()});
  REQUIRE(json::parse(next.out)["entries"].size() == 1);
  CHECK(json::parse(next.out)["entries"][0]["task_id"] == 3);

  auto show = poolctl(absent, {"--json", "dlq", "show", "2", "--state-dir", dir.path()});
  REQUIRE(show.exit_code == 0);
  const json letter = json::parse(show.out);
  CHECK(letter["payload"] == "payload 2");
  CHECK(letter["reason"] == "shutdown");
  CHECK(letter["history"][0]["outcome"] == "timed_out");
  CHECK(poolctl(absent, {"dlq", "show", "9", "--state-dir", dir.path()}).exit_code == 1);

  auto purge = poolctl(absent, {"dlq", "purge", "--reason", "shutdown", "--state-dir", dir.path()});
  CHECK(purge.exit_code == 0);
  CHECK(purge.out.find("1 dead letters purged") != std::string::npos);
  auto all = poolctl(absent, {"--json", "dlq", "purge", "--all", "--state-dir", dir.path()});
  CHECK(json::parse(all.out)["purged"] == 2);
}

TEST_CASE("dlq --state-dir refuses replay and a directory without a store") {
  TempDir dir;
  CHECK(poolctl("/x.sock", {"dlq", "replay", "--all", "--state-dir", dir.path()}).exit_code == 2);
  auto missing = poolctl("/x.sock", {"dlq", "list", "--state-dir", dir.path()});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("no dead-letter store") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/dead_letters.db"));
}
