// The Scheduler: what fires when, and what a slot's catch_up and overlap policies make of it
// (docs/schedules.md). Every decision is taken under mu_; every submit and store call is
// made without it.
#include <sandpool/schedule/scheduler.hpp>

#include <algorithm>
#include <cctype>
#include <utility>

namespace sandpool {

namespace {

// Counting the slots a long downtime skipped stops here (a reported figure, not a bound on
// anything else).
constexpr std::uint64_t kMaxCountedSlots = 100000;

std::int64_t floor_seconds(std::int64_t ms) { return ms >= 0 ? ms / 1000 : (ms - 999) / 1000; }

}  // namespace

std::string_view to_string(CatchUp c) { return c == CatchUp::kSkip ? "skip" : "run_once"; }

std::string_view to_string(Overlap o) {
  switch (o) {
    case Overlap::kAllow:
      return "allow";
    case Overlap::kSkip:
      return "skip";
    case Overlap::kQueue:
      return "queue";
  }
  return "allow";
}

std::optional<CatchUp> parse_catch_up(std::string_view s) {
  if (s == "skip") return CatchUp::kSkip;
  if (s == "run_once") return CatchUp::kRunOnce;
  return std::nullopt;
}

std::optional<Overlap> parse_overlap(std::string_view s) {
  if (s == "allow") return Overlap::kAllow;
  if (s == "skip") return Overlap::kSkip;
  if (s == "queue") return Overlap::kQueue;
  return std::nullopt;
}

bool ScheduleSpec::operator==(const ScheduleSpec& o) const {
  const auto& a = task;
  const auto& b = o.task;
  return name == o.name && expression == o.expression && zone == o.zone && a.type == b.type &&
         a.pool == b.pool && a.options == b.options && payload == o.payload &&
         start_s == o.start_s && end_s == o.end_s && catch_up == o.catch_up &&
         overlap == o.overlap && paused == o.paused;
}

Status validate_schedule(const ScheduleSpec& spec) {
  if (spec.name.empty() || spec.name.size() > kMaxScheduleName) {
    return Status::invalid("schedule name must be 1-64 characters");
  }
  for (char c : spec.name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return Status::invalid("schedule name \"" + spec.name +
                             "\": only letters, digits, '_', '-' and '.'");
    }
  }
  const std::string self = "schedule " + spec.name + ": ";
  auto expr = CronExpr::parse(spec.expression);
  if (!expr) return Status::invalid(self + "expression: " + expr.status().message());
  auto zone = zone_named(spec.zone);
  if (!zone) return Status::invalid(self + "zone: " + zone.status().message());
  if (spec.task.type.empty()) return Status::invalid(self + "type is required");
  if (!spec.task.options.idempotency_key.empty() || spec.task.wait || spec.task.progress ||
      spec.task.options.not_before || spec.task.delay) {
    return Status::invalid(self +
                           "idempotency_key, wait, progress, not_before and delay are the "
                           "scheduler's own");
  }
  if (spec.payload.size() > kMaxSchedulePayload) {
    return Status::invalid(self + "payload over " + std::to_string(kMaxSchedulePayload) + " bytes");
  }
  if (spec.start_s && spec.end_s && *spec.end_s < *spec.start_s) {
    return Status::invalid(self + "end is before start");
  }
  for (const auto& t : {spec.start_s, spec.end_s}) {
    if (t && (*t < 0 || *t > 221845392000)) {
      return Status::invalid(self + "start and end must be within 1970-9000");
    }
  }
  return Status::ok();
}

std::string schedule_slot_key(std::string_view name, std::int64_t slot_s) {
  return "sandpool-schedule-" + std::string(name) + "-" + std::to_string(slot_s);
}

Scheduler::Scheduler(const ScheduleClock& clock, SlotSubmitter& submitter, ScheduleStore* store)
    : clock_(clock), submitter_(submitter), store_(store) {}

