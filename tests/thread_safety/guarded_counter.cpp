// What tests/thread_safety/thread_safety_bites.sh compiles: a counter whose field is guarded
// by a Mutex. Without SP_BREAK it keeps the lock rule and must compile; with SP_BREAK=<case>
// it breaks the rule one way, and the thread-safety analysis must refuse it.
#include <sandpool/base/thread_annotations.hpp>

namespace {

class GuardedCounter {
 public:
  void add() EXCLUDES(mu_) {
    sandpool::MutexLock lock(mu_);
    add_locked();
  }
  int read() EXCLUDES(mu_) {
    sandpool::MutexLock lock(mu_);
    while (n_ == 0) cv_.wait(mu_);
    lock.unlock();  // released around a call, as the service does
    int before = 0;
    lock.lock();
    return n_ + before;
  }
#if defined(SP_BREAK_unlocked_read)
  int peek() { return n_; }  // reads n_ without mu_
#elif defined(SP_BREAK_requires_unheld)
  void bump() { add_locked(); }  // calls a REQUIRES(mu_) function without mu_
#elif defined(SP_BREAK_excludes_held)
  void twice() {
    sandpool::MutexLock lock(mu_);
    add();  // add() takes mu_ itself: a deadlock
  }
#elif defined(SP_BREAK_wait_unheld)
  void sleep() { cv_.wait(mu_); }  // waits without holding mu_
#elif defined(SP_BREAK_read_after_unlock)
  int late() {
    sandpool::MutexLock lock(mu_);
    lock.unlock();
    return n_;  // read after the scope released mu_
  }
#endif

 private:
  void add_locked() REQUIRES(mu_) {
    ++n_;
    cv_.notify_all();
  }

  sandpool::Mutex mu_;
  sandpool::CondVar cv_;
  int n_ GUARDED_BY(mu_) = 0;
};

}  // namespace

int main() {
  GuardedCounter c;
  c.add();
  return c.read() == 1 ? 0 : 1;
}
