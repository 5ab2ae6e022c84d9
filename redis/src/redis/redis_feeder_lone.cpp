// RedisFeeder's lone task (redis_feeder.hpp): a task read alone while the node holds nothing
// else goes to an idle worker from the reader's thread (Pool::submit's direct hand-off), and
// the reader reads its result itself (Ticket::read_here) and writes its end on its own
// connection: two cross-thread hand-offs (reader -> worker -> reader) where the batch path
// has four (reader -> loop -> worker -> loop -> writer), each 12-60 µs on this VM.
//
// Nothing else changes: the task's end is the batch path's end (the same Ended, written by
// the same write_ends, fenced the same way), only written by another thread. Whichever of
// the reader and the writer writes it is decided once, under Shared::mu, by the lone task's
// on_done: armed (the reader still waits), the end is the reader's (lone_end); else it is
// queued for the writer as any other. So an end is written once, by one of them.
#include <sandpool/redis/redis_feeder.hpp>

namespace sandpool::redis {

bool RedisFeeder::arm_lone() {
  MutexLock lk(sh_->mu);
  // Only this task held, no end unwritten (the writer idle: nothing to write before it),
  // short tasks (the reader spins for the end), no rate limit or cap (their leases and
  // throttles keep the batch path's way), and the feeder not stopping.
  if (sh_->dead || sh_->stopping || !sh_->reading || sh_->held.size() != 1) return false;
  if (!sh_->ends.empty() || sh_->writing != 0 || sh_->lone_busy()) return false;
  if (sh_->mean_run_ms >= kLoneRunMs || sh_->limits.any()) return false;
  sh_->lone_armed = true;
  return true;
}

void RedisFeeder::finish_lone(Connection& c, const std::optional<Ticket>& ticket) {
  if (ticket) (void)ticket->read_here(kLoneWait);
  std::vector<Ended> end;
  {
    MutexLock lk(sh_->mu);
    // Disarmed: an end still to come (a task that runs past kLoneWait, or one the pool's loop
    // ends after that: its worker's death, its timeout) is queued for the writer.
    sh_->lone_armed = false;
    if (sh_->lone_end && !sh_->dead) {
      end.push_back(std::move(*sh_->lone_end));
      sh_->lone_writing = true;
    }
    sh_->lone_end.reset();
    if (end.empty()) {
      if (sh_->stopping) sh_->ends_cv.notify_all();  // the writer may stop now
      return;
    }
  }
  const Status s = write_ends(c, end, true);
  note(s);
  MutexLock lk(sh_->mu);
  if (s) {
    ++sh_->stats.lone_ends;
  } else if (!sh_->dead) {
    // Redis away or the connection broken: the writer retries it (and keeps it at a stop)
    // as any end; its entry stays this node's meanwhile.
    sh_->lone_writing = false;
    sh_->push_end(std::move(end.front()));
    return;
  }
  sh_->lone_writing = false;
  if (sh_->stopping) sh_->ends_cv.notify_all();
}

}  // namespace sandpool::redis
