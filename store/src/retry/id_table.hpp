// IdTable: the journal writer's per-round tables of task ids (TaskJournalImpl::plan_round, the
// open transaction's accepted and ended tasks). Open addressing with linear probing over one
// array, emptied in O(1) by a generation number: a round inserts thousands of ids and the
// next round starts empty, so std::unordered_map's node per id (an allocation, a free and a
// cache miss each) cost the writer more than the lookups did. Private to the journal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sandpool {

struct IdTableNone {};  // the value of an IdTable used as a set

template <typename V>
class IdTable {
 public:
  // Inserts `id` with `value` unless present; returns its value and whether it was inserted.
  std::pair<V*, bool> try_emplace(std::uint64_t id, V value = V{}) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    Slot* s = probe(id);
    if (s->gen == gen_) return {&s->value, false};
    s->gen = gen_;
    s->id = id;
    s->value = std::move(value);
    ++size_;
    return {&s->value, true};
  }
  bool insert(std::uint64_t id) { return try_emplace(id).second; }
  V* find(std::uint64_t id) {
    if (size_ == 0) return nullptr;
    Slot* s = probe(id);
    return s->gen == gen_ ? &s->value : nullptr;
  }
  const V* find(std::uint64_t id) const { return const_cast<IdTable*>(this)->find(id); }
  std::size_t count(std::uint64_t id) const { return find(id) != nullptr ? 1 : 0; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Keeps the array (and whatever the values own until they are overwritten).
  void clear() {
    size_ = 0;
    if (++gen_ != 0) return;
    for (Slot& s : slots_) s.gen = 0;  // the generation wrapped: no slot may look current
    gen_ = 1;
  }

 private:
  struct Slot {
    std::uint64_t id = 0;
    std::uint32_t gen = 0;  // current iff == gen_
    V value{};
  };

  std::size_t home(std::uint64_t id) const {
    // A round's ids run mostly in order: four consecutive ids share a block of slots (a cache
    // line or two), and the blocks are spread by Fibonacci hashing.
    const auto block = static_cast<std::size_t>(((id >> 2) * 0x9E3779B97F4A7C15ull) >> shift_);
    return (block & ~std::size_t{3}) | static_cast<std::size_t>(id & 3);
  }
  // The slot holding `id`, or the empty one where it would go. The table is never full.
  Slot* probe(std::uint64_t id) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = home(id);; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.gen != gen_ || s.id == id) return &s;
    }
  }
  void grow() {
    std::vector<Slot> old = std::exchange(slots_, {});
    const std::uint32_t old_gen = gen_;
    const std::size_t n = old.empty() ? 1024 : old.size() * 2;
    slots_.resize(n);
    shift_ = 64;
    for (std::size_t k = n; k > 1; k >>= 1) --shift_;
    gen_ = 1;
    size_ = 0;
    for (Slot& s : old) {
      if (s.gen != old_gen) continue;
      Slot* to = probe(s.id);
      to->gen = gen_;
      to->id = s.id;
      to->value = std::move(s.value);
      ++size_;
    }
  }

  std::vector<Slot> slots_;
  std::uint32_t gen_ = 1;
  std::size_t size_ = 0;
  unsigned shift_ = 64;
};

using IdSet = IdTable<IdTableNone>;

}  // namespace sandpool
