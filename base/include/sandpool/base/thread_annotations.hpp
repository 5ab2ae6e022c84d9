// Locks the compiler checks: Clang's thread-safety analysis (-Wthread-safety), as leveldb's
// port/thread_annotations.h and abseil's base/thread_annotations.h use it. A field says which
// mutex guards it (GUARDED_BY), a function which mutex it needs held (REQUIRES) or must not
// hold (EXCLUDES, for one that takes it), and clang refuses code that breaks the rule. The
// macros expand to nothing outside clang (GCC builds the product; the clang trees of `make
// check` run the analysis, docs/development.md "Thread-safety annotations").
//
// libstdc++'s std::mutex carries no capability attribute, so GUARDED_BY(a std::mutex) is not
// checked: guarded state uses Mutex, MutexLock and CondVar below, thin wrappers of the std
// types that clang can see.
//
// Thread-safety: Mutex and CondVar as their std counterparts; a MutexLock belongs to the thread
// that made it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define SP_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SP_THREAD_ANNOTATION(x)
#endif

// On a class: its objects are a capability (a lock) named `x` in the checker's messages.
#define CAPABILITY(x) SP_THREAD_ANNOTATION(capability(x))
// On a class: an RAII holder of a capability (acquired by its constructor, released by its
// destructor).
#define SCOPED_CAPABILITY SP_THREAD_ANNOTATION(scoped_lockable)
// On a field: read or written only with `x` held.
#define GUARDED_BY(x) SP_THREAD_ANNOTATION(guarded_by(x))
// On a pointer field: what it points to is read or written only with `x` held.
#define PT_GUARDED_BY(x) SP_THREAD_ANNOTATION(pt_guarded_by(x))
// On a mutex field: taken only after (before) the named ones, when both are held.
#define ACQUIRED_AFTER(...) SP_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) SP_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
// On a function: called only with the capabilities held (exclusively, or shared).
#define REQUIRES(...) SP_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) SP_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// On a function: acquires (releases) the capabilities, or `this` when none is named.
#define ACQUIRE(...) SP_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) SP_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// On a function: acquires the capabilities iff it returns `x`.
#define TRY_ACQUIRE(...) SP_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// On a function: called only without the capabilities held (it takes them itself; a leaf
// lock taken twice deadlocks).
#define EXCLUDES(...) SP_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: asserts at run time that the capability is held; the checker believes it.
#define ASSERT_CAPABILITY(x) SP_THREAD_ANNOTATION(assert_capability(x))
// On a function: returns the capability `x` (an accessor of a private mutex).
#define RETURN_CAPABILITY(x) SP_THREAD_ANNOTATION(lock_returned(x))
// On a function: not checked. For the few functions whose locking the checker cannot follow
// (a lock handed between functions); a comment says why it is right.
#define NO_THREAD_SAFETY_ANALYSIS SP_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace sandpool {

// A std::mutex clang can see: lock it with MutexLock (or lock()/unlock() in pairs).
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the checker that the calling thread holds this mutex (a callback run under it).
  // Not checked at run time: std::mutex cannot tell who holds it.
  void assert_held() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope, like std::unique_lock: unlock() and lock() let a scope release
// the mutex around a call (the lock rule: no lock across a call that may wait) and take it
// again; the destructor releases it iff held.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() RELEASE() {
    held_ = false;
    mu_.unlock();
  }
  void lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A std::condition_variable waited on with a Mutex held. Each wait releases the mutex while it
// sleeps and holds it again when it returns (spuriously too: wait in a loop on the condition,
// which, unlike a predicate lambda, the checker sees read under the mutex).
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lk(mu.mu_, std::adopt_lock);
    cv_.wait(lk);
    lk.release();  // still held: the caller's
  }
  // Returns std::cv_status::timeout iff `deadline` passed. No wait_for(): a loop waits until
  // one deadline computed before it, so that wake-ups do not stretch the wait.
  template <class Clock, class Duration>
  std::cv_status wait_until(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      REQUIRES(mu) {
    std::unique_lock<std::mutex> lk(mu.mu_, std::adopt_lock);
    std::cv_status s = cv_.wait_until(lk, deadline);
    lk.release();
    return s;
  }
  void notify_one() noexcept { cv_.notify_one(); }
  void notify_all() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace sandpool