std::optional<std::int64_t> Scheduler::next_slot(const Entry& e, std::int64_t after) {
  const ScheduleSpec& s = e.state.spec;
  if (s.start_s && after < *s.start_s - 1) after = *s.start_s - 1;
  const auto next = e.expr.next_after(after, *e.zone, s.start_s.value_or(0));
  if (!next || (s.end_s && *next > *s.end_s)) return std::nullopt;
  return next;
}

Result<Scheduler::Entry> Scheduler::make_entry(const ScheduleSpec& spec) {
  if (auto st = validate_schedule(spec); !st) return st;
  auto expr = CronExpr::parse(spec.expression);
  auto zone = zone_named(spec.zone);
  Entry e{ScheduleState{}, spec, *expr, *zone, 0};
  e.state.spec = spec;
  return e;
}

Status Scheduler::add(const ScheduleSpec& spec) {
  {
    MutexLock lock(mu_);
    if (entries_.count(spec.name) != 0) {
      return Status::invalid("schedule " + spec.name + " exists");
    }
  }
  return put(spec);
}

Status Scheduler::put(const ScheduleSpec& spec) {
  auto made = make_entry(spec);
  if (!made) return made.status();
  // What the store kept across restarts, read before the lock (the store may wait on disk):
  // the last slot, and a pause or resume made at run time.
  std::optional<FiredSlot> kept;
  Result<std::optional<KeptPause>> kept_pause = std::optional<KeptPause>{};
  if (store_ != nullptr) {
    auto last = store_->last_fired(spec.name);
    if (!last)
      return last.status().with_context("schedule " + spec.name + ": reading its last slot");
    kept = *last;
    kept_pause = store_->kept_pause(spec.name);
  }
  const std::int64_t now_s = floor_seconds(clock_.now_ms());
  // The declared `paused` changed: a pause or resume made at run time ends, and its row goes.
  bool drop_pause = false;
  {
    MutexLock lock(mu_);
    Entry e = std::move(*made);
    auto it = entries_.find(spec.name);
    if (it != entries_.end()) {
      if (it->second.declared == spec) return Status::ok();
      // A pause or resume at run time lasts until the declaration's own `paused` changes.
      if (it->second.declared.paused == spec.paused) {
        e.state.spec.paused = it->second.state.spec.paused;
      } else {
        drop_pause = it->second.state.spec.paused != it->second.declared.paused;
      }
      e.state.fired = it->second.state.fired;
      e.state.skipped = it->second.state.skipped;
      e.state.last = it->second.state.last;
      e.state.last_outcome = it->second.state.last_outcome;
      e.state.cluster_paused = it->second.state.cluster_paused;
    } else {
      e.state.last = kept;
      // A restart: the run-time pause holds while the declaration is the one it overrode.
      if (!kept_pause) {
        e.state.last_outcome = "run-time pause not read: " + kept_pause.status().to_string();
      } else if (*kept_pause && (*kept_pause)->declared == spec.paused) {
        e.state.spec.paused = (*kept_pause)->paused;
      } else if (*kept_pause) {
        drop_pause = true;
      }
    }
    e.declared = spec;
    e.generation = next_generation_++;
    if (!e.state.spec.paused) {
      // A schedule with a kept last slot resumes from it: the slots after it that went by
      // are due now, and the next tick applies catch_up to them. A new one starts after now.
      const std::int64_t from =
          e.state.last ? std::max(e.state.last->slot_s, now_s - 366 * 86400) : now_s;
      e.state.next_s = next_slot(e, it != entries_.end() ? std::max(from, now_s) : from);
    }
    if (it != entries_.end()) {
      it->second = std::move(e);
    } else {
      entries_.emplace(spec.name, std::move(e));
    }
  }
  if (drop_pause && store_ != nullptr) {
    if (Status st = store_->forget_pause(spec.name); !st) {
      return st.with_context("schedule " + spec.name + ": applied; its run-time pause not dropped");
    }
  }
  return Status::ok();
}

