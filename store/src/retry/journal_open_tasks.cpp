// JournalOpenTasks (journal_open_tasks.hpp): the unfinished tasks' entries, their index and
// their shapes.
#include "retry/journal_open_tasks.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>
#include <utility>

namespace sandpool {
namespace {

constexpr std::size_t kMinIndexSlots = 1024;  // the index's size at least (a power of two)

std::size_t mix(std::size_t seed, std::size_t v) {
  return seed ^ (v + 0x9E3779B97F4A7C15ull + (seed << 6) + (seed >> 2));
}

}  // namespace

void OpenExtra::clear() {
  idempotency_key.clear();
  not_before.reset();
  running.reset();
  retry_due_ms = 0;
  history.clear();
  more_records.clear();
}

std::size_t JournalOpenTasks::ShapeHash::operator()(const TaskShape& s) const {
  const TaskOptions& o = s.options;
  std::size_t h = std::hash<std::string>{}(s.pool);
  h = mix(h, std::hash<std::string>{}(s.type));
  h = mix(h, std::hash<std::string>{}(o.key));
  h = mix(h, std::hash<std::string>{}(o.tenant));
  h = mix(h, static_cast<std::size_t>(o.priority));
  h = mix(h, o.timeout ? static_cast<std::size_t>(o.timeout->count()) + 1 : 0);
  h = mix(h, o.retries ? static_cast<std::size_t>(*o.retries) + 1 : 0);
  h = mix(h, o.queue_ttl ? static_cast<std::size_t>(o.queue_ttl->count()) + 1 : 0);
  return mix(h, o.fail_fast ? 1 : 0);
}

JournalOpenTasks::JournalOpenTasks(std::size_t max_tasks)
    : max_tasks_(std::min(max_tasks, kMaxTasks)) {
  rehash(kMinIndexSlots);
}
JournalOpenTasks::~JournalOpenTasks() = default;

std::size_t JournalOpenTasks::probe(std::uint64_t id) const {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = home(id);; i = (i + 1) & mask) {
    const std::uint32_t pos1 = slots_[i];
    if (pos1 == 0 || at(pos1 - 1).id == id) return i;
  }
}

void JournalOpenTasks::rehash(std::size_t slots) {
  std::vector<std::uint32_t> old = std::exchange(slots_, std::vector<std::uint32_t>(slots));
  shift_ = 64;
  for (std::size_t k = slots; k > 1; k >>= 1) --shift_;
  for (const std::uint32_t pos1 : old) {
    if (pos1 != 0) slots_[probe(at(pos1 - 1).id)] = pos1;
  }
}

OpenTask* JournalOpenTasks::find(std::uint64_t id) {
  const std::uint32_t pos1 = slots_[probe(id)];
  return pos1 == 0 ? nullptr : &at(pos1 - 1);
}

const OpenTask* JournalOpenTasks::find(std::uint64_t id) const {
  const std::uint32_t pos1 = slots_[probe(id)];
  return pos1 == 0 ? nullptr : &at(pos1 - 1);
}

std::uint32_t JournalOpenTasks::take_position() {
  if (!free_.empty()) {
    const std::uint32_t pos = free_.back();
    free_.pop_back();
    return pos;
  }
  if (used_ % kChunk == 0) chunks_.push_back(std::make_unique<OpenTask[]>(kChunk));
  return used_++;
}

static_assert(sizeof(OpenTask) == 48, "an unfinished task's entry: see docs/journal.md");

OpenTask& JournalOpenTasks::insert(std::uint64_t id) {
  if (size_ >= max_tasks_) throw std::length_error("the journal's open tasks: index full");
  if ((size_ + 1) * 4 > slots_.size() * 3) rehash(slots_.size() * 2);
  const std::uint32_t pos = take_position();
  OpenTask& t = at(pos);
  t.id = id;
  slots_[probe(id)] = pos + 1;
  ++size_;
  return t;
}

