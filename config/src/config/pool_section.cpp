#include <algorithm>
#include <chrono>

#include "config/config_sections.hpp"
#include "config/plugin_config_json.hpp"

namespace sandpool::config {
namespace {

using std::chrono::milliseconds;

constexpr std::uint64_t kMinMemory = 16u << 20;  // below this the worker host cannot start
constexpr std::uint64_t kMaxMessage = 1u << 30;  // payload/result frames carry 32-bit lengths

bool valid_pool_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// `workers.autoscale` (AutoscalePolicy): its presence (`present`) turns autoscaling on.
void read_autoscale(MapReader r, bool present, AutoscalePolicy* a) {
  a->enabled = present;
  r.duration("target_queue_wait", &a->target_queue_wait, milliseconds(1));
  r.count("scale_up_step", &a->scale_up_step, 1);
  r.duration("cooldown", &a->cooldown);
  r.duration("idle_timeout", &a->idle_timeout, milliseconds(1));
  r.finish();
}

// `workers`: min and max into p->worker_bounds, initial into p->workers, the autoscale policy.
// min 0 (workers on demand) needs autoscale and task_types (read before).
void read_workers(MapReader r, PoolConfig* p) {
  PoolConfig::WorkerBounds* bounds = &p->worker_bounds;
  std::uint32_t* initial = &p->workers;
  const bool has_min = r.count("min", &bounds->min, 0);
  const bool has_max = r.count("max", &bounds->max, 1);
  const bool has_initial = r.count("initial", initial);
  const bool autoscale = r.has("autoscale");  // section() is read either way: a known key
  read_autoscale(r.section("autoscale"), autoscale, &p->autoscale);
  r.finish();
  const bool min_ok = has_min || !r.has("min");
  const bool max_ok = has_max || !r.has("max");
  if (!min_ok || !max_ok || (r.has("initial") && !has_initial)) return;
  if (bounds->min > bounds->max) {
    r.fail(has_min ? "min" : "max", "min (" + std::to_string(bounds->min) +
                                        ") is greater than max (" + std::to_string(bounds->max) +
                                        ")");
    return;
  }
  if (bounds->min == 0 && !p->autoscale.enabled) {
    r.fail("min", "0 starts workers on demand, which needs workers.autoscale");
    return;
  }
  if (bounds->min == 0 && p->task_types.empty()) {
    r.fail("min",
           "0 needs the pool's task_types (a pool learns its types from its first "
           "worker otherwise, and this one may have none)");
    return;
  }
  if (!has_initial) {
    // An autoscaled pool starts at min and grows with its load.
    *initial = p->autoscale.enabled ? bounds->min : std::clamp(*initial, bounds->min, bounds->max);
  } else if (*initial < bounds->min || *initial > bounds->max) {
    r.fail("initial", std::to_string(*initial) + " is outside [min, max] = [" +
                          std::to_string(bounds->min) + ", " + std::to_string(bounds->max) + "]");
  }
}

void read_queue(MapReader r, PoolConfig* p) {
  r.count("capacity", &p->queue_capacity, 1, UINT64_MAX);
  if (const YAML::Node* ttl = r.value("ttl");
      ttl != nullptr && ttl->IsScalar() && ttl->Scalar() == "none") {
    p->queue_ttl.reset();
  } else {
    milliseconds v{0};
    if (r.duration("ttl", &v, milliseconds(1))) p->queue_ttl = v;
  }
  r.count("max_per_tenant", &p->max_per_tenant, 0, UINT64_MAX);
  r.duration("aging_interval", &p->aging_interval);
  r.finish();
}

// `tenants`: weighted fair queueing between tenants (TenantPolicy). `weights` maps tenant
// names to weights 1..1000.
void read_tenants(MapReader r, TenantPolicy* t) {
  constexpr std::uint64_t kMaxWeight = 1000;
  std::uint64_t w = 0;
  if (r.count("default_weight", &w, 1, kMaxWeight))
    t->default_weight = static_cast<std::uint32_t>(w);
  r.count("max_tenants", &t->max_tenants, 0, UINT64_MAX);
  MapReader weights = r.section("weights");
  if (weights.node().IsMap()) {
    for (const auto& entry : weights.node()) {
      const std::string tenant = entry.first.as<std::string>("");
      if (weights.count(tenant, &w, 1, kMaxWeight)) {
        t->weights[tenant] = static_cast<std::uint32_t>(w);
      }
    }
  }
  weights.finish();
  r.finish();
}

// `limits`: the rlimits and the cgroup's CPU quota go into the sandbox policy, the per-task
// CPU time and the message bounds are the pool's own.
void read_limits(MapReader r, PoolConfig* p) {
  sandbox::ResourceLimits& l = p->sandbox.limits;
  if (r.size("memory", &l.address_space) && l.address_space != 0 && l.address_space < kMinMemory) {
    r.fail("memory",
           "expected 0 (no limit) or at least 16MiB (the worker host needs that much "
           "address space to start), got " +
               describe(*r.value("memory")));
  }
  r.duration("cpu_time", &p->cpu_time);
  double& quota = p->sandbox.cpu_quota;
  if (r.real("cpu_quota", &quota, 0.0) && quota != 0 && quota < 0.01) {
    r.fail("cpu_quota",
           "expected 0 (no quota) or at least 0.01 (CPUs), got " + describe(*r.value("cpu_quota")));
  }
  r.count("open_files", &l.open_files, 0, UINT64_MAX);
  r.count("processes", &l.processes, 0, UINT64_MAX);
  r.size("file_size", &l.file_size);
  for (auto [key, field] :
       {std::pair{"max_payload", &p->max_payload}, std::pair{"max_result", &p->max_result}}) {
    if (r.size(key, field, 1) && *field > kMaxMessage) {
      r.fail(key, "expected at most 1GiB, got " + describe(*r.value(key)));
    }
  }
  r.finish();
}

// A list of namespace names ("user", "pid", "net", "ipc", "uts", "mount" or "mnt").
void read_namespaces(MapReader& r, std::string_view key, sandbox::NamespaceSet* out) {
  std::vector<std::string> names;
  if (!r.string_list(key, &names)) return;
  sandbox::NamespaceSet set;
  for (const std::string& name : names) {
    std::optional<sandbox::Namespace> ns = sandbox::parse_namespace(name);
    if (!ns) {
      r.fail(key, "unknown namespace '" + name + "' (expected user, pid, net, ipc, uts, mount)");
      return;
    }
    set.add(*ns);
  }
  *out = set;
}

// `sandbox`: the policy, and `user` beside it (WorkerSpec::user).
// sandbox.init: what the plugin's init may reach besides its own files and readonly_paths.
// Its read_paths are shown in the mount namespace's view too (readable there for life; after
// init Landlock takes them away again).
void read_sandbox_init(MapReader r, sandbox::SandboxPolicy* s) {
  for (auto [key, paths] : {std::pair{"read_paths", &s->init.read_paths},
                            std::pair{"write_paths", &s->init.write_paths}}) {
    if (!r.string_list(key, paths)) continue;
    for (const std::string& path : *paths) {
      if (!path.starts_with('/')) {
        r.fail(key, "expected absolute paths, got \"" + path + "\"");
        break;
      }
    }
  }
  r.boolean("network", &s->init.network);
  r.finish();
}

void read_sandbox(MapReader r, PoolConfig* p) {
  using sandbox::SeccompProfile;
  sandbox::SandboxPolicy* s = &p->sandbox;
  sandbox::NamespacePolicy& ns = s->namespaces;
  r.choice<SeccompProfile>("profile", &s->profile,
                           {{"strict", SeccompProfile::kStrict},
                            {"relaxed", SeccompProfile::kRelaxed},
                            {"off", SeccompProfile::kOff}});
  r.string_list("allow_syscalls", &s->allow_syscalls);
  r.string_list("keep_env", &s->keep_env);
  r.choice<sandbox::CgroupMode>("cgroup", &s->cgroup,
                                {{"off", sandbox::CgroupMode::kOff},
                                 {"auto", sandbox::CgroupMode::kAuto},
                                 {"required", sandbox::CgroupMode::kRequired}});
  r.string("user", &p->user);
  read_namespaces(r, "namespaces", &ns.wanted);
  // Layers whose absence is fatal: namespaces (the spawner acts on them) and landlock (the
  // worker host does).
  if (r.string_list("require", &s->require)) {
    for (const std::string& name : s->require) {
      if (name == "landlock") continue;
      if (std::optional<sandbox::Namespace> layer = sandbox::parse_namespace(name)) {
        ns.required.add(*layer);
        continue;
      }
      r.fail("require",
             "unknown layer '" + name + "' (expected user, pid, net, ipc, uts, mount or landlock)");
      break;
    }
  }
  if (const sandbox::NamespaceSet extra = ns.required - ns.wanted; !extra.empty()) {
    r.fail("require", "requires " + extra.describe(", ") + " but sandbox.namespaces leaves " +
                          (extra.describe(",").find(',') == std::string::npos ? "it" : "them") +
                          " out");
  }
  if (r.string_list("readonly_paths", &s->readonly_paths)) {
    for (const std::string& path : s->readonly_paths) {
      if (!path.starts_with('/')) {
        r.fail("readonly_paths", "expected absolute paths, got \"" + path + "\"");
        break;
      }
    }
    ns.readonly_paths = s->readonly_paths;  // shown in the mount view too
  }
  r.size("tmpfs_size", &ns.tmpfs_size);
  if (bool wx = false; r.boolean("write_xor_execute", &wx)) s->write_xor_execute = wx;
  read_sandbox_init(r.section("init"), s);
  r.finish();
}

void read_retry(MapReader r, RetryPolicy* p) {
  const std::size_t errors_before = r.errors().count();
  const bool base = r.duration("base", &p->base);
  r.real("multiplier", &p->multiplier, 1.0);
  const bool max = r.duration("max", &p->max);
  r.boolean("retry_sandbox_violation", &p->retry_sandbox_violation);
  r.finish();
  if ((base || max) && r.errors().count() == errors_before && p->max < p->base) {
    r.fail(max ? "max" : "base", "max (" + std::to_string(p->max.count()) +
                                     "ms) is less than base (" + std::to_string(p->base.count()) +
                                     "ms)");
  }
}

void read_task_defaults(MapReader r, PoolConfig* p) {
  const std::size_t errors_before = r.errors().count();
  const bool timeout = r.duration("timeout", &p->timeout, milliseconds(1));
  const bool max = r.duration("max_timeout", &p->max_timeout, milliseconds(1));
  r.count("retries", &p->retries);
  r.duration("cancel_grace", &p->cancel_grace);
  r.finish();
  if ((timeout || max) && r.errors().count() == errors_before && p->max_timeout < p->timeout) {
    r.fail(max ? "max_timeout" : "timeout",
           "max_timeout (" + std::to_string(p->max_timeout.count()) + "ms) is less than timeout (" +
               std::to_string(p->timeout.count()) + "ms)");
  }
}

void read_restart(MapReader r, PoolConfig* p) {
  const std::size_t errors_before = r.errors().count();
  r.count("max_restarts", &p->max_restarts);
  r.duration("within", &p->restart_window, milliseconds(1));
  const bool base = r.duration("backoff_base", &p->crash_backoff_base, milliseconds(1));
  const bool max = r.duration("backoff_max", &p->crash_backoff_max, milliseconds(1));
  r.duration("stable_after", &p->stable_after);
  r.count("max_init_failures", &p->max_init_failures, 1);
  r.finish();
  if ((base || max) && r.errors().count() == errors_before &&
      p->crash_backoff_max < p->crash_backoff_base) {
    r.fail(max ? "backoff_max" : "backoff_base",
           "backoff_max (" + std::to_string(p->crash_backoff_max.count()) +
               "ms) is less than backoff_base (" + std::to_string(p->crash_backoff_base.count()) +
               "ms)");
  }
}

// One token bucket: {tasks, per, burst}.
void read_rate(MapReader r, RateLimit* out) {
  r.count("tasks", &out->tasks, 1);
  r.duration("per", &out->per, milliseconds(1));
  r.count("burst", &out->burst);
  r.finish();
  if (!r.has("tasks")) r.fail("tasks", "required: tasks per `per` (a rate limit)");
}

// A mapping of names (task types or tenants) to token buckets.
void read_rates(MapReader r, std::map<std::string, RateLimit>* out) {
  if (r.node().IsMap()) {
    for (const auto& entry : r.node()) {
      const std::string name = entry.first.as<std::string>("");
      read_rate(r.section(name), &(*out)[name]);
    }
  }
  r.finish();
}

// `rate_limits`: the pool's, per task type, per tenant (FlowLimits).
void read_rate_limits(MapReader r, FlowLimits* f) {
  const bool has_pool = r.has("pool");
  MapReader pool = r.section("pool");  // asked either way: it is part of the schema
  if (has_pool) {
    read_rate(pool, &f->pool);
  } else {
    pool.finish();
  }
  read_rates(r.section("task_types"), &f->task_types);
  read_rates(r.section("tenants"), &f->tenants);
  r.finish();
}

// `concurrency_per_type`: task type -> at most N dispatched at once.
void read_type_caps(MapReader r, std::map<std::string, std::uint32_t>* out) {
  if (r.node().IsMap()) {
    for (const auto& entry : r.node()) {
      const std::string type = entry.first.as<std::string>("");
      std::uint32_t cap = 0;
      if (r.count(type, &cap, 1)) (*out)[type] = cap;
    }
  }
  r.finish();
}

}  // namespace

void read_pool(ConfigErrors& errors, const YAML::Node& node, const std::string& path,
               PoolConfig* out, PoolMarks* marks) {
  MapReader r(errors, node, path);
  if (!node.IsMap()) {
    if (node.IsNull()) errors.add(node.Mark(), path, "expected a pool (a mapping), got nothing");
    return;  // MapReader reported anything else
  }
  if (r.string("name", &out->name)) {
    marks->name = r.value("name")->Mark();
    if (!valid_pool_name(out->name)) {
      r.fail("name", "expected a name of a-z, 0-9, _ and -, got \"" + out->name + "\"");
    }
  } else if (!r.has("name")) {
    r.fail("name", "required: the pool's name");
  }
  if (!r.string("plugin", &out->plugin_path) && !r.has("plugin")) {
    r.fail("plugin", "required: the path of the plugin .so");
  }
  if (const YAML::Node* config = r.value("plugin_config")) {
    plugin_config_to_json(*config, r.path_of("plugin_config"), errors, &out->plugin_config_json);
  }
  if (r.string_list("task_types", &out->task_types)) {
    for (std::size_t i = 0; i < out->task_types.size(); ++i) {
      marks->task_types.push_back((*r.value("task_types"))[i].Mark());
    }
  }
  if (r.choice<PoolConfig::Backend>(
          "backend", &out->backend,
          {{"local", PoolConfig::Backend::kLocal}, {"redis", PoolConfig::Backend::kRedis}}) &&
      out->backend == PoolConfig::Backend::kRedis) {
    marks->backend = r.value("backend")->Mark();
  }
  read_workers(r.section("workers"), out);
  r.count("concurrency", &out->concurrency, 1);
  read_queue(r.section("queue"), out);
  read_tenants(r.section("tenants"), &out->tenants);
  read_rate_limits(r.section("rate_limits"), &out->flow);
  read_type_caps(r.section("concurrency_per_type"), &out->flow.type_concurrency);
  r.choice<DispatchStrategy>("dispatch", &out->dispatch,
                             {{"round-robin", DispatchStrategy::kRoundRobin},
                              {"least-loaded", DispatchStrategy::kLeastLoaded},
                              {"random", DispatchStrategy::kRandom},
                              {"affinity", DispatchStrategy::kAffinity},
                              {"least-rss", DispatchStrategy::kLeastRss},
                              {"least_rss", DispatchStrategy::kLeastRss},
                              {"by-key", DispatchStrategy::kByKey},
                              {"by_key", DispatchStrategy::kByKey}});
  read_limits(r.section("limits"), out);
  read_sandbox(r.section("sandbox"), out);

  MapReader health = r.section("health");
  health.duration("heartbeat_interval", &out->heartbeat_interval, milliseconds(1));
  health.count("missed_heartbeats", &out->missed_heartbeats, 1);
  health.duration("init_timeout", &out->init_timeout, milliseconds(1));
  health.duration("stop_timeout", &out->stop_timeout, milliseconds(1));
  health.finish();

  read_task_defaults(r.section("task_defaults"), out);

  read_retry(r.section("retry"), &out->retry);
  read_restart(r.section("restart"), out);

  MapReader recycle = r.section("recycle");
  recycle.count("max_tasks", &out->recycle_max_tasks, 0, UINT64_MAX);
  recycle.size("max_rss", &out->recycle_max_rss);
  recycle.duration("max_age", &out->recycle_max_age);
  recycle.finish();
  r.finish();
}

}  // namespace sandpool::config
