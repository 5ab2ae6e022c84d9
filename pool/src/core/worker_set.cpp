// WorkerSet (worker_set.hpp): membership, slots, the target, generations and the rolling
// restart, restart intensity and the respawn backoff.
#include "core/worker_set.hpp"

#include <algorithm>
#include <utility>

#include "core/pool_core_internal.hpp"

namespace sandpool::core {

using detail::kMsNs;

WorkerSet::WorkerSet(std::uint32_t target, supervision::RestartIntensity::Limits limits)
    : target_(target), intensity_(limits) {}

Worker* WorkerSet::find(WorkerId id) {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

Worker& WorkerSet::add(Worker w) {
  w.generation = generation_;
  w.slot = free_slot();
  if (w.slot >= slot_starts_.size()) slot_starts_.resize(w.slot + 1, 0);
  w.slot_restarts = slot_starts_[w.slot]++;
  const WorkerId id = w.id;
  return workers_.emplace(id, std::move(w)).first->second;
}

std::uint32_t WorkerSet::free_slot() const {
  std::vector<bool> taken;
  for (const auto& [id, w] : workers_) {
    if (!w.live()) continue;
    if (w.slot >= taken.size()) taken.resize(w.slot + 1, false);
    taken[w.slot] = true;
  }
  std::uint32_t slot = 0;
  while (slot < taken.size() && taken[slot]) ++slot;
  return slot;
}

std::size_t WorkerSet::live() const {
  return static_cast<std::size_t>(std::count_if(workers_.begin(), workers_.end(),
                                                [](const auto& kv) { return kv.second.live(); }));
}

std::size_t WorkerSet::ready() const {
  return static_cast<std::size_t>(
      std::count_if(workers_.begin(), workers_.end(),
                    [](const auto& kv) { return kv.second.template is<Ready>(); }));
}

bool WorkerSet::any_starting() const {
  return std::any_of(workers_.begin(), workers_.end(),
                     [](const auto& kv) { return kv.second.template is<Starting>(); });
}

Worker* WorkerSet::pick_to_shrink() {
  Worker* pick = nullptr;
  auto rank = [](const Worker& x) {
    return std::make_pair(x.is<Starting>() ? 0 : 1 + x.ring.size() + x.backlog.size(),
                          x.last_work_ns);
  };
  for (auto& [id, w] : workers_) {
    if (!w.live()) continue;
    if (pick == nullptr || rank(w) < rank(*pick)) pick = &w;
  }
  return pick;
}

std::size_t WorkerSet::new_generation() {
  ++generation_;
  std::size_t old = 0;
  for (auto& [id, w] : workers_) {
    Ready* r = std::get_if<Ready>(&w.state);
    if (r == nullptr || w.generation == generation_) continue;
    r->replace_pending = true;
    ++old;
  }
  if (old > 0) rolling_ = true;
  return old;
}

void WorkerSet::mark_all_for_replacement() {
  for (auto& [id, w] : workers_) {
    if (Ready* r = std::get_if<Ready>(&w.state)) r->replace_pending = true;
  }
}

WorkerSet::RollingStep WorkerSet::next_replacement() {
  // Paused while a replacement waits out an init-failure backoff (a broken new plugin does
  // not take the old workers down with it); a past failure alone does not hold it.
  if (!rolling_ || respawn_held() || any_starting()) return {};  // one at a time
  for (auto& [id, w] : workers_) {
    Ready* r = std::get_if<Ready>(&w.state);
    if (r == nullptr || !r->replace_pending) continue;
    r->replace_pending = false;
    return {RollingStep::Kind::kReplace, &w};
  }
  rolling_ = false;
  return {RollingStep::Kind::kFinished, nullptr};
}

bool WorkerSet::note_restart(std::int64_t now) {
  const bool entered = intensity_.note_restart(now);
  if (intensity_.crash_loop()) {
    respawn_due_ns_ = std::max(respawn_due_ns_, intensity_.respawn_not_before());
  }
  return entered;
}

const Worker* WorkerSet::note_stable(std::int64_t now) {
  if (!intensity_.crash_loop()) return nullptr;
  for (const auto& [id, w] : workers_) {
    if (w.is<Ready>() && intensity_.note_stable(w.ready_ns, now)) return &w;
  }
  return nullptr;
}

void WorkerSet::back_off_init_failure(std::int64_t now) {
  const std::int64_t backoff =
      std::min<std::int64_t>(5000, 100ll << std::min<std::uint32_t>(init_failures_ - 1, 6));
  respawn_due_ns_ = now + backoff * kMsNs;
}

bool WorkerSet::take_due_respawn(std::int64_t now) {
  if (respawn_due_ns_ == 0 || now < respawn_due_ns_) return false;
  respawn_due_ns_ = 0;
  return true;
}

}  // namespace sandpool::core