void JournalOpenTasks::erase(std::uint64_t id) {
  std::size_t i = probe(id);
  if (slots_[i] == 0) return;
  const std::uint32_t pos = slots_[i] - 1;
  OpenTask& t = at(pos);
  if (t.shape != 0) release(t.shape);
  if (t.extra != 0) {
    extras_[t.extra]->clear();
    give_back_extra(t);
  }
  t = OpenTask{};
  free_.push_back(pos);
  --size_;
  // Backward-shift deletion: the slots after the hole that may move into it do.
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t j = (i + 1) & mask; slots_[j] != 0; j = (j + 1) & mask) {
    const std::size_t h = home(at(slots_[j] - 1).id);
    // Does the hole lie cyclically in [h, j)? Then slot j may fill it.
    if (((j - h) & mask) >= ((j - i) & mask)) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = 0;
  if (size_ == 0) {  // a drained table gives its memory back
    chunks_.clear();
    free_ = {};
    used_ = 0;
    extras_.clear();
    free_extras_ = {};
    if (slots_.size() > kMinIndexSlots) rehash(kMinIndexSlots);
  } else if (slots_.size() > kMinIndexSlots && size_ * 8 < slots_.size()) {
    rehash(slots_.size() / 2);
  }
}

void JournalOpenTasks::add_record(OpenTask& t, LiveRecord r) {
  if (t.inline_records == 0) {
    t.seq = r.seq;
    t.bytes[0] = r.bytes;
    t.inline_records = 1;
  } else if (t.inline_records == 1 && r.seq >= t.seq &&
             r.seq - t.seq <= std::numeric_limits<std::uint32_t>::max()) {
    t.seq2_after = static_cast<std::uint32_t>(r.seq - t.seq);
    t.bytes[1] = r.bytes;
    t.inline_records = 2;
  } else {
    extra(t).more_records.push_back(r);
  }
}

LiveRecord JournalOpenTasks::record(const OpenTask& t, std::size_t i) const {
  if (i == 0) return {t.seq, t.bytes[0]};
  if (i == 1 && t.inline_records == 2) return {t.seq + t.seq2_after, t.bytes[1]};
  return extra_of(t)->more_records[i - t.inline_records];
}

void JournalOpenTasks::clear_records(OpenTask& t) {
  t.inline_records = 0;
  t.seq = 0;
  t.seq2_after = 0;
  t.bytes[0] = t.bytes[1] = 0;
  if (t.extra != 0) {
    extras_[t.extra]->more_records.clear();
    trim_extra(t);
  }
}

OpenExtra& JournalOpenTasks::extra(OpenTask& t) {
  if (t.extra != 0) return *extras_[t.extra];
  if (free_extras_.empty()) {
    t.extra = static_cast<std::uint32_t>(std::max<std::size_t>(extras_.size(), 1));
    extras_.resize(t.extra + 1);
  } else {
    t.extra = free_extras_.back();
    free_extras_.pop_back();
  }
  std::unique_ptr<OpenExtra>& x = extras_[t.extra];
  if (!x) x = std::make_unique<OpenExtra>();
  return *x;
}

void JournalOpenTasks::give_back_extra(OpenTask& t) {
  // The first kSpareExtras numbers given back keep their object (cleared) for reuse.
  if (free_extras_.size() >= kSpareExtras) extras_[t.extra].reset();
  free_extras_.push_back(t.extra);
  t.extra = 0;
}

void JournalOpenTasks::trim_extra(OpenTask& t) {
  if (t.extra == 0 || !extras_[t.extra]->empty()) return;
  give_back_extra(t);
}

std::uint32_t JournalOpenTasks::intern(const std::string& pool, const std::string& type,
                                       const TaskOptions& options) {
  probe_shape_.pool = pool;
  probe_shape_.type = type;
  probe_shape_.options = options;
  probe_shape_.options.idempotency_key.clear();
  probe_shape_.options.not_before.reset();
  const auto it = shape_ids_.find(probe_shape_);
  if (it != shape_ids_.end()) {
    ++shapes_[it->second].users;
    return it->second;
  }
  std::uint32_t n = 0;
  if (!free_shapes_.empty()) {
    n = free_shapes_.back();
    free_shapes_.pop_back();
  } else {
    if (shapes_.empty()) shapes_.emplace_back();  // 0: no shape
    n = static_cast<std::uint32_t>(shapes_.size());
    shapes_.emplace_back();
  }
  const auto [at, inserted] = shape_ids_.emplace(probe_shape_, n);
  (void)inserted;
  shapes_[n] = {&at->first, 1};
  return n;
}

void JournalOpenTasks::release(std::uint32_t n) {
  ShapeRef& ref = shapes_[n];
  if (--ref.users > 0) return;
  shape_ids_.erase(*ref.shape);
  ref = ShapeRef{};
  free_shapes_.push_back(n);
}

}  // namespace sandpool
