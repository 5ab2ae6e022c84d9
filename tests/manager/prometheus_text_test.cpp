// The Prometheus text exposition: exact text for a small snapshot, and a structural check of
// the format (every sample under its family's TYPE, families never split, labels escaped,
// histogram buckets cumulative).
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <sandpool/metrics/metrics.hpp>

using namespace sandpool;

namespace {

constexpr std::int64_t kMs = 1000000;

PoolMetrics small_pool() {
  PoolMetrics m;
  m.pool = "images";
  m.stats.submitted = 7;
  m.stats.completed = 4;
  m.stats.dead_lettered = 2;
  m.stats.cancelled = 1;
  m.stats.retried = 3;
  m.stats.lost = 1;
  m.stats.restarts = 2;
  m.stats.recycled = 1;
  m.stats.heartbeat_kills = 0;
  m.stats.output_dropped = 12;
  m.stats.letters_pending = 4;
  m.stats.queued = 5;
  m.stats.in_flight = 2;
  m.stats.retry_wait = 1;
  m.stats.scheduled = 6;
  m.stats.throttled = 2;
  m.tenants_waiting = {{"acme", 9}, {"tenant \"b\"", 2}};
  m.stats.target_workers = 3;
  m.stats.queue_wait_ms = 250;
  m.stats.autoscale_up = 2;
  m.stats.autoscale_down = 1;
  m.stats.crash_loop = true;
  m.attempts[static_cast<std::size_t>(Outcome::kOk)] = 4;
  m.attempts[static_cast<std::size_t>(Outcome::kError)] = 3;
  m.attempts[static_cast<std::size_t>(Outcome::kLost)] = 2;
  m.dead_lettered[static_cast<std::size_t>(DeadReason::kPermanent)] = 1;
  m.dead_lettered[static_cast<std::size_t>(DeadReason::kRetriesExhausted)] = 1;
  m.workers.idle = 1;
  m.workers.busy = 2;
  m.worker_rss_bytes = 3u << 20;
  m.queue_wait.record(20'000);        // 20 us: in le=0.000025
  m.queue_wait.record(3 * kMs);       // in le=0.005
  m.queue_wait.record(90'000 * kMs);  // 90 s: only +Inf
  return m;
}

ServiceInfo service() { return {"0.1.0", 1764122400123}; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The metric name of a sample line.
std::string sample_name(const std::string& line) {
  return line.substr(0, line.find_first_of("{ "));
}

// Reads one label value starting after its opening quote; returns the unescaped value and
// advances `i` past the closing quote. Fails the test on an escape the format does not know.
std::string read_label_value(const std::string& line, std::size_t& i) {
  std::string v;
  for (; i < line.size() && line[i] != '"'; ++i) {
    if (line[i] != '\\') {
      REQUIRE(line[i] != '\n');
      v += line[i];
      continue;
    }
    REQUIRE(i + 1 < line.size());
    const char e = line[++i];
    REQUIRE((e == '\\' || e == '"' || e == 'n'));
    v += e == 'n' ? '\n' : e;
  }
  REQUIRE(i < line.size());
  ++i;
  return v;
}

std::map<std::string, std::string> labels_of(const std::string& line) {
  std::map<std::string, std::string> labels;
  const std::size_t open = line.find('{');
  if (open == std::string::npos || open > line.find(' ')) return labels;
  std::size_t i = open + 1;
  while (line[i] != '}') {
    const std::size_t eq = line.find("=\"", i);
    REQUIRE(eq != std::string::npos);
    const std::string key = line.substr(i, eq - i);
    i = eq + 2;
    labels[key] = read_label_value(line, i);
    if (line[i] == ',') ++i;
  }
  return labels;
}

// Checks the exposition's structure; returns the number of samples.
std::size_t check_well_formed(const std::string& text) {
  REQUIRE(!text.empty());
  REQUIRE(text.back() == '\n');
  std::map<std::string, std::string> types;  // family -> type
  std::set<std::string> finished;            // families whose samples have ended
  std::string current;
  std::size_t samples = 0;
  std::map<std::string, std::uint64_t> last_bucket;  // per histogram series: cumulative
  for (const std::string& line : lines_of(text)) {
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream in(line.substr(7));
      std::string name, type;
      in >> name >> type;
      CHECK(name.rfind("sandpool_", 0) == 0);
      CHECK((type == "counter" || type == "gauge" || type == "histogram"));
      if (type == "counter") CHECK(name.size() > 6);
      if (type == "counter") CHECK(name.substr(name.size() - 6) == "_total");
      CHECK(types.count(name) == 0);  // one TYPE per family
      if (!current.empty()) finished.insert(current);
      types[name] = type;
      current = name;
      continue;
    }
    ++samples;
    const std::string name = sample_name(line);
    std::string family = name;
    if (!types.count(family)) {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string s(suffix);
        if (name.size() > s.size() && name.substr(name.size() - s.size()) == s) {
          family = name.substr(0, name.size() - s.size());
        }
      }
      CHECK(types[family] == "histogram");
    }
    INFO(line);
    CHECK(family == current);            // under its own TYPE line
    CHECK(finished.count(family) == 0);  // never split
    const auto labels = labels_of(line);
    const std::string value = line.substr(line.rfind(' ') + 1);
    CHECK(!value.empty());
    if (name.size() > 7 && name.substr(name.size() - 7) == "_bucket") {
      REQUIRE(labels.count("le") == 1);
      const std::string series = family + "/" + labels.at("pool");
      const std::uint64_t v = std::stoull(value);
      CHECK(v >= last_bucket[series]);  // cumulative
      last_bucket[series] = v;
    }
    if (name.size() > 6 && name.substr(name.size() - 6) == "_count") {
      // The +Inf bucket (the last one) holds every observation.
      CHECK(std::stoull(value) == last_bucket[family + "/" + labels.at("pool")]);
    }
  }
  return samples;
}

}  // namespace

TEST_CASE("the exposition of a small snapshot is exactly the documented text") {
  const std::string text = render_prometheus({small_pool()}, service());
  const std::size_t histograms = text.find("# HELP sandpool_run_time_seconds");
  REQUIRE(histograms != std::string::npos);
  CHECK(text.substr(0, histograms) ==
        R"(# HELP sandpool_info The running sandpool service; always 1.
# TYPE sandpool_info gauge
sandpool_info{version="0.1.0"} 1
# HELP sandpool_start_time_seconds When the service started, seconds since the Unix epoch.
# TYPE sandpool_start_time_seconds gauge
sandpool_start_time_seconds 1764122400.123
# HELP sandpool_queue_depth Tasks waiting for a worker (the queue and the affinity backlogs).
# TYPE sandpool_queue_depth gauge
sandpool_queue_depth{pool="images"} 5
# HELP sandpool_tasks_in_flight Tasks handed to a worker and not yet ended.
# TYPE sandpool_tasks_in_flight gauge
sandpool_tasks_in_flight{pool="images"} 2
# HELP sandpool_tasks_retry_waiting Tasks waiting out their retry backoff.
# TYPE sandpool_tasks_retry_waiting gauge
sandpool_tasks_retry_waiting{pool="images"} 1
# HELP sandpool_tasks_scheduled Tasks waiting for their not_before (state scheduled; counted in queue.capacity).
# TYPE sandpool_tasks_scheduled gauge
sandpool_tasks_scheduled{pool="images"} 6
# HELP sandpool_tasks_throttled Queued tasks held back by a rate limit or a type's concurrency cap (of the queue depth).
# TYPE sandpool_tasks_throttled gauge
sandpool_tasks_throttled{pool="images"} 2
# HELP sandpool_tenant_tasks_waiting Tasks a tenant has waiting (queued or scheduled), for the 100 tenants with the most per pool.
# TYPE sandpool_tenant_tasks_waiting gauge
sandpool_tenant_tasks_waiting{pool="images",tenant="acme"} 9
sandpool_tenant_tasks_waiting{pool="images",tenant="tenant \"b\""} 2
# HELP sandpool_workers Worker processes, by state.
# TYPE sandpool_workers gauge
sandpool_workers{pool="images",state="starting"} 0
sandpool_workers{pool="images",state="idle"} 1
sandpool_workers{pool="images",state="busy"} 2
sandpool_workers{pool="images",state="draining"} 0
sandpool_workers{pool="images",state="stopping"} 0
# HELP sandpool_workers_target Worker processes the pool is scaled to.
# TYPE sandpool_workers_target gauge
sandpool_workers_target{pool="images"} 3
# HELP sandpool_queue_wait_now_seconds How long the task waiting longest for a worker had waited at the autoscaler's last look; 0 when none did, or the pool does not autoscale.
# TYPE sandpool_queue_wait_now_seconds gauge
sandpool_queue_wait_now_seconds{pool="images"} 0.25
# HELP sandpool_autoscale_steps_total Steps of the autoscaler, by direction (why: the `scaled` events and the log).
# TYPE sandpool_autoscale_steps_total counter
sandpool_autoscale_steps_total{pool="images",direction="up"} 2
sandpool_autoscale_steps_total{pool="images",direction="down"} 1
# HELP sandpool_workers_rss_bytes Resident memory of the pool's worker processes, summed.
# TYPE sandpool_workers_rss_bytes gauge
sandpool_workers_rss_bytes{pool="images"} 3145728
# HELP sandpool_pool_crash_loop 1 while the pool is in crash_loop (worker replacements back off).
# TYPE sandpool_pool_crash_loop gauge
sandpool_pool_crash_loop{pool="images"} 1
# HELP sandpool_pool_failed 1 once the pool has failed (its plugin cannot init); it accepts no tasks.
# TYPE sandpool_pool_failed gauge
sandpool_pool_failed{pool="images"} 0
# HELP sandpool_tasks_submitted_total Tasks accepted.
# TYPE sandpool_tasks_submitted_total counter
sandpool_tasks_submitted_total{pool="images"} 7
# HELP sandpool_tasks_completed_total Tasks that ended completed.
# TYPE sandpool_tasks_completed_total counter
sandpool_tasks_completed_total{pool="images"} 4
# HELP sandpool_tasks_dead_lettered_total Tasks that ended dead-lettered, by reason.
# TYPE sandpool_tasks_dead_lettered_total counter
sandpool_tasks_dead_lettered_total{pool="images",reason="permanent"} 1
sandpool_tasks_dead_lettered_total{pool="images",reason="retries_exhausted"} 1
sandpool_tasks_dead_lettered_total{pool="images",reason="crash_loop"} 0
sandpool_tasks_dead_lettered_total{pool="images",reason="expired"} 0
sandpool_tasks_dead_lettered_total{pool="images",reason="shutdown"} 0
sandpool_tasks_dead_lettered_total{pool="images",reason="pool_removed"} 0
sandpool_tasks_dead_lettered_total{pool="images",reason="rejected"} 0
# HELP sandpool_tasks_cancelled_total Tasks that ended cancelled.
# TYPE sandpool_tasks_cancelled_total counter
sandpool_tasks_cancelled_total{pool="images"} 1
# HELP sandpool_retries_total Retries scheduled: attempts that ended retryable with attempts left (to retry_wait).
# TYPE sandpool_retries_total counter
sandpool_retries_total{pool="images"} 3
# HELP sandpool_attempts_total Attempts that ended, by outcome.
# TYPE sandpool_attempts_total counter
sandpool_attempts_total{pool="images",outcome="ok"} 4
sandpool_attempts_total{pool="images",outcome="error"} 3
sandpool_attempts_total{pool="images",outcome="failed"} 0
sandpool_attempts_total{pool="images",outcome="timed_out"} 0
sandpool_attempts_total{pool="images",outcome="lost"} 2
sandpool_attempts_total{pool="images",outcome="sandbox_violation"} 0
sandpool_attempts_total{pool="images",outcome="resource_limit"} 0
sandpool_attempts_total{pool="images",outcome="protocol_error"} 0
sandpool_attempts_total{pool="images",outcome="cancelled"} 0
# HELP sandpool_workers_restarted_total Workers replaced after exiting unasked (crash, kill, limit, violation).
# TYPE sandpool_workers_restarted_total counter
sandpool_workers_restarted_total{pool="images"} 2
# HELP sandpool_workers_lost_total Of those restarts, workers that died with no named cause (outcome lost).
# TYPE sandpool_workers_lost_total counter
sandpool_workers_lost_total{pool="images"} 1
# HELP sandpool_workers_recycled_total Workers retired on purpose by recycle.max_tasks or recycle.max_rss.
# TYPE sandpool_workers_recycled_total counter
sandpool_workers_recycled_total{pool="images"} 1
# HELP sandpool_heartbeat_kills_total Workers killed for missing their heartbeats.
# TYPE sandpool_heartbeat_kills_total counter
sandpool_heartbeat_kills_total{pool="images"} 0
# HELP sandpool_worker_output_dropped_total Worker output and plugin log lines dropped over the pool's output limit.
# TYPE sandpool_worker_output_dropped_total counter
sandpool_worker_output_dropped_total{pool="images"} 12
# HELP sandpool_tasks_awaiting_dead_letter Tasks decided dead-lettered whose letter is not written yet (not terminal until it is).
# TYPE sandpool_tasks_awaiting_dead_letter gauge
sandpool_tasks_awaiting_dead_letter{pool="images"} 4
# HELP sandpool_dispatch_function_calls_total Calls of the pool's dispatch function (embedded pools with one only).
# TYPE sandpool_dispatch_function_calls_total counter
# HELP sandpool_dispatch_function_errors_total Calls that threw; the built-in strategy chose instead.
# TYPE sandpool_dispatch_function_errors_total counter
# HELP sandpool_dispatch_function_invalid_total Calls that named a worker out of range, starting or full; the built-in strategy chose instead.
# TYPE sandpool_dispatch_function_invalid_total counter
# HELP sandpool_dispatch_function_slow_total Calls longer than dispatch_function_slow.
# TYPE sandpool_dispatch_function_slow_total counter
# HELP sandpool_queue_wait_seconds From submit to a task's first dispatch.
# TYPE sandpool_queue_wait_seconds histogram
sandpool_queue_wait_seconds_bucket{pool="images",le="0.00001"} 0
sandpool_queue_wait_seconds_bucket{pool="images",le="0.000025"} 1
sandpool_queue_wait_seconds_bucket{pool="images",le="0.00005"} 1
sandpool_queue_wait_seconds_bucket{pool="images",le="0.0001"} 1
sandpool_queue_wait_seconds_bucket{pool="images",le="0.00025"} 1
sandpool_queue_wait_seconds_bucket{pool="images",le="0.0005"} 1
sandpool_queue_wait_seconds_bucket{pool="images",le="0.001"} 1
sandpool_queue_wait_seconds_bucket{pool="images",le="0.0025"} 1
sandpool_queue_wait_seconds_bucket{pool="images",le="0.005"} 2
sandpool_queue_wait_seconds_bucket{pool="images",le="0.01"} 2
sandpool_queue_wait_seconds_bucket{pool="images",le="0.025"} 2
sandpool_queue_wait_seconds_bucket{pool="images",le="0.05"} 2
sandpool_queue_wait_seconds_bucket{pool="images",le="0.1"} 2
sandpool_queue_wait_seconds_bucket{pool="images",le="0.25"} 2
sandpool_queue_wait_seconds_bucket{pool="images",le="0.5"} 2
sandpool_queue_wait_seconds_bucket{pool="images",le="1"} 2
sandpool_queue_wait_seconds_bucket{pool="images",le="2.5"} 2
sandpool_queue_wait_seconds_bucket{pool="images",le="5"} 2
sandpool_queue_wait_seconds_bucket{pool="images",le="10"} 2
sandpool_queue_wait_seconds_bucket{pool="images",le="30"} 2
sandpool_queue_wait_seconds_bucket{pool="images",le="60"} 2
sandpool_queue_wait_seconds_bucket{pool="images",le="+Inf"} 3
sandpool_queue_wait_seconds_sum{pool="images"} 90.00302
sandpool_queue_wait_seconds_count{pool="images"} 3
)");
}

TEST_CASE("every sample of the exposition sits under its family's TYPE line") {
  PoolMetrics other = small_pool();
  other.pool = "video";
  const std::string text = render_prometheus({small_pool(), other}, service());
  // 2 service samples; per pool: 11 gauges + 2 tenants + 5 worker states, 9 counters + 2
  // autoscale directions + 7 dead-letter reasons + 9 outcomes, 3 histograms of 22 buckets, a
  // sum and a count.
  CHECK(check_well_formed(text) == 2 + 2 * (11 + 2 + 5 + 9 + 2 + 7 + 9 + 3 * 24));
}

TEST_CASE("a pool with a dispatch function has its calls, troubles and call times exposed") {
  PoolMetrics custom = small_pool();
  custom.pool = "custom";
  custom.dispatch_function.calls = 5;
  custom.dispatch_function.errors = 2;
  custom.dispatch_function.invalid = 1;
  custom.dispatch_function.slow = 1;
  custom.dispatch_function.time.record(3 * kMs);
  const std::string text = render_prometheus({small_pool(), custom}, service());
  // The pool without one has none of its series (only the family lines).
  CHECK(check_well_formed(text) == 2 + 2 * (11 + 2 + 5 + 9 + 2 + 7 + 9 + 3 * 24) + 4 + 24);
  for (const char* line :
       {"sandpool_dispatch_function_calls_total{pool=\"custom\"} 5",
        "sandpool_dispatch_function_errors_total{pool=\"custom\"} 2",
        "sandpool_dispatch_function_invalid_total{pool=\"custom\"} 1",
        "sandpool_dispatch_function_slow_total{pool=\"custom\"} 1",
        "sandpool_dispatch_function_seconds_bucket{pool=\"custom\",le=\"0.005\"} 1",
        "sandpool_dispatch_function_seconds_count{pool=\"custom\"} 1"}) {
    INFO(line);
    CHECK(text.find(std::string(line) + "\n") != std::string::npos);
  }
  CHECK(text.find("sandpool_dispatch_function_calls_total{pool=\"images\"}") == std::string::npos);
}

TEST_CASE("label values are escaped: backslash, double quote and newline") {
  CHECK(escape_label_value(R"(a\b"c)"
                           "\n"
                           "d") == R"(a\\b\"c\nd)");
  PoolMetrics odd;
  odd.pool = "we\"ird\\pool\nname";
  const std::string text = render_prometheus({odd}, {"1.0\"x", 0});
  CHECK(text.find(R"(sandpool_queue_depth{pool="we\"ird\\pool\nname"} 0)") != std::string::npos);
  CHECK(text.find(R"(sandpool_info{version="1.0\"x"} 1)") != std::string::npos);
  check_well_formed(text);
  for (const std::string& line : lines_of(text)) {
    if (line.rfind("sandpool_queue_depth{", 0) == 0) {
      CHECK(labels_of(line).at("pool") == odd.pool);
    }
  }
}

