// poold: the sandpool service. `poold --config F --check` validates F; `poold --config F`
// runs in the foreground (docs/operations.md): signals, logger, the state-dir lock, the
// dead-letter store and pools (Service), the control socket, the HTTP listener (metrics,
// API, dashboard),
// sd_notify READY and watchdog pings; SIGHUP reloads; SIGTERM/SIGINT or `shutdown` stop.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <sandpool/base/unique_fd.hpp>
#include <sandpool/config/config.hpp>
#include <sandpool/control/control.hpp>
#include <sandpool/metrics/metrics.hpp>

#include <sandpool/http/http_service.hpp>
#include <sandpool/service/control_options.hpp>
#include <sandpool/service/host_check.hpp>
#include <sandpool/service/instance_lock.hpp>
#include <sandpool/service/service.hpp>
#include <sandpool/service/service_logger.hpp>
#include <sandpool/service/signal_watcher.hpp>
#include <sandpool/service/systemd_notifier.hpp>
#include <sandpool/service/watchdog_gate.hpp>

#ifndef SANDPOOL_VERSION
#define SANDPOOL_VERSION "dev"
#endif

namespace sp = sandpool;
namespace pd = sandpool::poold;

namespace {

// What the main loop was asked to do by the control socket (a shutdown request).
struct Wakeup {
  sp::UniqueFd fd{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  std::atomic<bool> shutdown{false};
  std::atomic<std::int64_t> timeout_ms{-1};  // -1: the config's
  void request(std::optional<std::chrono::milliseconds> timeout) {
    timeout_ms.store(timeout ? timeout->count() : -1);
    shutdown.store(true);
    const std::uint64_t one = 1;
    (void)!::write(fd.get(), &one, sizeof one);
  }
};

// Samples the threads that take items of work, for the watchdog gate and /healthz.
using BusyThreads = std::function<std::vector<pd::ThreadBusy>()>;

// Pings systemd's watchdog iff no thread is stuck; says in the log (and in STATUS=) when
// pings stop and when they resume.
void feed_watchdog(pd::SystemdNotifier& notifier, const pd::WatchdogGate& gate,
                   const std::vector<pd::ThreadBusy>& threads, std::string* withheld,
                   spdlog::logger& log) {
  auto stuck = gate.stuck(threads);
  if (!stuck) {
    if (!withheld->empty()) {
      log.info("watchdog: resumed, {} finished its item of work", *withheld);
      (void)notifier.status("serving");
      withheld->clear();
    }
    (void)notifier.watchdog();
    return;
  }
  if (*withheld != stuck->name) {
    const std::string why = gate.describe(*stuck);
    log.error("watchdog: withheld: {}", why);
    (void)notifier.status("stuck: " + why);
    *withheld = stuck->name;
  }
}

// The HTTP listener: /metrics, /healthz, the API and the dashboard. /healthz answers 503
// while poold stops, while a thread that takes items of work is stuck in one (named), or
// while a pool is unhealthy.
sp::Result<std::unique_ptr<sp::http::HttpService>> start_http(const sp::Config& config,
                                                              pd::Service* svc,
                                                              const pd::WatchdogGate& gate,
                                                              BusyThreads threads) {
  sp::ServiceInfo info{SANDPOOL_VERSION, 0};
  info.start_time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  return sp::http::HttpService::start(
      config.service.http, *svc,
      [svc, info] {
        sp::ServiceInfo now = info;
        now.dead_letter_store = svc->dead_letter_stats();
        now.journal = svc->journal_stats();
        now.redis = svc->redis_figures();
        for (const sp::ScheduleState& s : svc->schedules()) {
          // Paused on every node (a Redis pool's): no slot of it fires, as when paused here.
          now.schedules.push_back(
              {s.spec.name, s.fired, s.skipped, s.cluster_paused ? std::nullopt : s.next_s});
        }
        return sp::render_prometheus(svc->metrics(), now);
      },
      [svc, gate, threads]() -> std::optional<std::string> {
        if (svc->stopping()) return "shutting down";
        // Before the pools' states: a stuck loop may not answer a query.
        if (auto stuck = gate.stuck(threads())) return gate.describe(*stuck);
        return svc->health();
      });
}

// The main thread's loop: signals, a shutdown request over the socket, watchdog pings.
// Returns when poold should stop, with the shutdown timeout the request asked for, if any.
std::optional<std::chrono::milliseconds> serve(const std::string& config_path,
                                               pd::SignalWatcher& signals, Wakeup& wakeup,
                                               pd::SystemdNotifier& notifier, pd::Service* svc,
                                               const pd::WatchdogGate& gate,
                                               const BusyThreads& threads, spdlog::logger& log) {
  // Checked every quarter of WatchdogSec: a thread that recovers is pinged for well before
  // systemd's deadline, a stuck one is caught within a quarter past the gate's bound.
  const auto watchdog = notifier.watchdog_interval();
  const int poll_ms = watchdog.count() > 0
                          ? static_cast<int>(std::max<std::int64_t>(1, watchdog.count() / 4000))
                          : -1;
  std::string withheld;  // the stuck thread while pings are withheld
  while (true) {
    if (watchdog.count() > 0) feed_watchdog(notifier, gate, threads(), &withheld, log);
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {wakeup.fd.get(), POLLIN, 0}};
    if (::poll(fds, 2, poll_ms) < 0 && errno != EINTR) {
      log.critical("poll: {}", std::strerror(errno));
      return std::nullopt;
    }
    if (wakeup.shutdown.load()) {
      log.info("shutdown requested over the control socket");
      if (wakeup.timeout_ms.load() < 0) return std::nullopt;
      return std::chrono::milliseconds(wakeup.timeout_ms.load());
    }
    auto sig = signals.wait(std::chrono::milliseconds(0));
    if (!sig || !*sig) continue;
    if (**sig == SIGHUP) {
      log.info("SIGHUP: reloading {}", config_path);
      (void)notifier.reloading();
      // On the job thread, like a `reload` request; the main loop keeps watching meanwhile.
      svc->reload_async([&notifier](const auto&) { (void)notifier.ready("reloaded"); });
      continue;
    }
    log.info("signal {}: shutting down", **sig);
    return std::nullopt;
  }
}

int run(sp::Config config, const std::string& config_path, pd::SignalWatcher& signals) {
  auto log = pd::make_service_logger(pd::to_spdlog_level(config.service.log_level),
                                     config.service.log_format);
  spdlog::set_default_logger(log);
  for (const std::string& w : config.warnings) log->warn("{}", w);
  pd::make_paths_absolute(config);
  auto lock = pd::InstanceLock::acquire(config.service.state_dir);
  if (!lock) {
    log->critical("{}", lock.status().message());
    return 1;
  }
  auto control_opts = pd::control_options(config.service);
  if (!control_opts) {
    log->critical("{}", control_opts.status().message());
    return 1;
  }
  for (const sp::PoolConfig& pc : config.pools) {
    control_opts->max_frame =
        std::max<std::size_t>(control_opts->max_frame, pc.max_payload + 65536);
  }
  pd::SystemdNotifier notifier;
  Wakeup wakeup;
  auto service = pd::Service::start(config, config_path, log,
                                    [&wakeup](auto timeout) { wakeup.request(timeout); });
  if (!service) {
    log->critical("cannot start: {}", service.status().message());
    return 1;
  }
  auto control = sp::ControlServer::start(*control_opts, **service);
  if (!control) {
    log->critical("control socket {}: {}", control_opts->path, control.status().message());
    return 1;
  }
  // WATCHDOG=1 only while no thread that takes items of work has been inside one for
  // longer than half of WatchdogSec; /healthz names the stuck thread.
  const pd::WatchdogGate gate = pd::WatchdogGate::for_watchdog(notifier.watchdog_interval());
  pd::Service* svc = service->get();
  sp::ControlServer* ctl = control->get();
  const BusyThreads threads = [svc, ctl] {
    auto t = svc->busy_threads();
    t.push_back({"sp-control", ctl->busy_for_ns()});
    return t;
  };
  auto http = start_http(config, svc, gate, threads);
  if (!http) {
    log->critical("http: {}", http.status().message());
    return 1;
  }
  svc->set_http_address((*http)->address());
  log->info("poold ready pid={} socket={} http={} pools={}{}", ::getpid(), control_opts->path,
            (*http)->address(), config.pools.size(),
            (*http)->read_only() ? " (http read-only: no admin token)" : "");
  (void)notifier.ready("serving " + std::to_string(config.pools.size()) + " pools");

  const auto timeout = serve(config_path, signals, wakeup, notifier, svc, gate, threads, *log);
  (void)notifier.stopping("shutting down");
  (*service)->shutdown(timeout.value_or(config.service.shutdown_timeout));
  (*http)->stop();
  (*control)->stop();
  control->reset();
  service->reset();
  log->info("poold stopped");
  log->flush();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // First, before any thread: block the service signals so only the signalfd sees them.
  auto signals = pd::SignalWatcher::create();
  if (!signals) {
    std::fprintf(stderr, "poold: %s\n", signals.status().message().c_str());
    return 1;
  }
  CLI::App app{"poold: the sandpool service"};
  std::string config_path;
  bool check = false;
  app.add_option("--config,-c", config_path, "the YAML config file")->required();
  app.add_flag("--check", check, "validate the config and exit (0: valid, 1: errors printed)");
  CLI11_PARSE(app, argc, argv);

  auto config = sp::load_config(config_path);
  if (!config) {
    std::fprintf(stderr, "%s\n", config.status().message().c_str());
    return 1;
  }
  if (check) {
    // The file is valid; now what it names on this host (users, groups, plugins).
    const std::vector<std::string> problems = pd::check_host(*config);
    for (const std::string& p : problems)
      std::fprintf(stderr, "%s: %s\n", config_path.c_str(), p.c_str());
    if (!problems.empty()) return 1;
    std::printf("%s: ok (%zu pools)\n", config_path.c_str(), config->pools.size());
    return 0;
  }
  return run(std::move(config).value(), config_path, *signals);
}
