// One way to name sandpool's threads, so that `top -H`, `ps -L`, perf and gdb tell them
// apart: "sp-" and what the thread does ("sp-hub", "sp-loop:<pool>"). docs/architecture.md
// lists every name.
#pragma once

#include <pthread.h>

#include <string>
#include <string_view>

namespace sandpool {

// The kernel keeps 15 bytes of a thread's name (TASK_COMM_LEN 16 with the NUL); a longer
// one makes pthread_setname_np fail with ERANGE, so it is cut to fit.
inline constexpr std::size_t kThreadNameMax = 15;

// Names `thread` (pthread_self() for the caller, or a running std::thread's native_handle():
// named before it returns, whatever the thread is doing), cut to kThreadNameMax bytes. A
// failure leaves the inherited name: the thread works the same, so it is not reported.
inline void name_thread(pthread_t thread, std::string_view name) {
  const std::string cut(name.substr(0, kThreadNameMax));
  (void)::pthread_setname_np(thread, cut.c_str());
}

}  // namespace sandpool
