// The service's periodic schedules (docs/schedules.md): the config's `schedules:` and those
// added at run time run by a Scheduler on a thread of their own (sp-sched), each slot
// submitted through submit_one, the socket's submit path, under the slot's idempotency key,
// and held until the journal took it; or, into a Redis pool, claimed and submitted in Redis.
#include <algorithm>
#include <cstdlib>
#include <future>
#include <set>

#include <spdlog/spdlog.h>
#include <sandpool/base/thread_name.hpp>
#include <sandpool/schedule/schedule_store.hpp>

#include <sandpool/control/op_json.hpp>
#include <sandpool/service/service.hpp>

namespace sandpool::poold {

namespace {

// How long a slot's submit waits for the journal's answer: the journal answers within about
// journal.sync_timeout (docs/journal.md); past this bound the slot counts as refused and its
// key, if the task was taken after all, makes the next firing of that slot the same task.
constexpr std::chrono::seconds kSlotAckBound{60};
// The scheduler thread looks at the clock at least this often: the wall clock may jump, and
// a test's clock offset may move.
constexpr std::chrono::milliseconds kMaxSchedulerSleep{1000};

}  // namespace

ops::ScheduleInfo schedule_info(const ScheduleState& s) {
  ops::ScheduleInfo i;
  i.name = s.spec.name;
  i.expression = s.spec.expression;
  i.zone = s.spec.zone;
  i.type = s.spec.task.type;
  i.pool = s.spec.task.pool;
  i.tenant = s.spec.task.options.tenant;
  i.catch_up = std::string(to_string(s.spec.catch_up));
  i.overlap = std::string(to_string(s.spec.overlap));
  // Paused here, or (a Redis pool's) on every node: then its slots win nothing.
  i.paused = s.spec.paused || s.cluster_paused;
  i.start_s = s.spec.start_s;
  i.end_s = s.spec.end_s;
  if (!s.cluster_paused) i.next_s = s.next_s;
  if (s.last) {
    i.last_slot_s = s.last->slot_s;
    i.last_task = s.last->task_id;
  }
  i.held_slot_s = s.held_slot_s;
  i.last_outcome = s.last_outcome;
  i.fired = s.fired;
  i.skipped = s.skipped;
  return i;
}

class Service::Slots final : public SlotSubmitter {
 public:
  explicit Slots(Service& s) : s_(s) {}
  Result<SlotAnswer> submit(const ScheduleSpec& spec, const std::string& key,
                            std::optional<std::int64_t> slot_s) override {
    return s_.submit_slot(spec, key, slot_s);
  }
  bool task_open(std::uint64_t id) override {
    if (s_.redis_ && RedisPools::is_cluster_id(id)) {
      // Redis out of reach: not open (the slot's submit then answers why).
      const auto open = s_.redis_->task_open(id);
      return open && *open;
    }
    const auto t = s_.find_task(id);
    return t && !t->done();
  }

