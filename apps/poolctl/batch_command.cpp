// batch: a load generator through the socket. Tasks go out as pipelined submit_batch
// requests in the protocol's compact form (shared `defaults`, `payload_lens`, the payloads
// raw in one blob), so a task costs one number of JSON each way (docs/protocol.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/units/units.hpp>

#include "commands.hpp"
#include "output.hpp"

namespace sandpool::poolctl {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BatchArgs {
  std::string type, pool, payload_size = "0";
  std::string tenant;
  std::uint64_t count = 0;
  double rate = 0;  // tasks/s, 0: as fast as the service takes them
  std::size_t chunk = 2000;
  std::size_t window = 8;
  std::chrono::milliseconds retry_for{30000};
};

// While the queue is full (docs/poolctl.md, "Backpressure"): one request at a time, kPause
// after the previous reply (doubling up to kMaxPause while nothing gets in), of as many
// tasks as the previous reply accepted (at least kMinRoom), a quarter more while all get in
// (doubling would overshoot what the pool drains per round by as much as it grew).
constexpr Clock::duration kPause = std::chrono::milliseconds(2);
constexpr Clock::duration kMaxPause = std::chrono::milliseconds(50);
constexpr std::size_t kMinRoom = 16;

// What the replies said so far; shared with the client's reader thread.
struct Tally {
  Mutex mu;
  CondVar cv;
  std::size_t outstanding GUARDED_BY(mu) = 0;  // requests sent, not answered
  std::uint64_t unsent GUARDED_BY(mu) = 0;     // tasks not sent yet, or refused with queue_full
  std::uint64_t accepted GUARDED_BY(mu) = 0;
  std::uint64_t refused GUARDED_BY(mu) = 0;
  // unknown: answered `timeout`, a Redis pool's submit whose reply was lost: the task may
  // exist (docs/protocol.md); not sent again, and not counted as refused.
  std::uint64_t unknown GUARDED_BY(mu) = 0;
  std::uint64_t resubmitted GUARDED_BY(mu) = 0;
  std::size_t chunk GUARDED_BY(mu) = 0;  // tasks per request when the queue has room
  bool full GUARDED_BY(mu) = false;      // a reply refused tasks with queue_full; reset by `room`
  std::size_t room GUARDED_BY(mu) = 0;   // while full: tasks in the next request
  Clock::duration pause GUARDED_BY(mu){0};     // while full: from a reply to the next request
  Clock::time_point resume_at GUARDED_BY(mu);  // while full: no request before this
  Clock::time_point last_accept GUARDED_BY(mu);
  // Replies that refused tasks with queue_full since the last one that accepted any: giving
  // up needs two, so a retry was tried however long the first reply took.
  std::uint32_t full_replies GUARDED_BY(mu) = 0;
  std::vector<double> latency_ms GUARDED_BY(mu);  // per request, send to reply
  Status first_error GUARDED_BY(mu);              // the first refusal that is not retried
  Status last_full GUARDED_BY(mu);                // the last queue_full refusal
};

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const auto i =
      std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

void draw_bar(std::uint64_t done, std::uint64_t total, double seconds) {
  const int width = 40;
  const int filled = total == 0 ? width : static_cast<int>(done * width / total);
  std::cout << "\r[" << std::string(static_cast<std::size_t>(filled), '#')
            << std::string(static_cast<std::size_t>(width - filled), ' ') << "] " << done << "/"
            << total << "  " << static_cast<std::uint64_t>(seconds > 0 ? done / seconds : 0)
            << " tasks/s" << std::flush;
}

// queue_full (a task) and busy (a whole request over the connection's limit) mean "not
// now": the tasks go back to be sent again. Any other refusal is final.
bool retried_code(const std::string& code) { return code == "queue_full" || code == "busy"; }

void record_reply(Tally& tally, std::size_t n, Clock::time_point sent,
                  Result<WithBlob<ops::SubmitBatchReply>> r) {
  const auto now = Clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - sent).count();
  MutexLock lock(tally.mu);
  tally.latency_ms.push_back(ms);
  --tally.outstanding;
  std::uint64_t full = 0, final_refusals = 0, unknown = 0;
  if (!r) {
    if (retried_code(error_code_of(r.status()))) {
      full = n;
      tally.last_full = r.status();
    } else if (error_code_of(r.status()) == "timeout") {
      unknown = n;
      if (tally.first_error.is_ok()) tally.first_error = r.status();
    } else {
      final_refusals = n;
      if (tally.first_error.is_ok()) tally.first_error = r.status();
    }
  } else {
    // Refusals one by one (`errors`), then the tail refused as one (`refused_from`).
    auto count = [&](const ops::BatchRefusal& e, std::uint64_t tasks) {
      tally.mu.assert_held();  // run below, under the lock
      const bool retry = retried_code(e.code);
      const Status why = Status::error(retry ? Code::kQueueFull : Code::kInvalidArgument,
                                       e.code + ": " + e.message);
      if (retry) {
        full += tasks;
        tally.last_full = why;
      } else if (e.code == "timeout") {
        unknown += tasks;
        if (tally.first_error.is_ok())
          tally.first_error = Status::error(Code::kTimeout, why.message());
      } else {
        final_refusals += tasks;
        if (tally.first_error.is_ok()) tally.first_error = why;
      }
    };
    for (const ops::BatchRefusal& e : r->reply.errors) count(e, 1);
    if (const auto& tail = r->reply.refused_from) {
      count(*tail, n - std::min<std::uint64_t>(tail->index, n));
    }
  }
  full = std::min<std::uint64_t>(full, n);
  final_refusals = std::min<std::uint64_t>(final_refusals, n - full);
  unknown = std::min<std::uint64_t>(unknown, n - full - final_refusals);
  const std::uint64_t in = n - full - final_refusals - unknown;
  tally.accepted += in;
  tally.refused += final_refusals;
  tally.unknown += unknown;
  if (in > 0) {
    tally.last_accept = now;
    tally.full_replies = 0;
  }
  if (full > 0) {
    ++tally.full_replies;
    tally.unsent += full;
    tally.resubmitted += full;
    tally.room = std::max<std::size_t>(kMinRoom, in);
    tally.pause = in > 0 || !tally.full ? kPause : std::min(kMaxPause, 2 * tally.pause);
    tally.full = true;
    tally.resume_at = now + tally.pause;
  } else if (tally.full) {
    tally.room += std::max(kMinRoom, tally.room / 4);
    tally.full = tally.room < tally.chunk;
    tally.pause = kPause;
    tally.resume_at = now + kPause;
  }
  tally.cv.notify_all();
}