TEST_CASE("an empty pool list still renders the service and every family's TYPE") {
  const std::string text = render_prometheus({}, service());
  CHECK(check_well_formed(text) == 2);
  CHECK(text.find("# TYPE sandpool_end_to_end_seconds histogram\n") != std::string::npos);
}

TEST_CASE("the dead-letter store's series say how many letters wait, since when, and why not") {
  ServiceInfo info = service();
  DeadLetterStoreStats d;
  d.pending = 40;
  d.oldest_pending_ms = 12345;
  d.writes_failing = true;
  d.last_write_error = "system: database or disk is full";  // in `status`, not a label
  d.written = 7;
  d.write_errors = 9;
  d.spilled = 3;
  d.spill_files = 2;
  d.lost = 1;
  d.evicted = 4;
  info.dead_letter_store = d;
  const std::string text = render_prometheus({small_pool()}, info);
  const std::size_t from = text.find("# HELP sandpool_dead_letters_pending");
  const std::size_t to = text.find("# HELP sandpool_queue_depth");
  REQUIRE(from != std::string::npos);
  REQUIRE(to > from);
  CHECK(
      text.substr(from, to - from) ==
      R"(# HELP sandpool_dead_letters_pending Dead letters waiting to be written to the store; their tasks are not terminal yet.
# TYPE sandpool_dead_letters_pending gauge
sandpool_dead_letters_pending 40
# HELP sandpool_dead_letters_oldest_pending_seconds How long the oldest pending dead letter has waited; 0 when none waits.
# TYPE sandpool_dead_letters_oldest_pending_seconds gauge
sandpool_dead_letters_oldest_pending_seconds 12.345
# HELP sandpool_dead_letter_writes_failing 1 while the store's last write failed (the status reply says why); letters wait.
# TYPE sandpool_dead_letter_writes_failing gauge
sandpool_dead_letter_writes_failing 1
# HELP sandpool_dead_letters_written_total Dead letters committed to the store.
# TYPE sandpool_dead_letters_written_total counter
sandpool_dead_letters_written_total 7
# HELP sandpool_dead_letter_write_errors_total Failed write transactions of the dead-letter store (each retried).
# TYPE sandpool_dead_letter_write_errors_total counter
sandpool_dead_letter_write_errors_total 9
# HELP sandpool_dead_letters_spilled_total Dead letters written to a spill file instead (refused by the database, or unwritten at stop); load them with poolctl dlq import.
# TYPE sandpool_dead_letters_spilled_total counter
sandpool_dead_letters_spilled_total 3
# HELP sandpool_dead_letter_spill_files_total Spill files written.
# TYPE sandpool_dead_letter_spill_files_total counter
sandpool_dead_letter_spill_files_total 2
# HELP sandpool_dead_letters_lost_total Dead letters neither committed nor spilled (the spill failed too).
# TYPE sandpool_dead_letters_lost_total counter
sandpool_dead_letters_lost_total 1
# HELP sandpool_dead_letters_evicted_total Dead letters deleted by the store's retention bound (max_count, max_age).
# TYPE sandpool_dead_letters_evicted_total counter
sandpool_dead_letters_evicted_total 4
)");
  CHECK(check_well_formed(text) > 0);
  // Without the store's figures (the library's own use), none of its series.
  CHECK(render_prometheus({small_pool()}, service()).find("sandpool_dead_letter") ==
        std::string::npos);
}

