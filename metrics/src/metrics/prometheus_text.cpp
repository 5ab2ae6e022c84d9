// The Prometheus text exposition format 0.0.4: one family at a time (HELP, TYPE, then its
// samples for every pool), so no family is ever split. Durations are exact decimal seconds
// made from integer nanoseconds, so bucket bounds read the same in every scrape.
#include <cstdio>
#include <functional>
#include <string>
#include <type_traits>

#include <sandpool/metrics/metrics.hpp>

namespace sandpool {
namespace {

// Formats `units` / 10^digits as a plain decimal without trailing zeros ("0.0025", "60").
std::string decimal(std::int64_t units, int digits) {
  const bool negative = units < 0;
  const std::uint64_t v = negative ? 0 - static_cast<std::uint64_t>(units) : units;
  std::uint64_t scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  std::string out = negative ? "-" : "";
  out += std::to_string(v / scale);
  std::string frac = std::to_string(v % scale);
  frac.insert(0, static_cast<std::size_t>(digits) - frac.size(), '0');
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  if (!frac.empty()) out += "." + frac;
  return out;
}

std::string seconds_from_ns(std::int64_t ns) { return decimal(ns, 9); }

// HELP text escapes backslash and newline only.
std::string escape_help(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string_view type_name(MetricType t) { return t == MetricType::kGauge ? "gauge" : "counter"; }

// A figure's metric value: a flag 0 or 1, a count as it is or microseconds as seconds.
template <class Stats>
std::string figure_value(const StatDef<Stats>& c, const Stats& stats) {
  if (c.flag != nullptr) return stats.*c.flag ? "1" : "0";
  const std::uint64_t v = stats.*c.member;
  if (c.scale == MetricScale::kMicrosToSeconds) return decimal(static_cast<std::int64_t>(v), 6);
  return std::to_string(v);
}

class Exposition {
 public:
  explicit Exposition(const std::vector<PoolMetrics>& pools) : pools_(pools) {}

  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += escape_help(help);
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  // `labels` is the rendered label list without braces ("" for none).
  void sample(std::string_view name, std::string_view labels, std::string_view value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  // A family with one sample per pool: value(pool) -> integer, or a number rendered already
  // (std::string).
  template <typename F>
  void per_pool(std::string_view name, std::string_view type, std::string_view help, F value) {
    family(name, type, help);
    for (const PoolMetrics& p : pools_) {
      if constexpr (std::is_same_v<decltype(value(p)), std::string>) {
        sample(name, pool_label(p), value(p));
      } else {
        sample(name, pool_label(p), std::to_string(value(p)));
      }
    }
  }
  // A figure of PoolMetrics::stats as a family with one sample per pool.
  void per_pool_figure(const StatDef<PoolCounts>& c) {
    per_pool(c.metric, type_name(c.type), c.help,
             [&c](const PoolMetrics& p) { return figure_value<PoolCounts>(c, p.stats); });
  }
  // A family with one sample per pool and per value of a second label.
  template <typename Values, typename F>
  void per_pool_and(std::string_view name, std::string_view type, std::string_view help,
                    std::string_view label, const Values& values, F value) {
    family(name, type, help);
    for (const PoolMetrics& p : pools_) {
      for (const auto& v : values) {
        sample(
            name,
            pool_label(p) + "," + std::string(label) + "=\"" + escape_label_value(v.first) + "\"",
            std::to_string(value(p, v.second)));
      }
    }
  }
  // A family with one sample per pool and tenant waiting (PoolMetrics::tenants_waiting).
  void per_tenant(std::string_view name, std::string_view help) {
    family(name, "gauge", help);
    for (const PoolMetrics& p : pools_) {
      for (const auto& [tenant, n] : p.tenants_waiting) {
        sample(name, pool_label(p) + ",tenant=\"" + escape_label_value(tenant) + "\"",
               std::to_string(n));
      }
    }
  }
  // A family with one sample per pool that has a dispatch function (calls > 0).
  template <typename F>
  void per_custom_pool(std::string_view name, std::string_view help, F value) {
    family(name, "counter", help);
    for (const PoolMetrics& p : pools_) {
      if (p.dispatch_function.calls > 0) sample(name, pool_label(p), std::to_string(value(p)));
    }
  }
  // `member` of each pool, or of those with a dispatch function when `custom_only`.
  template <typename Member>
  void histogram(std::string_view name, std::string_view help, Member member,
                 bool custom_only = false) {
    family(name, "histogram", help);
    const std::string bucket = std::string(name) + "_bucket";
    for (const PoolMetrics& p : pools_) {
      if (custom_only && p.dispatch_function.calls == 0) continue;
      const Histogram& h = std::invoke(member, p);
      const std::string pool = pool_label(p);
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i < Histogram::kBoundsNs.size(); ++i) {
        cumulative += h.bucket(i);
        sample(bucket, pool + ",le=\"" + seconds_from_ns(Histogram::kBoundsNs[i]) + "\"",
               std::to_string(cumulative));
      }
      sample(bucket, pool + ",le=\"+Inf\"", std::to_string(h.count()));
      sample(std::string(name) + "_sum", pool, seconds_from_ns(h.sum_ns()));
      sample(std::string(name) + "_count", pool, std::to_string(h.count()));
    }
  }
  std::string take() { return std::move(out_); }

 private:
  static std::string pool_label(const PoolMetrics& p) {
    return "pool=\"" + escape_label_value(p.pool) + "\"";
  }

  const std::vector<PoolMetrics>& pools_;
  std::string out_;
};

template <typename Enum, std::size_t N>
std::vector<std::pair<std::string, std::size_t>> enum_labels(bool skip_first) {
  std::vector<std::pair<std::string, std::size_t>> out;
  for (std::size_t i = skip_first ? 1 : 0; i < N; ++i) {
    out.emplace_back(std::string(to_string(static_cast<Enum>(i))), i);
  }
  return out;
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// The figures of `table` that name a metric, one sample each, no labels, in the table's order.
template <class Stats, std::size_t N>
void render_figures(Exposition& e, const StatDef<Stats> (&table)[N], const Stats& stats) {
  for (const StatDef<Stats>& c : table) {
    if (c.metric.empty()) continue;
    e.family(c.metric, type_name(c.type), c.help);
    e.sample(c.metric, "", figure_value(c, stats));
  }
}

// The store's series: one sample each, no labels.
void render_dead_letter_store(Exposition& e, const DeadLetterStoreStats& d) {
  const auto one = [&](std::string_view name, std::string_view type, std::string_view help,
                       const std::string& value) {
    e.family(name, type, help);
    e.sample(name, "", value);
  };
  one("sandpool_dead_letters_pending", "gauge",
      "Dead letters waiting to be written to the store; their tasks are not terminal yet.",
      std::to_string(d.pending));
  one("sandpool_dead_letters_oldest_pending_seconds", "gauge",
      "How long the oldest pending dead letter has waited; 0 when none waits.",
      decimal(d.oldest_pending_ms, 3));
  one("sandpool_dead_letter_writes_failing", "gauge",
      "1 while the store's last write failed (the status reply says why); letters wait.",
      d.writes_failing ? "1" : "0");
  render_figures(e, kDeadLetterStoreCounters, d);
}

// The Redis pools' series (docs/redis-pools.md): one sample per Redis pool each.
void render_redis(Exposition& e, const std::vector<RedisPoolFigures>& pools) {
  const auto label = [](const RedisPoolFigures& p) {
    return "pool=\"" + escape_label_value(p.pool) + "\"";
  };
  e.family("sandpool_redis_up", "gauge",
           "1 while this node's last call to Redis for the pool succeeded; 0: Redis unreachable "
           "(submits to the pool are refused, ends wait in memory).");
  for (const RedisPoolFigures& p : pools) e.sample("sandpool_redis_up", label(p), p.up ? "1" : "0");
  for (const StatDef<RedisNodeCounts>& c : kRedisNodeCounts) {
    e.family(c.metric, type_name(c.type), c.help);
    for (const RedisPoolFigures& p : pools) {
      e.sample(c.metric, label(p), figure_value<RedisNodeCounts>(c, p));
    }
  }
}

// The schedules' series (docs/schedules.md): one sample per schedule each; the next-fire gauge
// only for a schedule that has a next slot.
void render_schedules(Exposition& e, const std::vector<ScheduleFigures>& schedules) {
  const auto label = [](const ScheduleFigures& s) {
    return "schedule=\"" + escape_label_value(s.schedule) + "\"";
  };
  e.family("sandpool_schedule_fired_total", "counter",
           "Slots of the schedule submitted as tasks since poold started.");
  for (const auto& s : schedules)
    e.sample("sandpool_schedule_fired_total", label(s), std::to_string(s.fired));
  e.family("sandpool_schedule_skipped_total", "counter",
           "Slots of the schedule not fired since poold started (missed, overlap, refused).");
  for (const auto& s : schedules) {
    e.sample("sandpool_schedule_skipped_total", label(s), std::to_string(s.skipped));
  }
  e.family("sandpool_schedule_next_fire_timestamp_seconds", "gauge",
           "When the schedule's next slot fires, Unix seconds (absent: paused or ended).");
  for (const auto& s : schedules) {
    if (s.next_s) {
      e.sample("sandpool_schedule_next_fire_timestamp_seconds", label(s),
               std::to_string(*s.next_s));
    }
  }
}

// The task journal's series (docs/journal.md): one sample each, no labels.
void render_journal(Exposition& e, const TaskJournalStats& j) {
  render_figures(e, kTaskJournalStats, j);
}

void render_pool_gauges(Exposition& e) {
  for (const StatDef<PoolCounts>& c : kPoolGauges) e.per_pool_figure(c);
  e.per_tenant("sandpool_tenant_tasks_waiting",
               "Tasks a tenant has waiting (queued or scheduled), for the 100 tenants with the "
               "most per pool.");
  const std::vector<std::pair<std::string, std::size_t>> states = {
      {"starting", 0}, {"idle", 1}, {"busy", 2}, {"draining", 3}, {"stopping", 4}};
  e.per_pool_and(
      "sandpool_workers", "gauge", "Worker processes, by state.", "state", states,
      [](const PoolMetrics& p, std::size_t s) {
        const WorkerStateCounts& w = p.workers;
        const std::uint32_t by_state[] = {w.starting, w.idle, w.busy, w.draining, w.stopping};
        return by_state[s];
      });
  e.per_pool("sandpool_workers_target", "gauge", "Worker processes the pool is scaled to.",
             [](const PoolMetrics& p) { return p.stats.target_workers; });
  e.per_pool("sandpool_queue_wait_now_seconds", "gauge",
             "How long the task waiting longest for a worker had waited at the autoscaler's "
             "last look; 0 when none did, or the pool does not autoscale.",
             [](const PoolMetrics& p) {
               return seconds_from_ns(static_cast<std::int64_t>(p.stats.queue_wait_ms) * 1000000);
             });
  const std::vector<std::pair<std::string, std::size_t>> directions = {{"up", 0}, {"down", 1}};
  e.per_pool_and("sandpool_autoscale_steps_total", "counter",
                 "Steps of the autoscaler, by direction (why: the `scaled` events and the log).",
                 "direction", directions, [](const PoolMetrics& p, std::size_t d) {
                   return d == 0 ? p.stats.autoscale_up : p.stats.autoscale_down;
                 });
  e.per_pool("sandpool_workers_rss_bytes", "gauge",
             "Resident memory of the pool's worker processes, summed.",
             [](const PoolMetrics& p) { return p.worker_rss_bytes; });
  e.per_pool("sandpool_pool_crash_loop", "gauge",
             "1 while the pool is in crash_loop (worker replacements back off).",
             [](const PoolMetrics& p) { return p.stats.crash_loop ? 1 : 0; });
  e.per_pool("sandpool_pool_failed", "gauge",
             "1 once the pool has failed (its plugin cannot init); it accepts no tasks.",
             [](const PoolMetrics& p) { return p.failed ? 1 : 0; });
}

// kPoolCounters' series; the dead-lettered tasks by reason, then the attempts by outcome after
// the retries (PoolMetrics' arrays).
void render_pool_counters(Exposition& e) {
  for (const StatDef<PoolCounts>& c : kPoolCounters) {
    if (c.metric.empty()) continue;
    if (c.member == &PoolCounts::dead_lettered) {
      e.per_pool_and(c.metric, type_name(c.type), c.help, "reason",
                     enum_labels<DeadReason, kDeadReasonCount>(true),
                     [](const PoolMetrics& p, std::size_t r) { return p.dead_lettered[r]; });
    } else {
      e.per_pool_figure(c);
    }
    if (c.member == &PoolCounts::retried) {
      e.per_pool_and("sandpool_attempts_total", "counter", "Attempts that ended, by outcome.",
                     "outcome", enum_labels<Outcome, kOutcomeCount>(false),
                     [](const PoolMetrics& p, std::size_t o) { return p.attempts[o]; });
    }
  }
}

void render_pool_histograms(Exposition& e) {
  e.histogram("sandpool_queue_wait_seconds", "From submit to a task's first dispatch.",
              &PoolMetrics::queue_wait);
  e.histogram("sandpool_run_time_seconds", "From dispatch to the end of an attempt.",
              &PoolMetrics::run_time);
  e.histogram("sandpool_end_to_end_seconds",
              "From submit to the task's end (completed, dead-lettered or cancelled).",
              &PoolMetrics::end_to_end);
  e.histogram(
      "sandpool_dispatch_function_seconds",
      "Time of each call of the pool's dispatch function (embedded pools with one only).",
      [](const PoolMetrics& p) -> const Histogram& { return p.dispatch_function.time; }, true);
}

void render_dispatch_function(Exposition& e) {
  e.per_custom_pool("sandpool_dispatch_function_calls_total",
                    "Calls of the pool's dispatch function (embedded pools with one only).",
                    [](const PoolMetrics& p) { return p.dispatch_function.calls; });
  e.per_custom_pool("sandpool_dispatch_function_errors_total",
                    "Calls that threw; the built-in strategy chose instead.",
                    [](const PoolMetrics& p) { return p.dispatch_function.errors; });
  e.per_custom_pool("sandpool_dispatch_function_invalid_total",
                    "Calls that named a worker out of range, starting or full; the built-in "
                    "strategy chose instead.",
                    [](const PoolMetrics& p) { return p.dispatch_function.invalid; });
  e.per_custom_pool("sandpool_dispatch_function_slow_total",
                    "Calls longer than dispatch_function_slow.",
                    [](const PoolMetrics& p) { return p.dispatch_function.slow; });
}

}  // namespace

std::string render_prometheus(const std::vector<PoolMetrics>& pools, const ServiceInfo& service) {
  Exposition e(pools);
  e.family("sandpool_info", "gauge", "The running sandpool service; always 1.");
  e.sample("sandpool_info", "version=\"" + escape_label_value(service.version) + "\"", "1");
  e.family("sandpool_start_time_seconds", "gauge",
           "When the service started, seconds since the Unix epoch.");
  e.sample("sandpool_start_time_seconds", "", decimal(service.start_time_ms, 3));
  if (service.dead_letter_store) render_dead_letter_store(e, *service.dead_letter_store);
  if (service.journal) render_journal(e, *service.journal);
  if (!service.redis.empty()) render_redis(e, service.redis);
  if (!service.schedules.empty()) render_schedules(e, service.schedules);
  render_pool_gauges(e);
  render_pool_counters(e);
  render_dispatch_function(e);
  render_pool_histograms(e);
  return e.take();
}

}  // namespace sandpool
