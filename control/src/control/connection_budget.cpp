#include "control/connection_budget.hpp"

#include <utility>

namespace sandpool::control {
namespace {

// Decrements map[key], erasing it at zero (so the maps hold only what is in use).
template <class Map, class Key>
void drop_one(Map& map, const Key& key) {
  auto it = map.find(key);
  if (it == map.end()) return;
  if (--it->second == 0) map.erase(it);
}

}  // namespace

StreamSlot& StreamSlot::operator=(StreamSlot&& o) noexcept {
  if (this != &o) {
    release();
    budget_ = std::move(o.budget_);
    uid_ = o.uid_;
    connection_ = o.connection_;
  }
  return *this;
}

void StreamSlot::release() {
  if (auto budget = std::exchange(budget_, nullptr)) budget->close_stream(uid_, connection_);
}

std::optional<std::string> ConnectionBudget::admit(uid_t uid, bool admin) {
  MutexLock lock(mu_);
  if (admins_ + others_ >= limits_.max_connections) {
    return "too many connections (limit " + std::to_string(limits_.max_connections) + ")";
  }
  if (admin) {
    ++admins_;
    return std::nullopt;
  }
  const std::size_t shared = limits_.max_connections > limits_.admin_reserved
                                 ? limits_.max_connections - limits_.admin_reserved
                                 : 0;
  if (others_ >= shared) {
    return "too many connections without admin rights (limit " + std::to_string(shared) + ": " +
           std::to_string(limits_.admin_reserved) + " of " +
           std::to_string(limits_.max_connections) + " are kept for admins)";
  }
  std::size_t& mine = connections_by_uid_[uid];
  if (mine >= limits_.connections_per_uid) {
    if (mine == 0) connections_by_uid_.erase(uid);
    return "uid " + std::to_string(uid) + " holds too many connections (limit " +
           std::to_string(limits_.connections_per_uid) + " per uid)";
  }
  ++mine;
  ++others_;
  return std::nullopt;
}

void ConnectionBudget::leave(uid_t uid, bool admin) {
  MutexLock lock(mu_);
  if (admin) {
    if (admins_ > 0) --admins_;
    return;
  }
  if (others_ > 0) --others_;
  drop_one(connections_by_uid_, uid);
}

std::optional<std::string> ConnectionBudget::open_stream(uid_t uid, std::uint64_t connection,
                                                         StreamSlot* slot) {
  {
    MutexLock lock(mu_);
    auto on_connection = streams_by_connection_.find(connection);
    if (on_connection != streams_by_connection_.end() &&
        on_connection->second >= limits_.streams_per_connection) {
      return "too many streams open on this connection (limit " +
             std::to_string(limits_.streams_per_connection) + " per connection); cancel one first";
    }
    auto of_uid = streams_by_uid_.find(uid);
    if (of_uid != streams_by_uid_.end() && of_uid->second >= limits_.streams_per_uid) {
      return "uid " + std::to_string(uid) + " has too many streams open (limit " +
             std::to_string(limits_.streams_per_uid) + " per uid); cancel one first";
    }
    if (limits_.streams_per_connection == 0 || limits_.streams_per_uid == 0) {
      return "streams are turned off (limit 0)";
    }
    ++streams_by_connection_[connection];
    ++streams_by_uid_[uid];
  }
  *slot = StreamSlot(shared_from_this(), uid, connection);
  return std::nullopt;
}

void ConnectionBudget::close_stream(uid_t uid, std::uint64_t connection) {
  MutexLock lock(mu_);
  drop_one(streams_by_connection_, connection);
  drop_one(streams_by_uid_, uid);
}

std::size_t ConnectionBudget::connections() const {
  MutexLock lock(mu_);
  return admins_ + others_;
}

}  // namespace sandpool::control
