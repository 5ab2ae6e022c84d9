#include "scripted_service.hpp"

#include <catch2/catch.hpp>

#include <chrono>

namespace sandpool::testing {
namespace {

using nlohmann::json;

std::int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// A worker as poold's `workers` sends it (protocol.md), isolation string and all.
json worker(int pid, const std::string& state) {
  return {{"pid", pid},
          {"pool", "default"},
          {"slot", pid - 4101},
          {"state", state},
          {"tasks_done", 1234},
          {"in_flight", 1},
          {"rss_bytes", 3 << 20},
          {"cpu_ms", 2500},
          {"uptime_ms", 3723000},
          {"restarts", 2},
          {"last_beat_ms", now_ms() - 300},
          {"isolation",
           "ns:user,pid,net,ipc,uts,mnt+rlimits+uid:65534+caps:none+landlock:v7+"
           "seccomp:strict+cgroup:v1"}};
}

// A pool as poold's `stats` sends it (protocol.md): 27 columns once the latency
// objects are spread. `n` counts the stats calls, so the counters move between calls.
json pool_stats(std::uint64_t n) {
  return {{"name", "default"},
          {"state", "running"},
          {"submitted", 1010 * n},
          {"completed", 1000 * n},
          {"dead_lettered", n},
          {"cancelled", 3},
          {"retried", 4},
          {"lost", 0},
          {"restarts", 5},
          {"recycled", 6},
          {"expired", 7},
          {"heartbeat_kills", 8},
          {"output_dropped", 9},
          {"letters_pending", 0},
          {"crash_loop", false},
          {"queued", 0},
          {"in_flight", 1},
          {"retry_wait", 2},
          {"scheduled", 1},
          {"throttled", 0},
          {"workers", 2},
          {"target_workers", 2},
          {"latency_ms", {{"p50", 1.5}, {"p90", 4}, {"p99", 12}}},
          {"queue_wait_ms", {{"p50", 0.25}, {"p99", 3}}}};
}

json task_account() {
  const std::int64_t t = now_ms() - 45000;
  return {{"id", 7},
          {"type", "echo"},
          {"state", "dead_lettered"},
          {"reason", "retries_exhausted"},
          {"error", "timed out"},
          {"attempts", 2},
          {"history", json::array({{{"number", 1},
                                    {"outcome", "crash"},
                                    {"error", "SIGSEGV"},
                                    {"worker_pid", 4101},
                                    {"started_ms", t},
                                    {"ended_ms", t + 200}},
                                   {{"number", 2},
                                    {"outcome", "timeout"},
                                    {"error", "timed out"},
                                    {"worker_pid", 4102},
                                    {"started_ms", t + 300},
                                    {"ended_ms", t + 30300},
                                    {"backtrace", "#0 spin_forever\n#1 sp_plugin_handle\n"}}})}};
}

}  // namespace

ScriptedService::ScriptedService(const std::string& dir) : socket_(dir + "/poold.sock") {
  ControlServerOptions o;
  o.path = socket_;
  auto s = ControlServer::start(o, *this);
  if (!s) FAIL("ControlServer::start: " << s.status().to_string());
  server_ = std::move(s).value();
}

ScriptedService::~ScriptedService() { stop(); }

void ScriptedService::stop() {
  if (server_) server_->stop();
}

std::vector<SeenRequest> ScriptedService::requests(const std::string& op) const {
  std::lock_guard lock(mu_);
  std::vector<SeenRequest> out;
  for (const auto& r : seen_) {
    if (r.op == op) out.push_back(r);
  }
  return out;
}

std::uint64_t ScriptedService::batch_tasks() const {
  std::lock_guard lock(mu_);
  return batch_tasks_;
}

bool ScriptedService::wait_for_follower() {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return !followers_.empty(); });
}

void ScriptedService::publish(const json& event) {
  std::lock_guard lock(mu_);
  for (const auto& f : followers_) f.event(event);
}