Status Scheduler::remove(const std::string& name) {
  {
    MutexLock lock(mu_);
    if (entries_.erase(name) == 0) return Status::error(Code::kNotFound, "no schedule " + name);
  }
  if (store_ != nullptr) return store_->forget(name);
  return Status::ok();
}

Status Scheduler::set_paused(const std::string& name, bool paused) {
  KeptPause pause{paused, false};
  {
    MutexLock lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return Status::error(Code::kNotFound, "no schedule " + name);
    if (it->second.state.spec.paused == paused) return Status::ok();
    pause.declared = it->second.declared.paused;
  }
  // Kept before it applies, without the lock (the store may wait on disk): answered, it
  // survives a restart.
  if (store_ != nullptr) {
    if (Status st = store_->keep_pause(name, pause); !st) {
      return st.with_context("schedule " + name + ": keeping its pause");
    }
  }
  const std::int64_t now_s = floor_seconds(clock_.now_ms());
  MutexLock lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return Status::error(Code::kNotFound, "no schedule " + name);
  Entry& e = it->second;
  if (e.state.spec.paused == paused) return Status::ok();
  e.state.spec.paused = paused;
  e.generation = next_generation_++;
  e.state.held_slot_s.reset();
  e.state.next_s = paused ? std::nullopt : next_slot(e, now_s);
  return Status::ok();
}

Status Scheduler::set_cluster_paused(const std::string& name, bool paused) {
  MutexLock lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return Status::error(Code::kNotFound, "no schedule " + name);
  it->second.state.cluster_paused = paused;
  return Status::ok();
}

Result<std::uint64_t> Scheduler::run_now(const std::string& name) {
  ScheduleSpec spec;
  {
    MutexLock lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return Status::error(Code::kNotFound, "no schedule " + name);
    spec = it->second.state.spec;
  }
  const std::string key = "sandpool-schedule-" + name + "-run-" + std::to_string(clock_.now_ms());
  auto answer = submitter_.submit(spec, key, std::nullopt);
  if (!answer) return answer.status();
  return answer->task_id;
}

std::vector<ScheduleState> Scheduler::list() const {
  MutexLock lock(mu_);
  std::vector<ScheduleState> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) out.push_back(e.state);
  return out;
}

std::optional<ScheduleState> Scheduler::find(const std::string& name) const {
  MutexLock lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  return it->second.state;
}

std::vector<std::string> Scheduler::names() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

std::optional<std::int64_t> Scheduler::tick() {
  const std::int64_t now_s = floor_seconds(clock_.now_ms());
  for (const Plan& p : plan_due(now_s)) fire(p);
  return next_wake_ms(now_s);
}

std::vector<Scheduler::Plan> Scheduler::plan_due(std::int64_t now_s) {
  std::vector<Plan> plans;
  MutexLock lock(mu_);
  for (auto& [name, e] : entries_) {
    ScheduleState& s = e.state;
    if (s.spec.paused) continue;
    std::optional<FiredSlot> last = s.last;
    if (s.held_slot_s) {
      plans.push_back({name, e.generation, s.spec, *s.held_slot_s, true,
                       last ? std::optional(last->task_id) : std::nullopt});
    }
    if (!s.next_s || *s.next_s > now_s) continue;
    // Every slot in [next, now] is due: the latest fires when on time (or, after missed
    // slots, when catch_up is run_once); the others are skipped.
    std::int64_t latest = *s.next_s;
    std::uint64_t due = 1;
    if (e.expr.interval() != 0) {
      const std::int64_t n = (now_s - latest) / e.expr.interval();
      latest += n * e.expr.interval();
      if (s.spec.end_s && latest > *s.spec.end_s) {
        latest -= ((latest - *s.spec.end_s) + e.expr.interval() - 1) / e.expr.interval() *
                  e.expr.interval();
      }
      due += static_cast<std::uint64_t>((latest - *s.next_s) / e.expr.interval());
    } else {
      for (auto n = next_slot(e, latest); n && *n <= now_s; n = next_slot(e, latest)) {
        latest = *n;
        if (++due >= kMaxCountedSlots) break;
      }
    }
    const bool on_time = now_s - latest <= kSlotGraceSeconds;
    s.skipped += due - 1;
    s.next_s = next_slot(e, std::max(latest, now_s));
    if (!on_time && s.spec.catch_up == CatchUp::kSkip) {
      ++s.skipped;
      s.last_outcome = "skipped: missed (catch_up skip)";
      continue;
    }
    plans.push_back({name, e.generation, s.spec, latest, false,
                     last ? std::optional(last->task_id) : std::nullopt});
  }
  return plans;
}