// Waits until a request may go out (a free slot in the window, tasks to send, any pause
// over) and returns how many tasks it carries, counted as outstanding; 0 when every task
// was answered. Sets *gave_up when the queue stayed full with nothing accepted for
// a.retry_for, and a resend was refused too.
std::size_t next_request(Tally& tally, const BatchArgs& a, bool* gave_up) EXCLUDES(tally.mu) {
  MutexLock lock(tally.mu);
  for (;;) {
    if (tally.unsent == 0) {
      if (tally.outstanding == 0) return 0;
      tally.cv.wait(tally.mu);
      continue;
    }
    if (tally.outstanding >= (tally.full ? 1 : a.window)) {
      tally.cv.wait(tally.mu);
      continue;
    }
    const auto now = Clock::now();
    if (tally.full && tally.full_replies >= 2 && now - tally.last_accept > a.retry_for) {
      *gave_up = true;
      return 0;
    }
    if (tally.full && now < tally.resume_at) {
      tally.cv.wait_until(tally.mu, tally.resume_at);
      continue;
    }
    const auto n = static_cast<std::size_t>(
        std::min<std::uint64_t>(tally.full ? tally.room : tally.chunk, tally.unsent));
    tally.unsent -= n;
    ++tally.outstanding;
    return n;
  }
}

// The run's figures: one JSON object, or two or three lines for a person.
void print_summary(const Cli& cli, const BatchArgs& a, Tally& tally, std::size_t chunk,
                   double seconds) REQUIRES(tally.mu) {
  auto& lat = tally.latency_ms;
  const double rate = seconds > 0 ? static_cast<double>(tally.accepted) / seconds : 0;
  json summary{{"tasks", a.count},
               {"accepted", tally.accepted},
               {"refused", a.count - tally.accepted - tally.unknown},
               {"unknown", tally.unknown},
               {"resubmitted", tally.resubmitted},
               {"requests", lat.size()},
               {"batch", chunk},
               {"elapsed_ms", seconds * 1000},
               {"tasks_per_s", rate},
               {"latency_ms",
                {{"p50", percentile(lat, 0.50)},
                 {"p90", percentile(lat, 0.90)},
                 {"p99", percentile(lat, 0.99)},
                 {"max", lat.empty() ? 0.0 : *std::max_element(lat.begin(), lat.end())}}}};
  if (cli.json) {
    print_json(std::cout, summary);
  } else {
    const json& l = summary["latency_ms"];
    std::cout << tally.accepted << " of " << a.count << " tasks accepted in "
              << human_duration_ms(seconds * 1000) << ": " << static_cast<std::uint64_t>(rate)
              << " tasks/s\n"
              << "submit latency per request of up to " << chunk << " tasks: p50 "
              << human_duration_ms(l["p50"]) << "  p90 " << human_duration_ms(l["p90"]) << "  p99 "
              << human_duration_ms(l["p99"]) << "  max " << human_duration_ms(l["max"]) << "\n";
    if (tally.resubmitted > 0) {
      std::cout << tally.resubmitted << " submissions found the queue full and were sent again\n";
    }
    if (tally.unknown > 0) {
      std::cout << tally.unknown
                << " tasks' outcome unknown: their replies were lost, they may have been "
                   "accepted\n";
    }
  }
}