void ScriptedService::end_follow_streams() {
  std::lock_guard lock(mu_);
  for (const auto& f : followers_) f.ok();
  followers_.clear();
}

void ScriptedService::handle(Request request, Responder responder) {
  {
    std::lock_guard lock(mu_);
    if (request.op != "submit_batch") seen_.push_back({request.op, request.args, request.blob});
  }
  answer(request, responder);
}

void ScriptedService::answer(const Request& r, const Responder& out) {
  const json& a = r.args;
  const std::string pool = a.value("pool", std::string());
  const bool known_pool = pool.empty() || pool == "default";
  if (r.op == "status") {
    // What poold's `status` sends (ops::StatusReply); poolctl decodes it by that type.
    out.ok({{"pid", 4242},
            {"started_ms", 1700000000000},
            {"stopping", false},
            {"pools", json::array({{{"name", "default"},
                                    {"state", "running"},
                                    {"workers", 2},
                                    {"queued", 5},
                                    {"in_flight", 2}}})}});
  } else if (r.op == "workers") {
    if (!known_pool) return void(out.error("not_found", "no pool named " + pool));
    out.ok({{"workers", json::array({worker(4101, "ready"), worker(4102, "starting")})}});
  } else if (r.op == "stats") {
    std::uint64_t n;
    {
      std::lock_guard lock(mu_);
      n = ++stats_calls_;
    }
    out.ok({{"pools", json::array({pool_stats(n)})}});
  } else if (r.op == "task") {
    if (a.value("id", 0) != 7) return void(out.error("not_found", "no task " + a["id"].dump()));
    out.ok(task_account());
  } else if (r.op == "cancel") {
    out.ok({{"id", a["id"]}, {"cancelled", true}, {"state", "cancelled"}});
  } else if (r.op == "submit") {
    answer_submit(r, out);
  } else if (r.op == "submit_batch") {
    answer_batch(r, out);
  } else if (r.op.rfind("dlq_", 0) == 0) {
    answer_dlq(r, out);
  } else if (r.op == "events") {
    answer_events(r, out);
  } else if (r.op == "reload") {
    out.ok({{"added", json::array({"images"})}, {"removed", json::array()}});
  } else if (!known_pool) {  // scale, strategy, drain, resume, restart, kill_worker
    out.error("not_found", "no pool named " + pool);
  } else if (r.op == "kill_worker" && a.value("pid", 0) != 4101) {
    out.error("not_found", "no worker " + a["pid"].dump() + " in pool default");
  } else {
    // What poold sends for every pool control (ops::PoolStateReply).
    out.ok(r.op == "shutdown" ? json{{"stopping", true}}
                              : json{{"pool", "default"}, {"state", "running"}});
  }
}

// Type "fail" dead-letters, anything else completes with the payload echoed upper-case.
void ScriptedService::answer_submit(const Request& r, const Responder& out) {
  std::uint64_t id;
  {
    std::lock_guard lock(mu_);
    id = ++next_id_;
  }
  if (!r.args.value("wait", false)) return void(out.ok({{"id", id}, {"existing", false}}));
  out.event({{"event", "accepted"}, {"id", id}, {"existing", false}});
  if (r.args.value("progress", false)) {
    out.event({{"event", "progress"}, {"id", id}}, "50%");
    out.event({{"event", "progress"}, {"id", id}}, "100%");
  }
  json account{{"id", id}, {"type", r.args["type"]}, {"attempts", 1}, {"history", json::array()}};
  if (r.args["type"] == "fail") {
    account.update(
        {{"state", "dead_lettered"}, {"reason", "retries_exhausted"}, {"error", "boom"}});
    return void(out.ok(account));
  }
  std::string result = r.blob;
  for (char& c : result) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  account.update({{"state", "completed"}, {"reason", ""}, {"error", ""}});
  out.ok(account, result);
}

