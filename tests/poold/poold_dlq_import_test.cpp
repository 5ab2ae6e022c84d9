// A real poold whose dead-letter database cannot be written: `status` and /metrics count the
// letter pending and say why; at stop the letter goes whole to a spill file the log names,
// and `poolctl dlq import` through the next poold loads it, once.
#include <httplib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>

#include <sandpool/store/dead_letter_file.hpp>

#include <sandpool/store/sqlite_db.hpp>
#include "command_runner.hpp"
#include "poold_process.hpp"

namespace sandpool::testing {
namespace {

using nlohmann::json;

CommandResult poolctl(const std::string& socket, std::vector<std::string> args) {
  args.insert(args.begin(), {"--socket", socket});
  return run_command(std::string(SANDPOOL_BIN_DIR) + "/poolctl", args, "");
}

// Polls `status` until `done(dead_letter_store)` holds (a generous bound); returns the object.
json store_status_when(Client& c, const std::function<bool(const json&)>& done) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  for (;;) {
    auto s = as_json(c.status());
    REQUIRE(s);
    const json d = (*s)["dead_letter_store"];
    if (done(d)) return d;
    REQUIRE(std::chrono::steady_clock::now() < until);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

TEST_CASE(
    "poold: a letter its locked store cannot take waits, is spilled at stop to the file the "
    "log names, and `dlq import` loads it once") {
  // Without the journal: with it, a submit while the database is locked is refused
  // (`storage: ...`, poold_full_disk_test.cpp), and no letter would come to be spilled.
  PooldFixture f("pools:\n" + pool_yaml("fail", "fail"),
                 "  shutdown_timeout: 200ms\n  journal: off\n");
  const std::string db = (f.dir.path / "state" / "dead_letters.db").string();
  // The lock waits for any write poold has under way (its schema at start): with a busy
  // timeout of 0 the BEGIN failed when it met one.
  auto locker =
      sqlite::SqliteDb::open(db, static_cast<int>(std::chrono::milliseconds(kPatience).count()));
  REQUIRE(locker);
  REQUIRE(locker->exec("BEGIN IMMEDIATE", "test lock").is_ok());

  Client c = f.connect();
  auto submitted = c.submit(task("fail", "payload of a task that fails"));
  REQUIRE(submitted);
  const std::uint64_t id = submitted->id;
  const json pending = store_status_when(
      c, [](const json& d) { return d["pending"] == 1 && d["writes_failing"] == true; });
  CHECK_THAT(pending["last_write_error"].get<std::string>(), Catch::Contains("locked"));
  CHECK(pending["written"] == 0);
  CHECK(pending["spilled"] == 0);

  httplib::Client http("127.0.0.1", metrics_port(*f.poold));
  http.set_read_timeout(30, 0);
  auto scraped = http.Get("/metrics");
  REQUIRE(scraped);
  CHECK(scraped->body.find("\nsandpool_dead_letters_pending 1\n") != std::string::npos);
  CHECK(scraped->body.find("\nsandpool_dead_letter_writes_failing 1\n") != std::string::npos);

  // Stop: the store retries until its close_timeout, then spills and names the file.
  auto stop = poolctl(f.socket, {"shutdown"});
  REQUIRE(stop.exit_code == 0);
  REQUIRE(f.poold->wait_exit());  // and the end of its log, which names the file
  std::smatch m;
  const std::string out = f.poold->output();
  REQUIRE(std::regex_search(
      out, m, std::regex(R"(written to spill file (\S+unwritten-dead-letters-\S+\.jsonl))")));
  const std::string file = m[1];
  REQUIRE(std::filesystem::exists(file));
  CHECK(std::filesystem::path(file).parent_path() == f.dir.path / "state");
  REQUIRE(locker->exec("COMMIT", "test unlock").is_ok());
  *locker = sqlite::SqliteDb();

  f.start();
  auto imported = poolctl(f.socket, {"dlq", "import", file});
  INFO(imported.err);
  REQUIRE(imported.exit_code == 0);
  CHECK(imported.out.find("1 dead letters imported, 0 already present") != std::string::npos);
  Client c2 = f.connect();
  auto list = raw_body(c2, "dlq_list", {{"pool", "fail"}});
  REQUIRE(list);
  REQUIRE((*list)["entries"].size() == 1);
  const json letter = (*list)["entries"][0];
  CHECK(letter["task_id"] == id);
  CHECK(letter["reason"] == "permanent");
  auto shown = raw_call(c2, "dlq_show", {{"id", letter["letter_id"].get<std::uint64_t>()}});
  REQUIRE(shown);
  CHECK(shown->blob == "payload of a task that fails");

  auto again = poolctl(f.socket, {"--json", "dlq", "import", file + ".imported"});
  REQUIRE(again.exit_code == 0);
  CHECK(json::parse(again.out)["imported"] == 0);
  CHECK(json::parse(again.out)["already_present"] == 1);
  auto still = raw_body(c2, "dlq_list", {{"pool", "fail"}});
  REQUIRE(still);
  CHECK((*still)["entries"].size() == 1);
}

TEST_CASE("poold: dlq_import refuses a malformed line by its number and imports nothing") {
  PooldFixture f("pools:\n" + pool_yaml("fail", "fail"));
  Client c = f.connect();
  DeadLetter l;
  l.pool = "fail";
  l.task.id = 7;
  l.task.type = "fail";
  l.task.reason = DeadReason::kPermanent;
  const std::string good = dead_letter_file::to_line(l);
  auto r = raw_body(c, "dlq_import", {{"source", "spill.jsonl"}, {"first_line", 40}},
                    good + "{\"version\": 1}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.status().message(),
             Catch::Contains("bad_request") && Catch::Contains("spill.jsonl line 41: missing"));
  auto list = raw_body(c, "dlq_list", nlohmann::json::object());
  REQUIRE(list);
  CHECK((*list)["entries"].empty());
  auto ok = raw_body(c, "dlq_import", {{"source", "spill.jsonl"}, {"first_line", 1}}, good);
  REQUIRE(ok);
  CHECK((*ok)["imported"] == 1);
}

}  // namespace sandpool::testing