 private:
  Service& s_;
};

Status Service::start_schedules() {
  const char* offset_file = std::getenv(kTestClockOffsetEnv);
  schedule_clock_ = std::make_unique<ScheduleWallClock>(offset_file ? offset_file : "");
  if (offset_file != nullptr) {
    log_->warn("{}={}: the schedules' clock is offset by that file's seconds (tests only)",
               kTestClockOffsetEnv, offset_file);
  }
  auto store = SqliteScheduleStore::open(config_.service.state_dir + "/dead_letters.db");
  if (!store) return store.status().with_context("schedules' store");
  schedule_store_ = std::move(store).value();
  load_added_schedules();
  slots_submitter_ = std::make_unique<Slots>(*this);
  scheduler_ =
      std::make_unique<Scheduler>(*schedule_clock_, *slots_submitter_, schedule_store_.get());
  if (Status st = apply_schedules(config_.schedules); !st) return st;
  sched_thread_ = std::thread([this] { run_schedules(); });
  name_thread(sched_thread_.native_handle(), "sp-sched");
  return Status::ok();
}

void Service::load_added_schedules() {
  auto rows = schedule_store_->definitions();
  if (!rows) {
    log_->error("schedules added at run time not read: {}", rows.status().to_string());
    return;
  }
  for (const SqliteScheduleStore::Definition& row : *rows) {
    // The state dir's file: read like any input. A row that does not read is logged and
    // left in place (a schedule_add of that name replaces it).
    const auto j = nlohmann::json::parse(row.json, nullptr, false);
    ops::ScheduleAddArgs a;
    Status st = j.is_object() ? ops::decode(j, &a) : Status::invalid("not a JSON object");
    Result<ScheduleSpec> spec = st ? schedule_of(a) : Result<ScheduleSpec>(st);
    if (spec && spec->name != row.name) spec = Status::invalid("its name is " + spec->name);
    if (!spec) {
      log_->error("schedule {} added at run time not loaded: {}", row.name,
                  spec.status().message());
      continue;
    }
    added_schedules_[row.name] = std::move(spec).value();
  }
}

Result<ScheduleSpec> schedule_of(const ops::ScheduleAddArgs& a) {
  ScheduleSpec s;
  s.name = a.name;
  const std::string self = "schedule " + a.name + ": ";
  if (a.cron.empty() == a.every.empty()) return Status::invalid(self + "give cron or every");
  s.expression = a.every.empty() ? a.cron : "@every " + a.every;
  if (!a.zone.empty()) s.zone = a.zone;
  s.task.type = a.type;
  s.task.pool = a.pool;
  if (a.priority && (*a.priority < -1000000 || *a.priority > 1000000)) {
    return Status::invalid(self + "priority must be within -1000000..1000000");
  }
  s.task.options.priority = a.priority.value_or(0);
  if (a.timeout && a.timeout->count() < 1) return Status::invalid(self + "timeout_ms under 1");
  s.task.options.timeout = a.timeout;
  s.task.options.retries = a.retries;
  s.task.options.key = a.key;
  s.task.options.tenant = a.tenant;
  s.payload = a.payload;
  s.start_s = a.start_s;
  s.end_s = a.end_s;
  if (!a.catch_up.empty()) {
    const auto c = parse_catch_up(a.catch_up);
    if (!c) return Status::invalid(self + "catch_up is skip or run_once");
    s.catch_up = *c;
  }
  if (!a.overlap.empty()) {
    const auto o = parse_overlap(a.overlap);
    if (!o) return Status::invalid(self + "overlap is allow, skip or queue");
    s.overlap = *o;
  }
  s.paused = a.paused;
  if (Status st = validate_schedule(s); !st) return st;
  return s;
}

bool Service::declared_schedule(const std::string& name) const {
  return std::any_of(config_.schedules.begin(), config_.schedules.end(),
                     [&](const ScheduleSpec& s) { return s.name == name; });
}

Status Service::apply_schedules(const std::vector<ScheduleSpec>& declared) {
  // The YAML's and those added at run time; a name the YAML declares now is the YAML's.
  std::vector<ScheduleSpec> wanted = declared;
  for (auto it = added_schedules_.begin(); it != added_schedules_.end();) {
    const bool shadowed = std::any_of(declared.begin(), declared.end(),
                                      [&](const ScheduleSpec& s) { return s.name == it->first; });
    if (!shadowed) {
      wanted.push_back(it->second);
      ++it;
      continue;
    }
    log_->warn("schedule {} added at run time is declared in the YAML now: the YAML's replaces it",
               it->first);
    if (Status st = schedule_store_->drop_definition(it->first); !st) {
      log_->error("schedule {}: its run-time definition not dropped: {}", it->first,
                  st.to_string());
    }
    it = added_schedules_.erase(it);
  }
  Status first = Status::ok();
  std::set<std::string> names;
  for (const ScheduleSpec& spec : wanted) {
    names.insert(spec.name);
    if (Status st = scheduler_->put(spec); !st) {
      log_->error("schedule {} not applied: {}", spec.name, st.message());
      if (first.is_ok()) first = st;
    }
  }
  for (const std::string& name : scheduler_->names()) {
    if (names.count(name) != 0) continue;
    if (Status st = scheduler_->remove(name); !st) {
      log_->error("schedule {} not removed: {}", name, st.message());
    }
  }
  wake_schedules();
  return first;
}

void Service::wake_schedules() {
  MutexLock lock(sched_mu_);
  sched_wake_ = true;
  sched_cv_.notify_all();
}

void Service::stop_schedules() {
  {
    MutexLock lock(sched_mu_);
    sched_stop_ = true;
    sched_cv_.notify_all();
  }
  if (sched_thread_.joinable()) sched_thread_.join();
}

void Service::run_schedules() {
  for (;;) {
    const std::optional<std::int64_t> next = scheduler_->tick();
    std::chrono::milliseconds sleep = kMaxSchedulerSleep;
    if (next) {
      const std::int64_t left = *next - schedule_clock_->now_ms();
      sleep = std::clamp(std::chrono::milliseconds(left), std::chrono::milliseconds(1),
                         kMaxSchedulerSleep);
    }
    MutexLock lock(sched_mu_);
    const auto until = std::chrono::steady_clock::now() + sleep;
    while (!sched_stop_ && !sched_wake_) {
      if (sched_cv_.wait_until(sched_mu_, until) == std::cv_status::timeout) break;
    }
    if (sched_stop_) return;
    sched_wake_ = false;
  }
}

Result<SlotAnswer> Service::submit_slot(const ScheduleSpec& spec, const std::string& key,
                                        std::optional<std::int64_t> slot_s) {
  ops::SubmitArgs a = spec.task;
  a.options.idempotency_key = key;
  if (auto pool = redis_route(a.pool, a.type)) return submit_slot_redis(*pool, spec, a, slot_s);
  auto gate = std::make_shared<AckGate>();
  auto s = submit_one(a, spec.payload, false, false, nullptr, gate, 0);
  if (!s) return s.status();
  if (s->existing) {
    log_->info("schedule slot schedule={} key={} task={} existing=true", spec.name, key, s->id);
    return SlotAnswer{s->id, ""};
  }
  auto answer = std::make_shared<std::promise<Status>>();
  auto answered = answer->get_future();
  gate->release(1, [answer](const AckGate::Refusals& refused) {
    answer->set_value(refused.empty() ? Status::ok() : refused.front().second);
  });
  if (answered.wait_for(kSlotAckBound) != std::future_status::ready) {
    return Status::error(Code::kTimeout, "the journal did not answer within 60 s");
  }
  if (Status st = answered.get(); !st) {
    idempotency_.forget(key, s->id);
    return st;
  }
  log_->info("schedule slot schedule={} key={} task={}", spec.name, key, s->id);
  return SlotAnswer{s->id, ""};
}

void Service::serve(const Request&, const ops::NoArgs&, const OpResponder<ops::ScheduleList>& res) {
  ops::ScheduleListReply r;
  for (const ScheduleState& s : schedules()) r.schedules.push_back(schedule_info(s));
  res.ok(r);
}

void Service::serve(const Request&, const ops::ScheduleNameArgs& a,
                    const OpResponder<ops::ScheduleShow>& res) {
  const auto s = scheduler_->find(a.name);
  if (!s) return (void)res.error(Status::error(Code::kNotFound, "no schedule " + a.name));
  res.ok(schedule_info(*s));
}

Status Service::pause_schedule(const std::string& name, bool paused) {
  const auto s = scheduler_->find(name);
  if (!s) return Status::error(Code::kNotFound, "no schedule " + name);
  if (!redis_route(s->spec.task.pool, s->spec.task.type)) {
    return scheduler_->set_paused(name, paused);
  }
  if (Status st = redis_->set_schedule_paused(name, paused); !st) return st;
  if (Status st = scheduler_->set_cluster_paused(name, paused); !st) return st;
  return paused ? Status::ok() : scheduler_->set_paused(name, false);
}

namespace {

// Answers with schedule `name` as it is after a pause or resume that answered `st`.
template <class Op>
void answer_paused(const Scheduler& scheduler, const std::string& name, const Status& st,
                   const OpResponder<Op>& res) {
  if (!st) return (void)res.error(st);
  const auto s = scheduler.find(name);
  if (!s) return (void)res.error(Status::error(Code::kNotFound, "no schedule " + name));
  res.ok(schedule_info(*s));
}

}  // namespace

void Service::serve(const Request&, const ops::ScheduleNameArgs& a,
                    const OpResponder<ops::SchedulePause>& res) {
  const Status st = pause_schedule(a.name, true);
  answer_paused(*scheduler_, a.name, st, res);
  if (st) log_->info("schedule paused schedule={}", a.name);
  wake_schedules();
}

void Service::serve(const Request&, const ops::ScheduleNameArgs& a,
                    const OpResponder<ops::ScheduleResume>& res) {
  const Status st = pause_schedule(a.name, false);
  answer_paused(*scheduler_, a.name, st, res);
  if (st) log_->info("schedule resumed schedule={}", a.name);
  wake_schedules();
}

void Service::serve(const Request&, const ops::ScheduleNameArgs& a,
                    const OpResponder<ops::ScheduleRunNow>& res) {
  auto id = scheduler_->run_now(a.name);
  if (!id) return (void)res.error(id.status());
  res.ok(ops::ScheduleRunReply{a.name, *id});
}

void Service::serve(const Request&, const ops::ScheduleAddArgs& a,
                    const OpResponder<ops::ScheduleAdd>& res) {
  auto spec = schedule_of(a);
  if (!spec) return (void)res.error(spec.status());
  const std::string& name = spec->name;
  if (declared_schedule(name)) {
    return (void)res.error(Status::invalid(
        "schedule " + name + " is declared in the YAML: change it there, and reload"));
  }
  if (scheduler_->find(name))
    return (void)res.error(Status::invalid("schedule " + name + " exists"));
  // Kept before it runs: answered, it survives a restart.
  if (Status st = schedule_store_->put_definition({name, ops::encode(a).dump()}); !st) {
    return (void)res.error(st.with_context("schedule " + name + ": keeping it"));
  }
  if (Status st = scheduler_->add(*spec); !st) {
    (void)schedule_store_->drop_definition(name);
    return (void)res.error(st);
  }
  added_schedules_[name] = *spec;
  log_->info("schedule added schedule={} expression=\"{}\"", name, spec->expression);
  wake_schedules();
  const auto s = scheduler_->find(name);
  if (!s) return (void)res.error(Status::error(Code::kNotFound, "no schedule " + name));
  res.ok(schedule_info(*s));
}

void Service::serve(const Request&, const ops::ScheduleNameArgs& a,
                    const OpResponder<ops::ScheduleRemove>& res) {
  if (declared_schedule(a.name)) {
    return (void)res.error(Status::invalid(
        "schedule " + a.name + " is declared in the YAML: remove it there, and reload"));
  }
  if (added_schedules_.count(a.name) == 0) {
    return (void)res.error(Status::error(Code::kNotFound, "no schedule " + a.name));
  }
  if (Status st = schedule_store_->drop_definition(a.name); !st) {
    return (void)res.error(st.with_context("schedule " + a.name + ": dropping it"));
  }
  added_schedules_.erase(a.name);
  if (Status st = scheduler_->remove(a.name); !st) {
    log_->error("schedule {} removed, its last slot not forgotten: {}", a.name, st.to_string());
  }
  log_->info("schedule removed schedule={}", a.name);
  wake_schedules();
  res.ok(ops::ScheduleNameArgs{a.name});
}

std::vector<ScheduleState> Service::schedules() const {
  if (!scheduler_) return {};
  return scheduler_->list();
}

}  // namespace sandpool::poold
