// AckGate: holds a submit's reply until the tasks it acknowledges are committed to the
// journal (docs/journal.md, "In poold": acknowledged means written).
//
// A reply covers one task (submit) or many (submit_batch). Two things must happen before it
// goes out: the handler has built it (release(), after the last Pool::submit returned, the
// idempotency keys remembered), and every new task's SubmitOptions::on_accepted has answered
// (on the journal's writer thread after the commit; within Pool::submit without a journal).
// Whichever comes last sends it, once, with the refusals (`storage: ...`) by task index.
// The gate needs no timer of its own: the journal answers every accept within about
// journal.sync_timeout, a hung sync included (docs/journal.md, "A failing disk").
//
// A waited submit's end may come before its accepted event went out (the task is dispatched
// before its commit): after_reply() holds it until then, and drops it when the submit was
// refused (the client was told "not accepted"; the refused task ends cancelled).
//
// Thread-safety: every member may be called from any thread; mu_ is a leaf (the callbacks run
// without it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/base/thread_annotations.hpp>

namespace sandpool::poold {

class AckGate {
 public:
  using Refusals = std::vector<std::pair<std::size_t, Status>>;  // by task index, ascending
  using Reply = std::function<void(const Refusals&)>;
  using Accepted = std::function<void(std::uint64_t id, const Status&)>;

  // The on_accepted of the task at `index` of the request.
  static Accepted on_accepted(std::shared_ptr<AckGate> gate, std::size_t index);
  // The reply is built: `acks` new tasks were submitted (each calls its on_accepted once);
  // `reply` runs once they all answered (now, if they have).
  void release(std::size_t acks, Reply reply) EXCLUDES(mu_);
  // Runs `end` once the reply went out and did not refuse the task at `index`; drops it
  // when it did.
  void after_reply(std::size_t index, std::function<void()> end) EXCLUDES(mu_);
  // Whether the task at `index` was refused (known once its on_accepted answered).
  bool refused(std::size_t index) const EXCLUDES(mu_);

 private:
  // What goes out once everything is in: the reply, its refusals, the ends that waited.
  struct Sending {
    Reply reply;
    Refusals refusals;
    std::vector<std::pair<std::size_t, std::function<void()>>> held;
  };
  void accepted(std::size_t index, const Status& s) EXCLUDES(mu_);
  // When everything is in and the reply has not gone: marks it sent and returns what goes
  // out, for send() to run after mu_; else nullopt.
  std::optional<Sending> take_sending_locked() REQUIRES(mu_);
  // Sends the reply, then runs the ends that waited for it (those not refused).
  void send(Sending s) EXCLUDES(mu_);

  mutable Mutex mu_;
  std::size_t answered_ GUARDED_BY(mu_) = 0;
  std::optional<std::size_t> expected_ GUARDED_BY(mu_);  // set by release()
  Reply reply_ GUARDED_BY(mu_);
  bool sent_ GUARDED_BY(mu_) = false;
  Refusals refusals_ GUARDED_BY(mu_);
  // Ends waiting for it.
  std::vector<std::pair<std::size_t, std::function<void()>>> held_ GUARDED_BY(mu_);
};

}  // namespace sandpool::poold
