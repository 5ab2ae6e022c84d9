// The operations' table and their JSON mapping (<sandpool/control/control_ops.hpp>,
// control/op_json.hpp): what the server decodes is what the client encodes, and a malformed
// argument is refused naming the field.
#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>
#include <sandpool/control/control.hpp>
#include <sandpool/control/control_ops.hpp>

#include <sandpool/control/op_json.hpp>

using namespace sandpool;
using nlohmann::json;

TEST_CASE("every operation is named once, and the server knows exactly the table's") {
  std::set<std::string_view> names;
  for (const ops::OpInfo& op : ops::kOps) {
    CHECK(names.insert(op.name).second);
    CHECK(ControlServer::known_op(op.name));
    CHECK(ControlServer::required_rights(op.name) == op.rights);
    CHECK(ControlServer::is_stream(op.name) == op.stream);
  }
  CHECK(ops::find_op("wait") != nullptr);
  CHECK(ops::find_op("wait")->rights == Rights::kRead);
  CHECK(ops::find_op("no_such_op") == nullptr);
}

TEST_CASE("the argument reader names the field and what it expected") {
  auto message = [](const json& args) {
    ops::ScaleArgs a;
    const Status st = ops::decode(args, &a);
    return st.is_ok() ? std::string("ok") : st.to_string();
  };
  CHECK(message({{"pool", "p"}, {"workers", 3}}) == "ok");
  CHECK(message({{"pool", "p"}, {"workers", "three"}}) ==
        "invalid_argument: field \"workers\": expected an integer from 0 to 4294967295");
  CHECK(message({{"pool", "p"}, {"workers", 4294967296}}) ==
        "invalid_argument: field \"workers\": expected an integer from 0 to 4294967295");
  CHECK(message({{"pool", "p"}, {"workers", -1}}) ==
        "invalid_argument: field \"workers\": expected an integer from 0 to 4294967295");
  CHECK(message({{"workers", 3}}) ==
        "invalid_argument: field \"pool\": missing, expected a string");
  CHECK(message({{"pool", ""}, {"workers", 3}}) ==
        "invalid_argument: field \"pool\": expected a non-empty string");
  // The first error wins.
  CHECK(message({{"pool", 7}, {"workers", "x"}}) ==
        "invalid_argument: field \"pool\": expected a string");
  CHECK(message(json::array()) == "invalid_argument: arguments: expected an object");
}

TEST_CASE("an optional argument keeps its default when absent and is checked when present") {
  ops::KillWorkerArgs k;
  REQUIRE(ops::decode({{"pool", "p"}, {"pid", 12}}, &k).is_ok());
  CHECK(k.signal == 9);
  CHECK(ops::decode({{"pool", "p"}, {"pid", 12}, {"signal", "TERM"}}, &k).to_string() ==
        "invalid_argument: field \"signal\": expected an integer from -2147483648 to 2147483647");
  CHECK(ops::decode({{"pool", "p"}, {"pid", 2147483648LL}}, &k).to_string() ==
        "invalid_argument: field \"pid\": expected an integer from -2147483648 to 2147483647");

  ops::WaitArgs w;
  REQUIRE(ops::decode({{"id", 5}}, &w).is_ok());
  CHECK(w.id == 5);
  CHECK_FALSE(w.timeout);
  REQUIRE(ops::decode({{"id", 5}, {"timeout_ms", 250}}, &w).is_ok());
  REQUIRE(w.timeout);
  CHECK(w.timeout->count() == 250);
  CHECK(ops::decode({{"id", 5}, {"timeout_ms", 2.5}}, &w).to_string() ==
        "invalid_argument: field \"timeout_ms\": expected a duration in ms (an unsigned integer, "
        "at most a year: 31622400000)");
}

TEST_CASE("what the client encodes, the server decodes to the same arguments") {
  ops::WaitArgs w{7, std::chrono::milliseconds(30)};
  CHECK(ops::encode(w) == json{{"id", 7}, {"timeout_ms", 30}});
  CHECK(ops::encode(ops::WaitArgs{7, std::nullopt}) == json{{"id", 7}});
  ops::WaitArgs back;
  REQUIRE(ops::decode(ops::encode(w), &back).is_ok());
  CHECK(back.id == 7);
  CHECK(back.timeout == w.timeout);

  ops::KillWorkerArgs k{"p", 123, 15};
  ops::KillWorkerArgs k2;
  REQUIRE(ops::decode(ops::encode(k), &k2).is_ok());
  CHECK(k2.pool == "p");
  CHECK(k2.pid == 123);
  CHECK(k2.signal == 15);

  ops::RestartArgs r{"p", true};
  ops::RestartArgs r2;
  REQUIRE(ops::decode(ops::encode(r), &r2).is_ok());
  CHECK(r2.rolling);
}