// The compact form: payload_lens + defaults. Type "full" refuses every other task of a
// request with queue_full, "stuck" every task with queue_full, "closed" every other task
// with closed (each refusal in `errors`); "tail" takes the first half of a request and
// refuses the rest with queue_full as one `refused_from`, as poold does.
void ScriptedService::answer_batch(const Request& r, const Responder& out) {
  const json& lens = r.args.at("payload_lens");
  std::uint64_t total = 0;
  for (const json& l : lens) total += l.get<std::uint64_t>();
  if (total != r.blob.size()) return void(out.error("bad_request", "payload_lens != blob size"));
  const std::string type = r.args.at("defaults").value("type", std::string());
  const std::string code = type == "closed" ? "closed" : "queue_full";
  const std::string message = type == "closed" ? "pool is closed" : "queue is full";
  json ids = json::array(), errors = json::array();
  std::uint64_t base;
  {
    std::lock_guard lock(mu_);
    base = next_id_;
    next_id_ += lens.size();
    batch_tasks_ += lens.size();
  }
  const std::size_t tried = type == "tail" ? (lens.size() + 1) / 2 : lens.size();
  for (std::size_t i = 0; i < tried; ++i) {
    if (type == "stuck" || ((type == "full" || type == "closed") && i % 2 == 1)) {
      ids.push_back(0);
      errors.push_back({{"index", i}, {"code", code}, {"message", message}});
    } else {
      ids.push_back(base + i + 1);
    }
  }
  json reply{{"ids", std::move(ids)}};
  if (!errors.empty()) reply["errors"] = std::move(errors);
  if (tried < lens.size()) {
    reply["refused_from"] = {{"index", tried}, {"code", code}, {"message", message}};
  }
  out.ok(reply);
}

void ScriptedService::answer_dlq(const Request& r, const Responder& out) {
  // As poold's letters (ops::DeadLetterEntry): the task's fields (`id` is the task id) plus
  // `letter_id`.
  const json letter{{"id", 7},
                    {"letter_id", 1},
                    {"pool", "default"},
                    {"type", "echo"},
                    {"state", "dead_lettered"},
                    {"reason", "retries_exhausted"},
                    {"attempts", 2},
                    {"history", json::array()},
                    {"error", "timed out"},
                    {"dead_lettered_ms", now_ms() - 60000}};
  if (r.op == "dlq_list") {
    json reply{{"entries", json::array({letter})}};
    if (r.args.contains("limit")) reply["next_cursor"] = "1";
    out.ok(reply);
  } else if (r.op == "dlq_show") {
    if (r.args.value("id", 0) != 1) return void(out.error("not_found", "no dead letter"));
    out.ok(letter, "the payload");
  } else if (r.op == "dlq_replay") {
    const json ids = r.args.contains("id") ? json::array({201}) : json::array({201, 202});
    json reply = {{"replayed", ids.size()}, {"ids", ids}};
    if (r.args.contains("filter")) {  // one letter left, as a Redis pool's of a live task
      reply["failed"] = 1;
      reply["first_error"] = "invalid_argument: task 7 is live (queued): its letter was left";
    }
    out.ok(reply);
  } else {
    out.ok({{"purged", r.args.contains("id") ? 1 : 2}});
  }
}

// Without follow: two recent events, then ok. With follow: kept open for publish().
void ScriptedService::answer_events(const Request& r, const Responder& out) {
  if (!r.args.value("follow", false)) {
    out.event(
        {{"event", "worker_started"}, {"pool", "default"}, {"pid", 4101}, {"time_ms", now_ms()}});
    out.event({{"event", "task_ended"},
               {"pool", "default"},
               {"task_id", 7},
               {"state", "completed"},
               {"time_ms", now_ms()}});
    return void(out.ok());
  }
  std::lock_guard lock(mu_);
  followers_.push_back(out);
  cv_.notify_all();
}

}  // namespace sandpool::testing