int run_batch(const Cli& cli, const BatchArgs& a, std::uint64_t payload_size) {
  auto client = connect(cli);
  if (!client) return kExitUnreachable;
  ops::SubmitArgs defaults;
  defaults.type = a.type;
  defaults.pool = a.pool;
  defaults.options.tenant = a.tenant;
  // A request stays well under the frame limit (16 MiB) whatever the payload size.
  const std::size_t chunk = std::max<std::size_t>(
      1, std::min<std::size_t>(a.chunk, (15u << 20) / std::max<std::uint64_t>(1, payload_size)));
  const std::string full_blob(chunk * payload_size, 'x');
  const bool bar = !cli.json && ::isatty(STDOUT_FILENO) == 1;
  Tally tally;
  const auto start = Clock::now();
  {
    MutexLock lock(tally.mu);
    tally.unsent = a.count;
    tally.chunk = chunk;
    tally.last_accept = start;
  }
  auto last_draw = start;
  std::uint64_t sent = 0;  // task submissions, resubmissions included (--rate paces these)
  Status send_error;
  bool gave_up = false;
  for (;;) {
    if (a.rate > 0) {  // pace: the tasks sent so far may not exceed rate * elapsed
      const auto due =
          start + std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(static_cast<double>(sent) / a.rate));
      std::this_thread::sleep_until(due);
    }
    const std::size_t n = next_request(tally, a, &gave_up);
    if (n == 0) break;
    ops::SubmitBatchArgs args{std::vector<std::uint64_t>(n, payload_size), defaults, {}, {}};
    const auto sent_at = Clock::now();
    auto id = client->call_async<ops::SubmitBatch>(
        args, full_blob.substr(0, n * payload_size),
        [&tally, n, sent_at](Result<WithBlob<ops::SubmitBatchReply>> r) {
          record_reply(tally, n, sent_at, std::move(r));
        });
    if (!id) {
      send_error = id.status();
      MutexLock lock(tally.mu);
      --tally.outstanding;
      break;
    }
    sent += n;
    if (bar && Clock::now() - last_draw > std::chrono::milliseconds(100)) {
      last_draw = Clock::now();
      MutexLock lock(tally.mu);
      draw_bar(tally.accepted + tally.refused + tally.unknown, a.count,
               std::chrono::duration<double>(last_draw - start).count());
    }
  }
  MutexLock lock(tally.mu);
  while (tally.outstanding != 0) tally.cv.wait(tally.mu);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (bar) {
    draw_bar(tally.accepted + tally.refused + tally.unknown, a.count, seconds);
    std::cout << "\n";
  }
  print_summary(cli, a, tally, chunk, seconds);
  if (!send_error.is_ok()) return fail("batch", send_error);
  if (!tally.first_error.is_ok()) return fail("batch", tally.first_error);
  if (gave_up) {
    return fail("batch",
                Status::error(Code::kQueueFull,
                              tally.last_full.message() + " (nothing accepted for " +
                                  human_duration_ms(static_cast<double>(a.retry_for.count())) +
                                  ", gave up)"));
  }
  return tally.accepted == a.count ? kExitOk : kExitFailed;
}

}  // namespace

void add_batch_command(CLI::App& app, Cli& cli) {
  auto a = std::make_shared<BatchArgs>();
  auto* sub = app.add_subcommand("batch", "load generator: submit N tasks, report throughput");
  sub->add_option("TYPE", a->type, "task type")->required();
  sub->add_option("N", a->count, "how many tasks")->required();
  sub->add_option("--pool", a->pool, "pool (default: routed by type)");
  sub->add_option("--payload-size", a->payload_size, "bytes per payload (64, 1KiB; default 0)");
  sub->add_option("--tenant", a->tenant, "the tenant every task is submitted for");
  sub->add_option("--rate", a->rate, "tasks per second (default: as fast as possible)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--batch", a->chunk, "tasks per submit_batch request (default 2000)")
      ->check(CLI::Range(1, 100000));
  sub->add_option("--window", a->window, "submit_batch requests in flight (default 8)")
      ->check(CLI::Range(1, 1024));
  auto retry_for = std::make_shared<std::string>("30s");
  sub->add_option("--retry-for", *retry_for,
                  "give up when the queue stays full with nothing accepted this long "
                  "(default 30s)");
  sub->callback([&cli, a, retry_for] {
    a->retry_for = duration_arg("--retry-for", *retry_for);
    auto size = parse_size(a->payload_size);
    if (!size) throw CLI::ValidationError("--payload-size", size.status().message());
    cli.action = [&cli, a, s = *size] { return run_batch(cli, *a, s); };
  });
}

}  // namespace sandpool::poolctl