TEST_CASE("submit's arguments carry every option the wire offers and read back the same") {
  ops::SubmitArgs a;
  a.type = "echo";
  a.pool = "p";
  a.options.priority = -3;
  a.options.timeout = std::chrono::milliseconds(1500);
  a.options.retries = 0;  // set, and zero: sent
  a.options.key = "user-1";
  a.options.idempotency_key = "order-7";
  REQUIRE(a.options.set_not_before_ms(1790000000123));
  a.options.tenant = "acme";
  a.wait = true;
  a.progress = true;
  a.request_token = "tok";
  const json j = ops::encode(a);
  CHECK(j == json{{"type", "echo"},
                  {"pool", "p"},
                  {"priority", -3},
                  {"timeout_ms", 1500},
                  {"retries", 0},
                  {"key", "user-1"},
                  {"idempotency_key", "order-7"},
                  {"not_before_ms", 1790000000123},
                  {"tenant", "acme"},
                  {"wait", true},
                  {"progress", true},
                  {"request_token", "tok"}});
  std::set<std::string> names;
  for (std::string_view n : ops::submit_arg_names()) names.emplace(n);
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  keys.insert("delay_ms");  // at most one of delay and not_before: not both in one request
  CHECK(keys == names);
  ops::SubmitArgs back;
  REQUIRE(ops::decode(j, &back).is_ok());
  CHECK(back.options == a.options);
  CHECK(ops::encode(back) == j);
  // Only what is set travels; type and priority always.
  CHECK(ops::encode(ops::SubmitArgs{}) == json{{"type", ""}, {"priority", 0}});
}

TEST_CASE("a not_before_ms beyond the clock's range is refused naming it, not overflowed") {
  ops::SubmitArgs a;
  const Status st = ops::decode(json{{"type", "echo"}, {"not_before_ms", INT64_MAX}}, &a);
  CHECK(st.code() == Code::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains("not_before_ms"));
  CHECK_FALSE(a.options.not_before);
  REQUIRE(ops::decode(json{{"type", "echo"}, {"not_before_ms", -5}}, &a).is_ok());
  CHECK(a.options.not_before_ms() == -5);
}

TEST_CASE("the dead-letter store's counters travel under the names their table gives") {
  ops::StatusReply r;
  std::uint64_t n = 1;
  for (const auto& c : kDeadLetterStoreCounters) r.dead_letter_store.*c.member = n++;
  const json j = ops::encode(r)["dead_letter_store"];
  for (const auto& c : kDeadLetterStoreCounters) {
    INFO(c.help);
    CHECK(j.contains(std::string(c.status_name)) == !c.status_name.empty());
  }
  CHECK(j["spill_files"] == r.dead_letter_store.spill_files);
  ops::StatusReply back;
  REQUIRE(ops::decode(ops::encode(r), &back).is_ok());
  CHECK(back.dead_letter_store.written == r.dead_letter_store.written);
  CHECK(back.dead_letter_store.lost == r.dead_letter_store.lost);
  CHECK(back.dead_letter_store.evicted == 0);  // metrics only
}

TEST_CASE("a task account travels with its optional fields only when they apply") {
  ops::TaskAccount a;
  a.id = 9;
  a.type = "echo";
  a.state = "completed";
  a.attempts = 1;
  a.history.push_back({1, "ok", "", 4242, 1000, 1005, ""});
  const json j = ops::encode(a);
  CHECK(j == json{{"id", 9},
                  {"type", "echo"},
                  {"state", "completed"},
                  {"error", ""},
                  {"attempts", 1},
                  {"history",
                   {{{"number", 1},
                     {"outcome", "ok"},
                     {"error", ""},
                     {"worker_pid", 4242},
                     {"started_ms", 1000},
                     {"ended_ms", 1005}}}}});
  a.state = "dead_lettered";
  a.reason = "permanent";
  a.dead_letter_pending = true;
  a.result_withheld = true;
  a.history[0].backtrace = "#0 f";
  ops::TaskAccount back;
  REQUIRE(ops::decode(ops::encode(a), &back).is_ok());
  CHECK(back.reason == std::optional<std::string>("permanent"));
  CHECK(back.dead_letter_pending);
  CHECK(back.result_withheld);
  CHECK_FALSE(back.result_dropped);
  REQUIRE(back.history.size() == 1);
  CHECK(back.history[0].backtrace == "#0 f");
  CHECK(back.history[0].worker_pid == 4242);
}