TEST_CASE("the journal's series show the round log's size, compaction and checkpoints") {
  ServiceInfo info = service();
  TaskJournalStats j;
  j.finished_kept = 100;
  j.evicted = 900;
  j.log_rounds = 12;
  j.log_bytes = 480000;
  j.log_live_bytes = 200000;
  j.rounds_deleted = 31;
  j.tasks_carried = 5;
  j.wal_checkpoints = 7;
  j.wal_checkpoint_us = 2500;
  info.journal = j;
  const std::string text = render_prometheus({small_pool()}, info);
  const std::size_t from = text.find("# HELP sandpool_journal_log_rounds");
  const std::size_t to = text.find("# HELP sandpool_queue_depth");
  REQUIRE(from != std::string::npos);
  REQUIRE(to > from);
  CHECK(text.find("sandpool_journal_evicted_total 900\n") != std::string::npos);
  CHECK(
      text.substr(from, to - from) ==
      R"(# HELP sandpool_journal_log_rounds Rounds (rows) in the journal's log; each group commit appends one.
# TYPE sandpool_journal_log_rounds gauge
sandpool_journal_log_rounds 12
# HELP sandpool_journal_log_bytes Bytes of the journal log's rounds.
# TYPE sandpool_journal_log_bytes gauge
sandpool_journal_log_bytes 480000
# HELP sandpool_journal_log_live_bytes Of those, the bytes of records the journal still needs; compaction keeps the log near twice this.
# TYPE sandpool_journal_log_live_bytes gauge
sandpool_journal_log_live_bytes 200000
# HELP sandpool_journal_rounds_deleted_total Log rounds deleted by compaction.
# TYPE sandpool_journal_rounds_deleted_total counter
sandpool_journal_rounds_deleted_total 31
# HELP sandpool_journal_tasks_carried_total Live tasks compaction copied forward out of an old round.
# TYPE sandpool_journal_tasks_carried_total counter
sandpool_journal_tasks_carried_total 5
# HELP sandpool_journal_wal_checkpoints_total WAL checkpoints run by the journal's checkpoint thread.
# TYPE sandpool_journal_wal_checkpoints_total counter
sandpool_journal_wal_checkpoints_total 7
# HELP sandpool_journal_wal_checkpoint_seconds_total Their time.
# TYPE sandpool_journal_wal_checkpoint_seconds_total counter
sandpool_journal_wal_checkpoint_seconds_total 0.0025
)");
}

TEST_CASE("the schedules' series count fired and skipped slots and give the next fire time") {
  ServiceInfo info = service();
  info.schedules = {{"nightly", 3, 1, std::int64_t{1767230000}}, {"paused\"one", 0, 7, {}}};
  const std::string text = render_prometheus({small_pool()}, info);
  CHECK(text.find("# TYPE sandpool_schedule_fired_total counter\n") != std::string::npos);
  CHECK(text.find("\nsandpool_schedule_fired_total{schedule=\"nightly\"} 3\n") !=
        std::string::npos);
  CHECK(text.find("\nsandpool_schedule_skipped_total{schedule=\"paused\\\"one\"} 7\n") !=
        std::string::npos);
  CHECK(text.find("\nsandpool_schedule_next_fire_timestamp_seconds{schedule=\"nightly\"} "
                  "1767230000\n") != std::string::npos);
  // No next slot, no sample.
  CHECK(text.find("sandpool_schedule_next_fire_timestamp_seconds{schedule=\"paused") ==
        std::string::npos);
  // Without schedules, no schedule family at all.
  CHECK(render_prometheus({small_pool()}, service()).find("sandpool_schedule") ==
        std::string::npos);
}
