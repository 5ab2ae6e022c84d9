// batch: a load generator through the socket. Tasks go out as pipelined submit_batch
// requests in the protocol's compact form (shared `defaults`, `payload_lens`, the payloads
// raw in one blob), so a task costs one number of JSON each way (docs/protocol.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <sandpool/units.hpp>

#include "commands.hpp"
#include "output.hpp"

namespace sandpool::poolctl {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BatchArgs {
  std::string type, pool, payload_size = "0";
  std::uint64_t count = 0;
  double rate = 0;  // tasks/s, 0: as fast as the service takes them
  std::size_t chunk = 2000;
  std::size_t window = 8;
};

// What the replies said so far; shared with the client's reader thread.
struct Tally {
  std::mutex mu;
  std::condition_variable cv;
  std::size_t outstanding = 0;
  std::uint64_t accepted = 0, refused = 0;
  std::vector<double> latency_ms;  // per request, send to reply
  Status first_error;
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

void record_reply(Tally& tally, std::size_t n, Clock::time_point sent, Result<Reply> r) {
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - sent).count();
  std::lock_guard lock(tally.mu);
  tally.latency_ms.push_back(ms);
  --tally.outstanding;
  if (!r) {
    tally.refused += n;
    if (tally.first_error.is_ok()) tally.first_error = r.status();
  } else {
    const json& errors = r->body.contains("errors") ? r->body["errors"] : json::array();
    tally.refused += errors.size();
    tally.accepted += n - std::min(n, errors.size());
    if (!errors.empty() && tally.first_error.is_ok()) {
      tally.first_error =
          Status::error(Code::kQueueFull, errors[0].value("code", std::string()) + ": " +
                                              errors[0].value("message", std::string()));
    }
  }
  tally.cv.notify_all();
}

int run_batch(const Cli& cli, const BatchArgs& a, std::uint64_t payload_size) {
  auto client = connect(cli);
  if (!client) return kExitUnreachable;
  json defaults{{"type", a.type}};
  if (!a.pool.empty()) defaults["pool"] = a.pool;
  // A request stays well under the frame limit (16 MiB) whatever the payload size.
  const std::size_t chunk = std::max<std::size_t>(
      1, std::min<std::size_t>(a.chunk, (15u << 20) / std::max<std::uint64_t>(1, payload_size)));
  const std::string full_blob(chunk * payload_size, 'x');
  const bool bar = !cli.json && ::isatty(STDOUT_FILENO) == 1;
  Tally tally;
  const auto start = Clock::now();
  auto last_draw = start;
  std::uint64_t sent = 0;
  Status send_error;
  while (sent < a.count) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, a.count - sent));
    if (a.rate > 0) {  // pace: the tasks sent so far may not exceed rate * elapsed
      const auto due =
          start + std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(static_cast<double>(sent) / a.rate));
      std::this_thread::sleep_until(due);
    }
    {
      std::unique_lock lock(tally.mu);
      tally.cv.wait(lock, [&] { return tally.outstanding < a.window; });
      ++tally.outstanding;
    }
    json args{{"defaults", defaults},
              {"payload_lens", json(std::vector<std::uint64_t>(n, payload_size))}};
    const auto sent_at = Clock::now();
    auto id = client->start(
        "submit_batch", std::move(args), full_blob.substr(0, n * payload_size), {},
        [&tally, n, sent_at](Result<Reply> r) { record_reply(tally, n, sent_at, std::move(r)); });
    if (!id) {
      send_error = id.status();
      std::lock_guard lock(tally.mu);
      --tally.outstanding;
      break;
    }
    sent += n;
    if (bar && Clock::now() - last_draw > std::chrono::milliseconds(100)) {
      last_draw = Clock::now();
      std::lock_guard lock(tally.mu);
      draw_bar(tally.accepted + tally.refused, a.count,
               std::chrono::duration<double>(last_draw - start).count());
    }
  }
  std::unique_lock lock(tally.mu);
  tally.cv.wait(lock, [&] { return tally.outstanding == 0; });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (bar) {
    draw_bar(tally.accepted + tally.refused, a.count, seconds);
    std::cout << "\n";
  }
  auto& lat = tally.latency_ms;
  const double rate = seconds > 0 ? static_cast<double>(tally.accepted) / seconds : 0;
  json summary{{"tasks", a.count},
               {"accepted", tally.accepted},
               {"refused", a.count - tally.accepted},
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
  }
  if (!send_error.is_ok()) return fail("batch", send_error);
  if (!tally.first_error.is_ok()) return fail("batch", tally.first_error);
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
  sub->add_option("--rate", a->rate, "tasks per second (default: as fast as possible)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--batch", a->chunk, "tasks per submit_batch request (default 2000)")
      ->check(CLI::Range(1, 100000));
  sub->add_option("--window", a->window, "submit_batch requests in flight (default 8)")
      ->check(CLI::Range(1, 1024));
  sub->callback([&cli, a] {
    auto size = parse_size(a->payload_size);
    if (!size) throw CLI::ValidationError("--payload-size", size.status().message());
    cli.action = [&cli, a, s = *size] { return run_batch(cli, *a, s); };
  });
}

}  // namespace sandpool::poolctl