TEST_CASE("a status reply travels with its pools and the dead-letter store's figures") {
  ops::StatusReply r;
  r.pid = 42;
  r.started_ms = 1700000000000;
  r.pools.push_back({"p", "running", "round-robin", {"echo", "sleep"}, 2, 3, 5, 1});
  r.dead_letter_store.recent_spill_files = {"/var/spill/1.jsonl"};
  r.dead_letter_store.oldest_pending_ms = 7;
  r.idempotency_kept_bytes = 9;
  const json j = ops::encode(r);
  CHECK(j["pools"][0]["task_types"] == json({"echo", "sleep"}));
  CHECK(j["pools"][0]["target_workers"] == 3);
  CHECK(j["dead_letter_store"]["recent_spill_files"][0] == "/var/spill/1.jsonl");
  CHECK(j["stopping"] == false);
  ops::StatusReply back;
  REQUIRE(ops::decode(j, &back).is_ok());
  CHECK(back.pid == 42);
  CHECK(back.started_ms == 1700000000000);
  REQUIRE(back.pools.size() == 1);
  CHECK(back.pools[0].task_types == std::vector<std::string>{"echo", "sleep"});
  CHECK(back.pools[0].queued == 5);
  CHECK(back.dead_letter_store.oldest_pending_ms == 7);
  CHECK(back.idempotency_kept_bytes == 9);
  CHECK(ops::encode(back) == j);
}

TEST_CASE("a worker that has not beaten yet travels with last_beat_ms null") {
  ops::WorkersReply r;
  r.workers.push_back({});
  r.workers[0].pid = 7;
  r.workers.push_back(r.workers[0]);
  r.workers[1].last_beat_ms = 1234;
  const json j = ops::encode(r);
  CHECK(j["workers"][0]["last_beat_ms"].is_null());
  CHECK(j["workers"][1]["last_beat_ms"] == 1234);
  ops::WorkersReply back;
  REQUIRE(ops::decode(j, &back).is_ok());
  CHECK_FALSE(back.workers[0].last_beat_ms.has_value());
  CHECK(back.workers[1].last_beat_ms == 1234);
  json bad = j;
  bad["workers"][1]["pid"] = "seven";
  CHECK(ops::decode(bad, &back).to_string() ==
        "invalid_argument: workers[1]: field \"pid\": expected an integer from -2147483648 to "
        "2147483647");
}

TEST_CASE("stats' quantiles are null when nothing was measured, and queue_wait has no p90") {
  ops::StatsReply r;
  r.pools.push_back({});
  r.pools[0].name = "p";
  r.pools[0].latency_ms = {1.5, 2.0, 8.0};
  const json j = ops::encode(r);
  CHECK(j["pools"][0]["latency_ms"] == json({{"p50", 1.5}, {"p90", 2.0}, {"p99", 8.0}}));
  CHECK(j["pools"][0]["queue_wait_ms"] == json({{"p50", nullptr}, {"p99", nullptr}}));
  ops::StatsReply back;
  REQUIRE(ops::decode(j, &back).is_ok());
  CHECK(back.pools[0].latency_ms.p99 == 8.0);
  CHECK_FALSE(back.pools[0].queue_wait_ms.p50.has_value());
  CHECK(ops::encode(back) == j);
}

TEST_CASE("a reload reply lists each kind of change, and shutdown's timeout is checked") {
  ops::ReloadReply r;
  r.added = {"new"};
  r.reconfigured.push_back({"p", true});
  r.scaled.push_back({"p", 4});
  r.failed.push_back({"bad", "no plugin"});
  r.service_section_needs_restart = true;
  const json j = ops::encode(r);
  CHECK(j["reconfigured"] == json::array({{{"pool", "p"}, {"rolling_restart", true}}}));
  CHECK(j["scaled"] == json::array({{{"pool", "p"}, {"workers", 4}}}));
  CHECK(j["removed"] == json::array());
  ops::ReloadReply back;
  REQUIRE(ops::decode(j, &back).is_ok());
  CHECK(ops::encode(back) == j);

  ops::ShutdownArgs a;
  REQUIRE(ops::decode(json::object(), &a).is_ok());
  CHECK_FALSE(a.timeout);
  CHECK(ops::decode({{"timeout_ms", -1}}, &a).to_string() ==
        "invalid_argument: field \"timeout_ms\": expected a duration in ms (an unsigned integer, "
        "at most a year: 31622400000)");
  // A year is the most: a deadline of now + the duration never overflows.
  CHECK(ops::decode({{"timeout_ms", 31622400000LL}}, &a).is_ok());
  CHECK_FALSE(ops::decode({{"timeout_ms", 31622400001LL}}, &a).is_ok());
  CHECK_FALSE(ops::decode({{"timeout_ms", std::uint64_t{1} << 62}}, &a).is_ok());
}

TEST_CASE("dlq_import's arguments default to source `request` from line 1, and line 0 is refused") {
  ops::DlqImportArgs a;
  REQUIRE(ops::decode(json::object(), &a).is_ok());
  CHECK(a.source == "request");
  CHECK(a.first_line == 1);
  CHECK(ops::decode({{"first_line", 0}}, &a).to_string() ==
        "invalid_argument: field \"first_line\": expected a line number from 1");
  CHECK(ops::decode({{"source", 3}}, &a).to_string() ==
        "invalid_argument: field \"source\": expected a string");
  ops::DlqImportArgs back;
  REQUIRE(ops::decode(ops::encode(ops::DlqImportArgs{"spill-1.jsonl", 40}), &back).is_ok());
  CHECK(back.source == "spill-1.jsonl");
  CHECK(back.first_line == 40);
}

