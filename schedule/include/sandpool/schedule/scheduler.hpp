// Periodic schedules (docs/schedules.md): named task templates fired at the slots of a cron
// expression or an interval, exactly one task per slot. The Scheduler decides what fires when;
// everything outside it is a seam:
//   - ScheduleClock: the wall clock (tests move it; poold may offset it in tests);
//   - SlotSubmitter: the pool's normal submit path, under the slot's idempotency key
//     `sandpool-schedule-<name>-<slot unix seconds>`, so a restart, a reload or two nodes
//     firing one slot make one task;
//   - ScheduleStore: the last fired slot of each schedule, kept across restarts, so a restart
//     knows what it missed and applies the schedule's catch_up.
//
// Thread-safety: every member may be called from any thread. The Scheduler's mutex is a leaf:
// it is never held across a call into the submitter or the store (a submit may wait for the
// journal's commit). tick() is meant for one thread (poold's scheduler thread); two ticks at
// once would only submit a slot twice under one key, which the key makes one task.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/control/ops/tasks.hpp>
#include <sandpool/schedule/cron.hpp>
#include <sandpool/schedule/time_zone.hpp>

namespace sandpool {

// After downtime (poold stopped, the thread late), the slots that went by: `skip` drops them
// and waits for the next slot; `run_once` fires the latest of them once.
enum class CatchUp { kSkip, kRunOnce };
// A slot comes while the schedule's previous task is still open: `allow` fires anyway, `skip`
// drops the slot, `queue` holds it (one at most) until that task ends.
enum class Overlap { kAllow, kSkip, kQueue };

std::string_view to_string(CatchUp c);
std::string_view to_string(Overlap o);
std::optional<CatchUp> parse_catch_up(std::string_view s);
std::optional<Overlap> parse_overlap(std::string_view s);

// A schedule as declared (YAML `schedules:` or schedule_add).
struct ScheduleSpec {
  std::string name;        // [A-Za-z0-9_.-], 1-64 characters
  std::string expression;  // cron, macro or @every (cron.hpp)
  std::string zone = "UTC";
  // The task template: type, pool, priority, timeout, retries, key, tenant. idempotency_key,
  // wait, progress, not_before_ms and delay are the scheduler's and must stay unset.
  ops::SubmitArgs task;
  std::string payload;
  std::optional<std::int64_t> start_s;  // no slot before (Unix seconds); anchors @every
  std::optional<std::int64_t> end_s;    // no slot after
  CatchUp catch_up = CatchUp::kSkip;
  Overlap overlap = Overlap::kAllow;
  bool paused = false;
  bool operator==(const ScheduleSpec&) const;
};

// The maximum length of a schedule's name, and of its payload.
inline constexpr std::size_t kMaxScheduleName = 64;
inline constexpr std::size_t kMaxSchedulePayload = 64 * 1024;
// A slot is on time while it is at most this old; an older one is a missed slot (catch_up).
inline constexpr std::int64_t kSlotGraceSeconds = 60;

// Returns ok iff `spec` is a schedule poold can run; else an invalid-argument error naming
// the member ("schedule nightly: expression: minute field, position 1: ...").
Status validate_schedule(const ScheduleSpec& spec);
// Returns the idempotency key of `name`'s slot at `slot_s`.
std::string schedule_slot_key(std::string_view name, std::int64_t slot_s);

class ScheduleClock {
 public:
  virtual ~ScheduleClock() = default;
  // The wall clock, Unix milliseconds.
  virtual std::int64_t now_ms() const = 0;
};

// What a slot's submit answered.
struct SlotAnswer {
  // The slot's task; when another node's claim won, the task of the latest slot claimed.
  std::uint64_t task_id = 0;
  // Empty: this node fired the slot (or found the task its key names). Else the node whose
  // claim of this slot, or of a later one, won (a schedule of a Redis pool claims each slot
  // in Redis: docs/schedules.md): this node neither fired nor skipped the slot.
  std::string claimed_by;
  // The cluster holds the schedule paused (a Redis pool's schedule, paused by node
  // `claimed_by`): nothing was submitted, and `task_id` is the last slot's task.
  bool paused = false;
};

class SlotSubmitter {
 public:
  virtual ~SlotSubmitter() = default;
  // Submits `spec`'s task under idempotency key `key` for slot `slot_s` (nullopt: run_now,
  // outside the slots, nothing claimed); returns its id (the earlier task's, when the key
  // already named one) and who fired it, or why it was refused.
  virtual Result<SlotAnswer> submit(const ScheduleSpec& spec, const std::string& key,
                                    std::optional<std::int64_t> slot_s) = 0;
  // Returns true iff task `id` has not ended (queued, running, waiting for a retry).
  virtual bool task_open(std::uint64_t id) = 0;
};

struct FiredSlot {
  std::int64_t slot_s = 0;
  std::uint64_t task_id = 0;
};

// A pause or resume made at run time (set_paused), and the declared `paused` it overrode: it
// holds while the declaration's `paused` is still `declared`.
struct KeptPause {
  bool paused = false;
  bool declared = false;
  bool operator==(const KeptPause&) const = default;
};

class ScheduleStore {
 public:
  virtual ~ScheduleStore() = default;
  // The last slot `name` fired, if any is kept.
  virtual Result<std::optional<FiredSlot>> last_fired(const std::string& name) = 0;
  virtual Status record_fired(const std::string& name, const FiredSlot& fired) = 0;
  // The pause or resume made at run time of `name`, if one is kept.
  virtual Result<std::optional<KeptPause>> kept_pause(const std::string& name) = 0;
  virtual Status keep_pause(const std::string& name, const KeptPause& pause) = 0;
  virtual Status forget_pause(const std::string& name) = 0;
  // Forgets `name` (a removed schedule): its last slot and its kept pause.
  virtual Status forget(const std::string& name) = 0;
};

// What `list` and `show` report of a schedule.
struct ScheduleState {
  ScheduleSpec spec;
  std::optional<std::int64_t> next_s;       // the next slot; none: ended, or paused
  std::optional<FiredSlot> last;            // the last slot fired
  std::optional<std::int64_t> held_slot_s;  // overlap queue: a slot waiting for the last task
  // "", "fired", "claimed by node N", "skipped: ...", "refused: ..."
  std::string last_outcome;
  std::uint64_t fired = 0;    // slots this node submitted since poold started
  std::uint64_t skipped = 0;  // slots dropped (catch_up, overlap, refusals)
  // A Redis pool's schedule paused on every node (in Redis): as this node last learnt it,
  // from set_cluster_paused() or a slot's answer. It still ticks; its slots win nothing.
  bool cluster_paused = false;
};

class Scheduler {
 public:
  // `store` may be null (nothing kept across restarts). All three outlive the Scheduler.
  Scheduler(const ScheduleClock& clock, SlotSubmitter& submitter, ScheduleStore* store);

