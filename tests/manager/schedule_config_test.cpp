// poold's `schedules:` section (docs/configuration.md, "schedules").
#include <catch2/catch.hpp>

#include <string>

#include <sandpool/config/config.hpp>

namespace {

const std::string kPools = "pools:\n  - {name: echo, plugin: /x/libecho.so}\n";

std::string schedule_errors(const std::string& schedules) {
  auto c = sandpool::parse_config(kPools + schedules, "t.yaml");
  REQUIRE_FALSE(c.is_ok());
  return c.status().message();
}

}  // namespace

TEST_CASE("schedules read every key of an entry") {
  auto c = sandpool::parse_config(kPools +
                                      "schedules:\n"
                                      "  - name: nightly\n"
                                      "    cron: \"30 2 * * mon-fri\"\n"
                                      "    zone: local\n"
                                      "    type: report\n"
                                      "    pool: echo\n"
                                      "    payload: \"{}\"\n"
                                      "    priority: -3\n"
                                      "    timeout: 5s\n"
                                      "    retries: 2\n"
                                      "    key: k\n"
                                      "    tenant: acme\n"
                                      "    start: 2026-01-01T00:00:00Z\n"
                                      "    end: 1893456000\n"
                                      "    catch_up: run_once\n"
                                      "    overlap: queue\n"
                                      "    paused: true\n"
                                      "  - {name: often, every: 1h30m, type: echo}\n"
                                      "  - {name: paris, cron: \"0 9 * * *\", zone: Europe/Paris, "
                                      "type: echo}\n",
                                  "t.yaml");
  REQUIRE(c.is_ok());
  REQUIRE(c->schedules.size() == 3);
  const auto& s = c->schedules[0];
  CHECK(s.name == "nightly");
  CHECK(s.expression == "30 2 * * mon-fri");
  CHECK(s.zone == "local");
  CHECK(s.task.type == "report");
  CHECK(s.task.pool == "echo");
  CHECK(s.payload == "{}");
  CHECK(s.task.options.priority == -3);
  CHECK(s.task.options.timeout == std::chrono::seconds(5));
  CHECK(s.task.options.retries == 2u);
  CHECK(s.task.options.key == "k");
  CHECK(s.task.options.tenant == "acme");
  CHECK(s.start_s == 1767225600);
  CHECK(s.end_s == 1893456000);
  CHECK(s.catch_up == sandpool::CatchUp::kRunOnce);
  CHECK(s.overlap == sandpool::Overlap::kQueue);
  CHECK(s.paused);
  CHECK(c->schedules[1].expression == "@every 1h30m");
  CHECK(c->schedules[1].catch_up == sandpool::CatchUp::kSkip);
  CHECK(c->schedules[1].overlap == sandpool::Overlap::kAllow);
  CHECK(c->schedules[2].zone == "Europe/Paris");  // a tz database name (docs/schedules.md)
}

TEST_CASE("a bad schedule is refused at its key with line and column") {
  auto [yaml, message] = GENERATE(table<std::string, std::string>({
      {"schedules:\n  - {name: a, cron: \"61 * * * *\", type: echo}\n",
       "t.yaml:4:21: schedules[0].cron: schedule a: expression: minute field, position 1: 61 is "
       "out of range 0-59"},
      {"schedules:\n  - {name: a, type: echo}\n",
       "schedules[0].cron: a schedule needs cron or every"},
      {"schedules:\n  - {name: a, cron: \"* * * * *\", every: 1s, type: echo}\n",
       "schedules[0].every: give cron or every, not both"},
      {"schedules:\n  - {name: a, every: 0s, type: echo}\n", "shorter than 1s"},
      {"schedules:\n  - {name: a, every: 1s, type: echo, zone: Europe/Atlantis}\n",
       "t.yaml:4:44: schedules[0].zone: schedule a: zone: unknown time zone \"Europe/Atlantis\": "
       "no such zone under /usr/share/zoneinfo"},
      {"schedules:\n  - {name: a, every: 1s, type: echo, zone: ../../etc/passwd}\n",
       "schedules[0].zone: schedule a: zone: unknown time zone: a time zone name has only"},
      {"schedules:\n  - {name: a, every: 1s, type: echo, zone: /etc/localtime}\n",
       "schedules[0].zone: schedule a: zone: unknown time zone: a time zone name is relative"},
      {"schedules:\n  - {name: a, every: 1s}\n", "schedules[0].type: schedule a: type is required"},
      {"schedules:\n  - {name: a, every: 1s, type: echo, start: yesterday}\n",
       "schedules[0].start: expected Unix seconds or YYYY-MM-DDTHH:MM:SSZ"},
      {"schedules:\n  - {name: a, every: 1s, type: echo, overlap: never}\n",
       "schedules[0].overlap: expected one of allow, skip, queue"},
      {"schedules:\n  - {name: a, every: 1s, type: echo}\n  - {name: a, every: 2s, type: echo}\n",
       "schedules[1].name: schedule name \"a\" is already used by schedules[0]"},
      {"schedules:\n  - {name: a, every: 1s, type: echo, colour: red}\n",
       "schedules[0].colour: unknown key"},
      {"schedules: {name: a}\n", "schedules: expected a list of schedules"},
  }));
  INFO(yaml);
  CHECK_THAT(schedule_errors(yaml), Catch::Contains(message));
}
