// The JSON mapping of the read operations' types: status, workers, stats, events' arguments
// (op_json.hpp).
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include <sandpool/control/op_json.hpp>

namespace sandpool::ops {
namespace {

using nlohmann::json;

json quantile(const std::optional<double>& q) { return q ? json(*q) : json(nullptr); }

Status decode_quantiles(const json& j, std::string_view name, Quantiles* out) {
  const auto it = j.find(name);
  if (it == j.end()) return Status::ok();
  return ArgReader(*it)
      .optional("p50", &out->p50)
      .optional("p90", &out->p90)
      .optional("p99", &out->p99)
      .status()
      .with_context(name);
}

// The figures of `table` that name a status_name, from `stats` into `j` (a flag as a bool).
template <class Stats, std::size_t N>
void encode_figures(const StatDef<Stats> (&table)[N], const std::type_identity_t<Stats>& stats,
                    json* j) {
  for (const StatDef<Stats>& c : table) {
    if (c.status_name.empty()) continue;
    if (c.flag != nullptr) {
      (*j)[std::string(c.status_name)] = stats.*c.flag;
    } else {
      (*j)[std::string(c.status_name)] = stats.*c.member;
    }
  }
}

// The same figures back from a reply into `out`; an absent one keeps its value.
template <class Stats, std::size_t N>
void decode_figures(const StatDef<Stats> (&table)[N], ArgReader* r,
                    std::type_identity_t<Stats>* out) {
  for (const StatDef<Stats>& c : table) {
    if (c.status_name.empty()) continue;
    if (c.flag != nullptr) {
      r->optional(c.status_name, &(out->*c.flag));
    } else {
      r->optional(c.status_name, &(out->*c.member));
    }
  }
}

}  // namespace

json encode(const NoArgs&) { return json::object(); }

Status decode(const json& j, NoArgs*) {
  if (!j.is_object()) return Status::invalid("arguments: expected an object");
  return Status::ok();
}

json encode(const EventsArgs& a) {
  json j{{"follow", a.follow}};
  if (!a.pool.empty()) j["pool"] = a.pool;
  return j;
}

Status decode(const json& j, EventsArgs* out) {
  return ArgReader(j).optional("pool", &out->pool).optional("follow", &out->follow).status();
}

json encode(const EmptyReply&) { return json::object(); }

Status decode(const json& j, EmptyReply*) {
  if (!j.is_object()) return Status::invalid("expected an object");
  return Status::ok();
}

json encode(const VersionReply& r) { return {{"version", r.version}, {"protocol", r.protocol}}; }

Status decode(const json& j, VersionReply* out) {
  return ArgReader(j)
      .required("version", &out->version)
      .required("protocol", &out->protocol)
      .status();
}

json encode(const PoolEventRecord& e) {
  json j{{"event", e.event}, {"pool", e.pool}, {"time_ms", e.time_ms}};
  if (e.pid) j["pid"] = *e.pid;
  if (e.task_id) j["task_id"] = *e.task_id;
  if (e.attempt) j["attempt"] = *e.attempt;
  if (e.attempts) j["attempts"] = *e.attempts;
  if (e.workers) j["workers"] = *e.workers;
  if (e.outcome) j["outcome"] = *e.outcome;
  if (e.state) j["state"] = *e.state;
  if (e.reason) j["reason"] = *e.reason;
  if (e.detail) j["detail"] = *e.detail;
  if (e.dropped) j["dropped"] = *e.dropped;
  return j;
}

Status decode(const json& j, PoolEventRecord* out) {
  return ArgReader(j)
      .required("event", &out->event)
      .optional("pool", &out->pool)
      .optional("time_ms", &out->time_ms)
      .optional("pid", &out->pid)
      .optional("task_id", &out->task_id)
      .optional("attempt", &out->attempt)
      .optional("attempts", &out->attempts)
      .optional("workers", &out->workers)
      .optional("outcome", &out->outcome)
      .optional("state", &out->state)
      .optional("reason", &out->reason)
      .optional("detail", &out->detail)
      .optional("dropped", &out->dropped)
      .status();
}

json encode(const NoEvent&) { return json::object(); }

Status decode(const json&, NoEvent*) { return Status::ok(); }

json encode(const PoolFilterArgs& a) {
  json j = json::object();
  if (!a.pool.empty()) j["pool"] = a.pool;
  return j;
}

Status decode(const json& j, PoolFilterArgs* out) {
  return ArgReader(j).optional("pool", &out->pool).status();
}

json encode(const PoolStatus& p) {
  return {{"name", p.name},           {"state", p.state},
          {"dispatch", p.dispatch},   {"task_types", p.task_types},
          {"workers", p.workers},     {"target_workers", p.target_workers},
          {"queued", p.queued},       {"in_flight", p.in_flight},
          {"scheduled", p.scheduled}, {"throttled", p.throttled}};
}

Status decode(const json& j, PoolStatus* out) {
  return ArgReader(j)
      .required("name", &out->name)
      .optional("state", &out->state)
      .optional("dispatch", &out->dispatch)
      .optional("task_types", &out->task_types)
      .optional("workers", &out->workers)
      .optional("target_workers", &out->target_workers)
      .optional("queued", &out->queued)
      .optional("in_flight", &out->in_flight)
      .optional("scheduled", &out->scheduled)
      .optional("throttled", &out->throttled)
      .status();
}

json encode(const DeadLetterStoreStatus& d) {
  json j{{"pending", d.pending},
         {"oldest_pending_ms", d.oldest_pending_ms},
         {"writes_failing", d.writes_failing},
         {"last_write_error", d.last_write_error},
         {"recent_spill_files", d.recent_spill_files}};
  encode_figures(kDeadLetterStoreCounters, d, &j);
  return j;
}

Status decode(const json& j, DeadLetterStoreStatus* out) {
  ArgReader r(j);
  r.optional("pending", &out->pending)
      .optional("oldest_pending_ms", &out->oldest_pending_ms)
      .optional("writes_failing", &out->writes_failing)
      .optional("last_write_error", &out->last_write_error)
      .optional("recent_spill_files", &out->recent_spill_files);
  decode_figures(kDeadLetterStoreCounters, &r, out);
  return r.status();
}

json encode(const JournalStatus& d) {
  json j{{"sync", d.sync},
         {"mean_commit_us", d.mean_commit_us},
         {"last_error", d.last_error},
         {"storage_error", d.storage_error}};
  encode_figures(kTaskJournalStats, d, &j);
  return j;
}

Status decode(const json& j, JournalStatus* out) {
  ArgReader r(j);
  r.optional("sync", &out->sync)
      .optional("mean_commit_us", &out->mean_commit_us)
      .optional("last_error", &out->last_error)
      .optional("storage_error", &out->storage_error);
  decode_figures(kTaskJournalStats, &r, out);
  return r.status();
}

json encode(const RedisStatus& d) {
  json pools = json::array();
  for (const RedisPoolStatus& p : d.pools) {
    json consumers = json::array();
    for (const RedisConsumerStatus& c : p.consumers) {
      consumers.push_back(
          {{"name", c.name}, {"pending", c.pending}, {"idle_ms", c.idle_ms}, {"alive", c.alive}});
    }
    pools.push_back({{"name", p.name},
                     {"stream_length", p.stream_length},
                     {"pending", p.pending},
                     {"later", p.later},
                     {"finished", p.finished},
                     {"dead_letters", p.dead_letters},
                     {"consumers", std::move(consumers)}});
    encode_figures(kRedisNodeCounts, p, &pools.back());
  }
  return {{"address", d.address},
          {"node", d.node},
          {"up", d.up},
          {"last_error", d.last_error},
          {"pools", std::move(pools)}};
}

Status decode(const json& j, RedisConsumerStatus* out) {
  return ArgReader(j)
      .optional("name", &out->name)
      .optional("pending", &out->pending)
      .optional("idle_ms", &out->idle_ms)
      .optional("alive", &out->alive)
      .status();
}

Status decode(const json& j, RedisPoolStatus* out) {
  ArgReader r(j);
  r.optional("name", &out->name)
      .optional("stream_length", &out->stream_length)
      .optional("pending", &out->pending)
      .optional("later", &out->later)
      .optional("finished", &out->finished)
      .optional("dead_letters", &out->dead_letters);
  decode_figures(kRedisNodeCounts, &r, out);
  if (Status st = r.status(); !st) return st;
  return decode_array(j, "consumers", &out->consumers);
}

Status decode(const json& j, RedisStatus* out) {
  Status st = ArgReader(j)
                  .optional("address", &out->address)
                  .optional("node", &out->node)
                  .optional("up", &out->up)
                  .optional("last_error", &out->last_error)
                  .status();
  if (!st) return st;
  return decode_array(j, "pools", &out->pools);
}

json encode(const StatusReply& r) {
  json pools = json::array();
  for (const PoolStatus& p : r.pools) pools.push_back(encode(p));
  json out = {{"pid", r.pid},
              {"started_ms", r.started_ms},
              {"stopping", r.stopping},
              {"pools", std::move(pools)},
              {"dead_letter_store", encode(r.dead_letter_store)},
              {"journal", r.journal ? encode(*r.journal) : json()},
              {"redis", r.redis ? encode(*r.redis) : json()},
              {"events_dropped", r.events_dropped},
              {"idempotency_keys", r.idempotency_keys},
              {"idempotency_kept_bytes", r.idempotency_kept_bytes},
              {"http", r.http}};
  if (!r.schedules.empty()) {
    json schedules = json::array();
    for (const ScheduleInfo& s : r.schedules) schedules.push_back(encode(s));
    out["schedules"] = std::move(schedules);
  }
  return out;
}

Status decode(const json& j, StatusReply* out) {
  Status st = ArgReader(j)
                  .optional("pid", &out->pid)
                  .optional("started_ms", &out->started_ms)
                  .optional("stopping", &out->stopping)
                  .optional("events_dropped", &out->events_dropped)
                  .optional("idempotency_keys", &out->idempotency_keys)
                  .optional("idempotency_kept_bytes", &out->idempotency_kept_bytes)
                  .optional("http", &out->http)
                  .status();
  if (!st) return st;
  if (st = decode_array(j, "pools", &out->pools); !st) return st;
  if (st = decode_array(j, "schedules", &out->schedules); !st) return st;
  if (const auto journal = j.find("journal"); journal != j.end() && !journal->is_null()) {
    out->journal.emplace();
    if (st = decode(*journal, &*out->journal); !st) return st.with_context("journal");
  }
  if (const auto redis = j.find("redis"); redis != j.end() && !redis->is_null()) {
    out->redis.emplace();
    if (st = decode(*redis, &*out->redis); !st) return st.with_context("redis");
  }
  const auto store = j.find("dead_letter_store");
  if (store == j.end()) return Status::ok();
  return decode(*store, &out->dead_letter_store).with_context("dead_letter_store");
}

json encode(const WorkerStatus& w) {
  return {{"pool", w.pool},
          {"slot", w.slot},
          {"pid", w.pid},
          {"state", w.state},
          {"in_flight", w.in_flight},
          {"tasks_done", w.tasks_done},
          {"uptime_ms", w.uptime_ms},
          {"rss_bytes", w.rss_bytes},
          {"cpu_ms", w.cpu_ms},
          {"last_beat_ms", w.last_beat_ms ? json(*w.last_beat_ms) : json(nullptr)},
          {"restarts", w.restarts},
          {"isolation", w.isolation}};
}

Status decode(const json& j, WorkerStatus* out) {
  return ArgReader(j)
      .optional("pool", &out->pool)
      .optional("slot", &out->slot)
      .required("pid", &out->pid)
      .optional("state", &out->state)
      .optional("in_flight", &out->in_flight)
      .optional("tasks_done", &out->tasks_done)
      .optional("uptime_ms", &out->uptime_ms)
      .optional("rss_bytes", &out->rss_bytes)
      .optional("cpu_ms", &out->cpu_ms)
      .optional("last_beat_ms", &out->last_beat_ms)
      .optional("restarts", &out->restarts)
      .optional("isolation", &out->isolation)
      .status();
}

json encode(const PoolTarget& p) {
  return {{"pool", p.pool}, {"target_workers", p.target_workers}, {"min", p.min},
          {"max", p.max},   {"autoscale", p.autoscale},           {"reason", p.reason}};
}

Status decode(const json& j, PoolTarget* out) {
  return ArgReader(j)
      .required("pool", &out->pool)
      .optional("target_workers", &out->target_workers)
      .optional("min", &out->min)
      .optional("max", &out->max)
      .optional("autoscale", &out->autoscale)
      .optional("reason", &out->reason)
      .status();
}

json encode(const WorkersReply& r) {
  json workers = json::array();
  for (const WorkerStatus& w : r.workers) workers.push_back(encode(w));
  json pools = json::array();
  for (const PoolTarget& p : r.pools) pools.push_back(encode(p));
  return {{"workers", std::move(workers)}, {"pools", std::move(pools)}};
}

Status decode(const json& j, WorkersReply* out) {
  if (Status st = decode_array(j, "workers", &out->workers); !st) return st;
  if (!j.contains("pools")) return Status::ok();  // an older poold
  return decode_array(j, "pools", &out->pools);
}

json encode(const TenantWaiting& t) { return {{"tenant", t.tenant}, {"waiting", t.waiting}}; }

Status decode(const json& j, TenantWaiting* out) {
  return ArgReader(j).optional("tenant", &out->tenant).required("waiting", &out->waiting).status();
}

json encode(const PoolCounters& p) {
  json tenants = json::array();
  for (const TenantWaiting& t : p.tenants) tenants.push_back(encode(t));
  json j{{"name", p.name},
         {"state", p.state},
         {"crash_loop", p.crash_loop},
         {"workers", p.workers},
         {"target_workers", p.target_workers},
         {"latency_ms",
          {{"p50", quantile(p.latency_ms.p50)},
           {"p90", quantile(p.latency_ms.p90)},
           {"p99", quantile(p.latency_ms.p99)}}},
         {"queue_wait_ms",
          {{"p50", quantile(p.queue_wait_ms.p50)}, {"p99", quantile(p.queue_wait_ms.p99)}}},
         {"tenants", std::move(tenants)}};
  encode_figures(kPoolCounters, p, &j);
  encode_figures(kPoolGauges, p, &j);
  return j;
}

Status decode(const json& j, PoolCounters* out) {
  ArgReader r(j);
  r.required("name", &out->name)
      .optional("state", &out->state)
      .optional("crash_loop", &out->crash_loop)
      .optional("workers", &out->workers)
      .optional("target_workers", &out->target_workers);
  decode_figures(kPoolCounters, &r, out);
  decode_figures(kPoolGauges, &r, out);
  Status st = r.status();
  if (!st) return st;
  if (st = decode_quantiles(j, "latency_ms", &out->latency_ms); !st) return st;
  if (st = decode_quantiles(j, "queue_wait_ms", &out->queue_wait_ms); !st) return st;
  return decode_array(j, "tenants", &out->tenants);
}

json encode(const StatsReply& r) {
  json pools = json::array();
  for (const PoolCounters& p : r.pools) pools.push_back(encode(p));
  return {{"pools", std::move(pools)}};
}

Status decode(const json& j, StatsReply* out) { return decode_array(j, "pools", &out->pools); }

}  // namespace sandpool::ops
