// ConnectionBudget: how many of the control server's connections and streams each peer may
// hold (docs/protocol.md, "Transport and access"), so that no uid without admin rights can
// take the slots an admin needs, nor make the events hub fan out to thousands of streams.
//
// Thread-safety: every member may be called from any thread; one mutex, a leaf (nothing is
// called while it is held). Connections are admitted and left on the server thread; stream
// slots are released wherever a request's final reply is sent (any thread).
// Lifetime: shared; a StreamSlot keeps its budget alive.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <sandpool/base/thread_annotations.hpp>

namespace sandpool::control {

struct BudgetLimits {
  std::size_t max_connections = 64;
  std::size_t admin_reserved = 8;        // of max_connections, only for admins
  std::size_t connections_per_uid = 16;  // peers without admin rights
  std::size_t streams_per_connection = 4;
  std::size_t streams_per_uid = 16;
};

class ConnectionBudget;

// One open stream's share of the budget; released once, by release() or the destructor.
class StreamSlot {
 public:
  StreamSlot() = default;
  StreamSlot(std::shared_ptr<ConnectionBudget> budget, uid_t uid, std::uint64_t connection)
      : budget_(std::move(budget)), uid_(uid), connection_(connection) {}
  StreamSlot(StreamSlot&& o) noexcept { *this = std::move(o); }
  StreamSlot& operator=(StreamSlot&& o) noexcept;
  StreamSlot(const StreamSlot&) = delete;
  StreamSlot& operator=(const StreamSlot&) = delete;
  ~StreamSlot() { release(); }
  void release();

 private:
  std::shared_ptr<ConnectionBudget> budget_;
  uid_t uid_ = 0;
  std::uint64_t connection_ = 0;
};

class ConnectionBudget : public std::enable_shared_from_this<ConnectionBudget> {
 public:
  explicit ConnectionBudget(BudgetLimits limits) : limits_(limits) {}

  // Takes a connection slot for a peer of `uid`. Returns nullopt when admitted, else the
  // message of the `busy` refusal (which limit, and its value).
  std::optional<std::string> admit(uid_t uid, bool admin) EXCLUDES(mu_);
  // Gives back the slot admit() took for the same (uid, admin).
  void leave(uid_t uid, bool admin) EXCLUDES(mu_);

  // Takes a stream slot for connection `connection` of `uid` into *slot. Returns nullopt
  // when granted, else the message of the `busy` refusal.
  std::optional<std::string> open_stream(uid_t uid, std::uint64_t connection, StreamSlot* slot)
      EXCLUDES(mu_);

  std::size_t connections() const EXCLUDES(mu_);  // admitted and not left, all peers

 private:
  friend class StreamSlot;
  void close_stream(uid_t uid, std::uint64_t connection) EXCLUDES(mu_);

  const BudgetLimits limits_;
  mutable Mutex mu_;
  std::size_t admins_ GUARDED_BY(mu_) = 0, others_ GUARDED_BY(mu_) = 0;  // connections
  std::map<uid_t, std::size_t> connections_by_uid_ GUARDED_BY(mu_);  // peers without admin rights
  std::map<uid_t, std::size_t> streams_by_uid_ GUARDED_BY(mu_);      // every peer
  std::map<std::uint64_t, std::size_t> streams_by_connection_ GUARDED_BY(mu_);
};

}  // namespace sandpool::control
