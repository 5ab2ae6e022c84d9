// Installing a signal handler that must run whatever the process did before: the worker
// host's reporters (the seccomp trap's SIGSYS, the backtrace request) both need it.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <string>
#include <string_view>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/base/status.hpp>

namespace sandpool {

using SigInfoHandler = void (*)(int, siginfo_t*, void*);

// Installs `handler` for `sig` (SA_SIGINFO plus `extra_flags`, every signal blocked while it
// runs), then unblocks `sig` in the calling thread: code that ran earlier (a plugin's init)
// may have blocked it, and a blocked signal never reaches the handler (a blocked trap
// signal such as SIGSYS even kills at once). `what` names the signal in errors. Returns the
// failure of sigaction or pthread_sigmask, naming the call: "sigaction(<what>)".
inline Status install_unblocked_handler(int sig, SigInfoHandler handler, int extra_flags,
                                        std::string_view what) {
  struct sigaction sa {};
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | extra_flags;
  sigfillset(&sa.sa_mask);
  const std::string name(what);
  auto r = posix_call("sigaction(" + name + ")", [&] { return ::sigaction(sig, &sa, nullptr); });
  if (!r) return r.status();
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  return posix_call_rc("pthread_sigmask(SIG_UNBLOCK, " + name + ")",
                       [&] { return ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr); });
}

}  // namespace sandpool