template <class Change>
bool Scheduler::update_planned(const Plan& p, Change change) {
  MutexLock lock(mu_);
  auto it = entries_.find(p.name);
  if (it == entries_.end() || it->second.generation != p.generation) return false;
  change(it->second.state);
  return true;
}

void Scheduler::fire(const Plan& p) {
  const bool previous_open = p.previous && submitter_.task_open(*p.previous);
  if (p.held) {
    if (previous_open) return;  // still waiting for the last task
  } else if (previous_open && p.spec.overlap == Overlap::kSkip) {
    update_planned(p, [](ScheduleState& s) {
      ++s.skipped;
      s.last_outcome = "skipped: the last task is still open (overlap skip)";
    });
    return;
  } else if (previous_open && p.spec.overlap == Overlap::kQueue) {
    update_planned(p, [&p](ScheduleState& s) {
      if (s.held_slot_s) {
        ++s.skipped;  // one held slot at most: the newer replaces it
      }
      s.held_slot_s = p.slot_s;
      s.last_outcome = "held: the last task is still open (overlap queue)";
    });
    return;
  }
  auto submitted = submitter_.submit(p.spec, schedule_slot_key(p.name, p.slot_s), p.slot_s);
  std::optional<FiredSlot> record;
  update_planned(p, [&](ScheduleState& s) {
    if (p.held) s.held_slot_s.reset();
    if (submitted && submitted->paused) {
      // Paused on every node: a slot that passes while paused is neither fired nor counted,
      // nor kept (the last slot stays the one before).
      s.cluster_paused = true;
      s.last_outcome = "paused in the cluster (by node " + submitted->claimed_by + ")";
      return;
    }
    if (submitted) {
      s.cluster_paused = false;
      // A claim another node won is that node's firing: not counted here, but the slot is
      // done (kept, so a restart does not try it again) and its task is the one overlap
      // looks at.
      s.last = FiredSlot{p.slot_s, submitted->task_id};
      record = s.last;
      if (submitted->claimed_by.empty()) {
        ++s.fired;
        s.last_outcome = "fired";
      } else {
        s.last_outcome = "claimed by node " + submitted->claimed_by;
      }
    } else {
      ++s.skipped;
      s.last_outcome = "refused: " + submitted.status().to_string();
    }
  });
  // Recorded after the submit: a crash between the two fires the slot again at the next
  // start, and its key makes that the same task.
  if (!record || store_ == nullptr) return;
  if (Status kept = store_->record_fired(p.name, *record); !kept) {
    update_planned(
        p, [&kept](ScheduleState& s) { s.last_outcome = "fired, not kept: " + kept.to_string(); });
  }
}

std::optional<std::int64_t> Scheduler::next_wake_ms(std::int64_t now_s) const {
  MutexLock lock(mu_);
  std::optional<std::int64_t> earliest;
  for (const auto& [name, e] : entries_) {
    std::optional<std::int64_t> at = e.state.next_s;
    if (e.state.held_slot_s) at = now_s + 1;  // look again at whether the last task ended
    if (at && (!earliest || *at < *earliest)) earliest = at;
  }
  if (!earliest) return std::nullopt;
  return *earliest * 1000;
}

}  // namespace sandpool
