#include "core/interned_types.hpp"

#include <deque>
#include <unordered_map>

#include <sandpool/base/thread_annotations.hpp>

namespace sandpool::core {

namespace detail {
std::string_view interned_type_names[kMaxInternedTypes];
}  // namespace detail

namespace {

// The names behind interned_type_names, and their indexes by name. Never destroyed: a
// record may name its type from a static destructor's path (a Ticket held by a static).
struct InternTable {
  Mutex mu;
  std::deque<std::string> names GUARDED_BY(mu);  // a deque: its elements never move
  std::unordered_map<std::string_view, std::uint32_t> index GUARDED_BY(mu);
};

InternTable& intern_table() {
  static InternTable* table = new InternTable;  // NOLINT(cppcoreguidelines-owning-memory)
  return *table;
}

}  // namespace

std::optional<std::uint32_t> intern_type(std::string_view type) {
  if (type.empty() || type.size() > kMaxInternedTypeBytes) return std::nullopt;
  InternTable& t = intern_table();
  MutexLock lock(t.mu);
  if (auto it = t.index.find(type); it != t.index.end()) return it->second;
  if (t.names.size() >= kMaxInternedTypes) return std::nullopt;
  const auto at = static_cast<std::uint32_t>(t.names.size());
  const std::string_view kept = t.names.emplace_back(type);
  detail::interned_type_names[at] = kept;
  t.index.emplace(kept, at);
  return at;
}

std::uint32_t interned_type_count() {
  InternTable& t = intern_table();
  MutexLock lock(t.mu);
  return static_cast<std::uint32_t>(t.names.size());
}

TaskTypes::TaskTypes(std::vector<std::string> names) : names_(std::move(names)) {
  indexes_.reserve(names_.size());
  for (const std::string& n : names_) indexes_.push_back(intern_type(n));
}

std::optional<TaskType> TaskTypes::find(std::string_view type) const {
  for (std::size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] != type) continue;
    if (indexes_[i]) return TaskType::interned(*indexes_[i]);
    return TaskType(std::string_view(names_[i]));
  }
  return std::nullopt;
}

}  // namespace sandpool::core
