// submit: one task, its id printed, or with --wait its progress and then its outcome.
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "output.hpp"

namespace sandpool::poolctl {
namespace {

using nlohmann::json;

struct SubmitArgs {
  SubmitRequest request;
  std::string payload_arg;  // PAYLOAD, or "-" for stdin
  std::string file;
  bool wait = false;
  std::string wait_timeout;
  std::string timeout;
  std::optional<std::uint32_t> retries;
  std::string delay;
  std::string not_before;
};

// --not-before: an ISO 8601 UTC time (2026-11-27T18:00:00Z, the Z optional) or @SECONDS
// since the epoch; returns milliseconds since the epoch.
std::int64_t time_arg(const std::string& name, const std::string& text) {
  if (text.size() > 1 && text[0] == '@') {
    std::size_t used = 0;
    long long seconds = -1;
    try {
      seconds = std::stoll(text.substr(1), &used);
    } catch (const std::exception&) {
    }
    if (used == text.size() - 1 && seconds >= 0 &&
        seconds <= std::numeric_limits<std::int64_t>::max() / 1000) {
      return seconds * 1000;
    }
  } else {
    std::tm tm{};
    const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    if (end != nullptr && (*end == '\0' || (end[0] == 'Z' && end[1] == '\0'))) {
      return static_cast<std::int64_t>(::timegm(&tm)) * 1000;
    }
  }
  throw CLI::ValidationError(name,
                             "expected a UTC time like 2026-11-27T18:00:00Z or @SECONDS "
                             "since the epoch, got " +
                                 text);
}

// The payload: PAYLOAD, the contents of --file, or stdin for "-".
std::string read_payload(const SubmitArgs& a) {
  if (!a.file.empty() && !a.payload_arg.empty())
    throw CLI::ValidationError("--file", "give either PAYLOAD or --file, not both");
  if (!a.file.empty()) {
    std::ifstream in(a.file, std::ios::binary);
    if (!in) throw CLI::ValidationError("--file", "cannot read " + a.file);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  if (a.payload_arg == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  return a.payload_arg;
}

int run_submit(const Cli& cli, const SubmitArgs& a) {
  auto client = connect(cli);
  if (!client) return kExitUnreachable;
  if (!a.wait) {
    auto s = client->submit(a.request);
    if (!s) return fail("submit", s.status());
    if (cli.json) {
      print_json(std::cout, json{{"id", s->id}, {"existing", s->existing}});
    } else {
      std::cout << s->id << (s->existing ? " (existing task)" : "") << "\n";
    }
    return kExitOk;
  }
  auto progress = [&cli](std::uint64_t id, const std::string& text) {
    if (cli.json) {
      print_json(std::cout, json{{"event", "progress"}, {"id", id}, {"progress", text}});
    } else {
      std::cout << "progress " << id << ": " << text << "\n";
    }
    std::cout.flush();
  };
  // Survives a restart of poold: reconnects and waits on the task's id (docs/journal.md).
  Client::WaitPolicy policy;
  if (!a.wait_timeout.empty()) policy.wait_timeout = duration_arg("--wait-timeout", a.wait_timeout);
  auto t = client->submit_wait(a.request, progress, policy);
  if (!t) return fail("submit", t.status());
  if (t->account.result_dropped) {
    std::cerr << "poolctl: task " << t->id
              << " ran earlier under this idempotency key; its result is no longer kept\n";
  }
  return print_outcome(cli, *t);
}

}  // namespace

void add_submit_command(CLI::App& app, Cli& cli) {
  auto a = std::make_shared<SubmitArgs>();
  auto* sub = app.add_subcommand("submit", "submit one task; print its id, or wait for it");
  sub->add_option("TYPE", a->request.type, "task type")->required();
  sub->add_option("PAYLOAD", a->payload_arg, "the payload text, or - to read stdin");
  sub->add_option("--file", a->file, "read the payload from this file");
  sub->add_option("--pool", a->request.pool, "pool (default: routed by type)");
  sub->add_flag("--wait", a->wait,
                "print progress, then the result; exit 1 unless completed; survives a restart "
                "of poold (reconnects and waits on the task's id)");
  sub->add_option("--wait-timeout", a->wait_timeout,
                  "with --wait: give up waiting after this long (30s, 500ms), restarts "
                  "included; the task keeps running");
  sub->add_option("--priority", a->request.options.priority, "higher runs first (default 0)");
  sub->add_option("--timeout", a->timeout, "per-attempt timeout (30s, 500ms)");
  sub->add_option("--retries", a->retries, "retries after the first attempt");
  sub->add_option("--key", a->request.options.key, "affinity key");
  sub->add_option("--idempotency-key", a->request.options.idempotency_key,
                  "a resubmit with the same key returns the existing task");
  sub->add_option("--request-token", a->request.request_token,
                  "this request's name: run the command again with it after an 'outcome "
                  "unknown' timeout and it gets the task the first try made (protocol.md)");
  sub->add_option("--tenant", a->request.options.tenant,
                  "the tenant it is for: fair queueing between tenants (default: none)");
  auto* delay =
      sub->add_option("--delay", a->delay, "scheduled: queue it only after this long (90s, 10m)");
  sub->add_option("--not-before", a->not_before,
                  "scheduled: queue it only from this UTC time (2026-11-27T18:00:00Z, or "
                  "@SECONDS since the epoch)")
      ->excludes(delay);
  sub->callback([&cli, a] {
    a->request.payload = read_payload(*a);
    if (!a->timeout.empty()) {
      // The lower bound here; poold checks the upper one (the pool's task_defaults.max_timeout).
      a->request.options.timeout = duration_arg("--timeout", a->timeout);
      if (a->request.options.timeout->count() < 1) {
        throw CLI::ValidationError("--timeout",
                                   "a task's timeout is at least 1ms, got " + a->timeout);
      }
    }
    a->request.options.retries = a->retries;
    if (!a->delay.empty()) a->request.delay = duration_arg("--delay", a->delay);
    if (!a->not_before.empty() &&
        !a->request.options.set_not_before_ms(time_arg("--not-before", a->not_before))) {
      throw CLI::ValidationError("--not-before", "beyond the clock's range: " + a->not_before);
    }
    cli.action = [&cli, a] { return run_submit(cli, *a); };
  });
}

}  // namespace sandpool::poolctl