  // Adds a schedule; refuses an invalid one, or one whose name exists (kInvalidArgument).
  Status add(const ScheduleSpec& spec) EXCLUDES(mu_);
  // Adds or changes a schedule (a reload): a changed one keeps its counters and last slot
  // and is planned again from now; an unchanged one is left alone. A pause or resume made
  // by set_paused() lasts until a put() whose `paused` differs from the one before; kept in
  // the store, it holds across a restart while the declared `paused` is the one it overrode.
  Status put(const ScheduleSpec& spec) EXCLUDES(mu_);
  // Removes a schedule and forgets its last slot (kNotFound when unknown).
  Status remove(const std::string& name) EXCLUDES(mu_);
  // Pauses or resumes; slots that pass while paused are neither fired nor counted. Kept in
  // the store before it applies (an error when it cannot be kept: nothing changed).
  Status set_paused(const std::string& name, bool paused) EXCLUDES(mu_);
  // Records that the cluster holds the schedule paused, or not (ScheduleState's
  // cluster_paused); kNotFound when unknown.
  Status set_cluster_paused(const std::string& name, bool paused) EXCLUDES(mu_);
  // Submits the schedule's task now, outside its slots, under the key
  // `sandpool-schedule-<name>-run-<now ms>`; returns the task's id.
  Result<std::uint64_t> run_now(const std::string& name) EXCLUDES(mu_);

  std::vector<ScheduleState> list() const EXCLUDES(mu_);
  std::optional<ScheduleState> find(const std::string& name) const EXCLUDES(mu_);
  std::vector<std::string> names() const EXCLUDES(mu_);

  // Fires what is due at the clock's now; returns the wall ms of the earliest next slot (or
  // held slot's check), nullopt when nothing is planned.
  std::optional<std::int64_t> tick() EXCLUDES(mu_);

 private:
  struct Entry {
    ScheduleState state;    // state.spec.paused: as set at run time, else as declared
    ScheduleSpec declared;  // as the last add/put gave it
    CronExpr expr;
    const TimeZone* zone = nullptr;
    std::uint64_t generation = 0;  // changes on put/remove/pause: a tick's late answer is dropped
  };
  // Plans `e` from `after` (Unix seconds): its next slot within start and end.
  static std::optional<std::int64_t> next_slot(const Entry& e, std::int64_t after);
  Result<Entry> make_entry(const ScheduleSpec& spec);

  // One slot a schedule may fire this tick, decided under the lock, fired without it.
  struct Plan {
    std::string name;
    std::uint64_t generation = 0;
    ScheduleSpec spec;
    std::int64_t slot_s = 0;
    bool held = false;                      // the overlap queue's held slot, not a new one
    std::optional<std::uint64_t> previous;  // the schedule's last task
  };
  // tick()'s steps, in order. The slots to fire at `now_s` (Unix seconds): each schedule's
  // held slot and its latest due one; the others are counted skipped and each schedule's
  // next slot planned. Takes mu_.
  std::vector<Plan> plan_due(std::int64_t now_s) EXCLUDES(mu_);
  // Fires `p` unless its overlap policy holds or skips it, and accounts for it. Without mu_
  // held (it submits); takes it for the accounts.
  void fire(const Plan& p) EXCLUDES(mu_);
  // The wall ms of the earliest next slot (or held slot's check); nullopt: none. Takes mu_.
  std::optional<std::int64_t> next_wake_ms(std::int64_t now_s) const EXCLUDES(mu_);
  // Runs `change` on the state of p's schedule under mu_, unless the schedule was removed or
  // changed (its generation) since p was planned; true iff it ran.
  template <class Change>
  bool update_planned(const Plan& p, Change change) EXCLUDES(mu_);

  const ScheduleClock& clock_;
  SlotSubmitter& submitter_;
  ScheduleStore* store_;
  mutable Mutex mu_;
  std::map<std::string, Entry> entries_ GUARDED_BY(mu_);
  std::uint64_t next_generation_ GUARDED_BY(mu_) = 1;
};

}  // namespace sandpool