TEST_CASE("a dead-letter filter's member of the wrong type is refused naming it") {
  ops::DlqListArgs list;
  CHECK(ops::decode(json{{"task_id", "7"}}, &list).to_string() ==
        "invalid_argument: field \"task_id\": expected an unsigned integer");
  ops::DlqSelector sel;
  CHECK(ops::decode(json{{"filter", {{"pool", 3}}}}, &sel).to_string() ==
        "invalid_argument: filter: field \"pool\": expected a string");
  ops::DlqSelector age;
  CHECK(!ops::decode(json{{"older_than_ms", -1}}, &age));
}

TEST_CASE("dead-letter arguments and replies read back as they were written") {
  ops::DlqListArgs a;
  a.filter.pool = "p";
  a.filter.reason = "permanent";
  a.filter.since_ms = 5;
  a.limit = 7;
  a.cursor = "1:2";
  ops::DlqListArgs back;
  REQUIRE(ops::decode(ops::encode(a), &back));
  CHECK(back.filter.pool == "p");
  CHECK(back.filter.reason == "permanent");
  CHECK(back.filter.since_ms == 5);
  CHECK(!back.filter.task_id);
  CHECK(back.limit == 7);
  CHECK(back.cursor == "1:2");

  ops::DlqReplayReply r{{4, 9}, 1, "refused"};
  const json wire = ops::encode(r);
  CHECK(wire == json{{"replayed", 2}, {"ids", {4, 9}}, {"failed", 1}, {"first_error", "refused"}});
  ops::DlqReplayReply r2;
  REQUIRE(ops::decode(wire, &r2));
  CHECK(r2.ids == std::vector<std::uint64_t>{4, 9});
  CHECK(r2.first_error == "refused");

  ops::DlqShowReply shown;
  shown.letter.task.id = 3;
  shown.letter.task.type = "t";
  shown.letter.task.state = "dead_lettered";
  shown.letter.letter_id = 8;
  shown.letter.pool = "p";
  shown.options.retries = 2;
  const json sj = ops::encode(shown);
  CHECK(sj["task_id"] == 3);
  CHECK(sj["options"] == json{{"priority", 0}, {"key", ""}, {"retries", 2}});
  ops::DlqShowReply shown2;
  REQUIRE(ops::decode(sj, &shown2));
  CHECK(shown2.letter.letter_id == 8);
  CHECK(shown2.options.retries == 2u);
  CHECK(shown2.options.tenant.empty());
  shown.options.tenant = "acme";
  CHECK(ops::encode(shown)["options"]["tenant"] == "acme");
  REQUIRE(ops::decode(ops::encode(shown), &shown2));
  CHECK(shown2.options.tenant == "acme");
}

TEST_CASE("tasks filters by tenant and lists a task's tenant and due time, stats its tenants") {
  ops::TaskListArgs a;
  CHECK_FALSE(ops::encode(a).contains("tenant"));  // absent: any tenant
  a.tenant = "";                                   // the default tenant's
  CHECK(ops::encode(a)["tenant"] == "");
  ops::TaskListArgs a2;
  REQUIRE(ops::decode(ops::encode(a), &a2));
  CHECK(a2.tenant == std::optional<std::string>(""));

  ops::TaskSummary t;
  t.id = 5;
  t.state = "scheduled";
  CHECK_FALSE(ops::encode(t).contains("tenant"));
  CHECK_FALSE(ops::encode(t).contains("not_before_ms"));
  t.tenant = "acme";
  t.not_before_ms = 1790000000000;
  ops::TaskSummary t2;
  REQUIRE(ops::decode(ops::encode(t), &t2));
  CHECK(t2.tenant == "acme");
  CHECK(t2.not_before_ms == 1790000000000);

  ops::StatsReply s;
  s.pools.push_back({});
  s.pools[0].name = "p";
  s.pools[0].tenants = {{"acme", 9}, {"", 2}};
  const json j = ops::encode(s);
  CHECK(j["pools"][0]["tenants"] ==
        json::array({{{"tenant", "acme"}, {"waiting", 9}}, {{"tenant", ""}, {"waiting", 2}}}));
  ops::StatsReply s2;
  REQUIRE(ops::decode(j, &s2));
  REQUIRE(s2.pools[0].tenants.size() == 2);
  CHECK(s2.pools[0].tenants[1].tenant.empty());
  CHECK(s2.pools[0].tenants[1].waiting == 2);
}
