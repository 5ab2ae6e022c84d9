// Raw baselines: what two processes get out of the very ring type sandpool uses
// (ipc::RingProducer / RingConsumer in an ipc::SharedRegion), with nothing of the pool on
// top. The peer is a fork()ed child sharing the region's MAP_SHARED mapping.
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <sandpool/ipc/region.hpp>
#include <sandpool/ipc/ring.hpp>
#include <sandpool/ipc/wake.hpp>

#include "bench.hpp"

namespace sandpool::bench {
namespace {

using ipc::RecordHeader;
using ipc::RingConsumer;
using ipc::RingControl;
using ipc::RingProducer;
using ipc::RingStatus;

constexpr std::uint16_t kData = 1;
constexpr std::uint16_t kStop = 3;
constexpr std::int64_t kSecondNs = 1000000000;

inline void cpu_relax() { __builtin_ia32_pause(); }

// The echo stream's idle step: spin, but after ~50 us without progress give the CPU away,
// in case both processes were put on one CPU (then spinning only burns its time slice).
inline void relax(std::uint32_t* idle) {
  if (++*idle % 4096 == 0) {
    ::sched_yield();
  } else {
    cpu_relax();
  }
}

enum class Wait { kFutex, kSpin };

// One end of the pair: the ring it writes, the ring it reads, and their control blocks.
struct End {
  RingProducer out;
  RingConsumer in;
  RingControl* out_ctl;
  RingControl* in_ctl;
  std::uint64_t max_payload;
};

End parent_end(const ipc::SharedRegion& r) {
  return {r.task_producer(), r.result_consumer(), &r.header()->task_ring, &r.header()->result_ring,
          r.max_message()};
}
End child_end(const ipc::SharedRegion& r) {
  return {r.result_producer(), r.task_consumer(), &r.header()->result_ring, &r.header()->task_ring,
          r.max_message()};
}

// Writes one record and makes it visible; pays a futex wake only when the peer sleeps
// (exactly the channel's protocol).
bool send_one(End& e, std::uint16_t kind, std::string_view payload) {
  RingStatus s;
  while ((s = e.out.try_push(kind, 0, payload)) == RingStatus::kFull) cpu_relax();
  if (s != RingStatus::kOk) return false;
  if (e.out.publish()) ipc::futex_wake(&e.out_ctl->data_seq);
  return true;
}

// Takes one record. kFutex: when the ring is dry, announce the sleep and block on the
// data futex at once (no spinning). kSpin: poll the ring.
bool receive_one(End& e, Wait wait, RecordHeader* h, std::string* buf) {
  std::uint32_t spins = 0;
  for (;;) {
    const RingStatus s = e.in.try_pop(h, buf, e.max_payload);
    if (s == RingStatus::kOk) {
      if (e.in.release()) ipc::futex_wake(&e.in_ctl->space_seq);
      return true;
    }
    if (s == RingStatus::kCorrupt) return false;
    if (wait == Wait::kSpin) {
      // Spinning, but a side that was put on the same CPU as its peer must give it the CPU
      // now and then, or each hand-off would wait for a scheduler tick.
      relax(&spins);
      continue;
    }
    const std::uint32_t seq = e.in_ctl->data_seq.load(std::memory_order_acquire);
    if (e.in.prepare_sleep()) ipc::futex_wait(&e.in_ctl->data_seq, seq, kSecondNs);
    e.in.cancel_sleep();
  }
}

// Forks the peer; body's return value is its exit code. The child dies with us.
template <typename Body>
pid_t fork_peer(Body&& body) {
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::_exit(body());
  }
  return pid;
}

bool reap(pid_t pid, const char* what) {
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::cerr << "sandpool-bench: raw " << what << " peer failed (status " << st << ")\n";
    return false;
  }
  return true;
}

Result<ipc::SharedRegion> make_region() {
  ipc::RegionConfig cfg;  // PoolOptions' default ring size: the pool's rings exactly
  const PoolOptions defaults;
  cfg.task_ring_bytes = defaults.ring_bytes;
  cfg.result_ring_bytes = defaults.ring_bytes;
  return ipc::SharedRegion::create(cfg);
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ::sched_setaffinity(0, sizeof set, &set);
}

// kFree: wherever the scheduler puts the two processes (as it does the pool's); kSame: both
// on CPU 0; kApart: parent on CPU 0, child on CPU 1.
enum class Pin { kFree, kSame, kApart };

struct PingPong {
  Wait wait;
  std::uint32_t rounds;
  std::uint32_t warmup;
  std::int64_t budget_ns;  // stop early (and say so) past this much time
  Pin pin = Pin::kFree;
};

// Round trips of one 64-byte record: parent sends, child echoes. Returns the samples (us).
bool ping_pong(const PingPong& p, std::vector<double>* samples_us) {
  auto region = make_region();
  if (!region) {
    std::cerr << "sandpool-bench: raw: " << region.status().to_string() << "\n";
    return false;
  }
  cpu_set_t saved;
  ::sched_getaffinity(0, sizeof saved, &saved);
  if (p.pin != Pin::kFree) pin_to(0);
  const pid_t child = fork_peer([&]() -> int {
    if (p.pin == Pin::kApart) pin_to(1);
    End e = child_end(*region);
    RecordHeader h{};
    std::string buf;
    for (;;) {
      if (!receive_one(e, p.wait, &h, &buf)) return 2;
      if (!send_one(e, h.kind, buf)) return 3;
      if (h.kind == kStop) return 0;
    }
  });
  End e = parent_end(*region);
  RecordHeader h{};
  std::string buf;
  std::string payload(64, 'p');
  samples_us->clear();
  samples_us->reserve(p.rounds);
  bool ok = true;
  const std::int64_t start = ipc::monotonic_ns();
  // The warm-up ends after p.warmup rounds or a tenth of the budget, whichever is first.
  bool warm = false;
  for (std::uint32_t i = 0; samples_us->size() < p.rounds && ok; ++i) {
    std::memcpy(payload.data(), &i, sizeof i);
    const std::int64_t t0 = ipc::monotonic_ns();
    ok = send_one(e, kData, payload) && receive_one(e, p.wait, &h, &buf) && buf == payload;
    const std::int64_t t1 = ipc::monotonic_ns();
    if (warm) samples_us->push_back(static_cast<double>(t1 - t0) / 1000.0);
    warm = warm || i + 1 >= p.warmup || t1 - start > p.budget_ns / 10;
    if (t1 - start > p.budget_ns) break;
  }
  ok = ok && send_one(e, kStop, {}) && receive_one(e, p.wait, &h, &buf);
  if (p.pin != Pin::kFree) ::sched_setaffinity(0, sizeof saved, &saved);
  return reap(child, "ping-pong") && ok;
}

}  // namespace

bool run_raw_pingpong(const BenchOptions& o, Report& r) {
  struct Case {
    const char* name;
    PingPong p;
  };
  const Case cases[] = {
      {"futex_pingpong", {Wait::kFutex, o.rounds, 1000, 8 * kSecondNs}},
      {"futex_pingpong_1cpu", {Wait::kFutex, o.rounds, 1000, 4 * kSecondNs, Pin::kSame}},
      {"futex_pingpong_2cpu", {Wait::kFutex, o.rounds, 1000, 4 * kSecondNs, Pin::kApart}},
      {"spin_pingpong", {Wait::kSpin, 10 * o.rounds, 10000, 2 * kSecondNs}},
  };
  std::vector<double> samples;
  for (const Case& c : cases) {
    if (!ping_pong(c.p, &samples)) return false;
    Summary s = summarize(samples);
    if (s.count < c.p.rounds) {
      r.note(std::string("raw ") + c.name + ": time budget reached after " +
             std::to_string(s.count) + " round trips");
    }
    r.add("raw", std::string(c.name) + "_p50", s.p50, "us");
    r.add("raw", std::string(c.name) + "_p99", s.p99, "us");
  }
  return true;
}

// The echoer: pop a batch (only as much as the reply ring can take), push the replies,
// publish once, release once. Both sides spin: a throughput baseline.
int echo_peer(const ipc::SharedRegion& region, std::uint32_t payload_size) {
  End e = child_end(region);
  RecordHeader h{};
  std::string buf;
  std::uint32_t idle = 0;
  for (;;) {
    bool any = false, stop = false;
    while (!stop && e.out.fits(payload_size)) {
      const RingStatus s = e.in.try_pop(&h, &buf, e.max_payload);
      if (s == RingStatus::kEmpty) break;
      if (s != RingStatus::kOk || e.out.try_push(h.kind, 0, buf) != RingStatus::kOk) return 2;
      any = true;
      stop = h.kind == kStop;
    }
    if (any) {
      e.out.publish();
      e.in.release();
      idle = 0;
    } else {
      relax(&idle);
    }
    if (stop) return 0;
  }
}

bool run_raw_echo(const BenchOptions& o, Report& r) {
  auto region = make_region();
  if (!region) {
    std::cerr << "sandpool-bench: raw: " << region.status().to_string() << "\n";
    return false;
  }
  const pid_t child = fork_peer([&]() -> int { return echo_peer(*region, o.payload_size); });
  End e = parent_end(*region);
  RecordHeader h{};
  std::string buf;
  std::string payload = make_payload(0, o.payload_size);
  const bool numbered = o.payload_size >= 8;
  std::uint64_t sent = 0, received = 0, counted_from = 0;
  const std::int64_t warm_until = ipc::monotonic_ns() + kSecondNs / 20;
  std::int64_t t_start = 0, end_at = 0;
  bool stopping = false, stop_sent = false, ok = true;
  std::uint32_t idle = 0;
  for (;;) {
    std::uint64_t n = 0;
    if (!stopping) {
      // Frames carry their sequence number; the replies are checked in order below.
      while (e.out.fits(o.payload_size)) {
        if (numbered) std::memcpy(payload.data(), &sent, 8);
        if (e.out.try_push(kData, 0, payload) != RingStatus::kOk) break;
        ++sent;
        ++n;
      }
    } else if (!stop_sent && e.out.try_push(kStop, 0, {}) == RingStatus::kOk) {
      stop_sent = true;
      ++n;
    }
    if (n > 0) e.out.publish();
    std::uint64_t m = 0;
    bool done = false;
    for (;;) {
      const RingStatus s = e.in.try_pop(&h, &buf, e.max_payload);
      if (s != RingStatus::kOk) {
        ok = ok && s == RingStatus::kEmpty;
        break;
      }
      if (h.kind == kStop) {
        done = true;
        break;
      }
      std::uint64_t seq = received;
      if (numbered) std::memcpy(&seq, buf.data(), 8);
      ok = ok && seq == received && buf.size() == payload.size();
      ++received;
      ++m;
    }
    if (m > 0) e.in.release();
    if (done || !ok) break;
    if (n + m == 0) {
      relax(&idle);
    } else {
      idle = 0;
    }
    const std::int64_t now = ipc::monotonic_ns();
    if (t_start == 0 && now >= warm_until) {
      t_start = now;
      counted_from = received;
      end_at = now + kSecondNs / 2;
    }
    if (!stopping && end_at != 0 && now >= end_at) {
      stopping = true;
      r.add(
          "raw", "echo_stream_throughput",
          static_cast<double>(received - counted_from) / (static_cast<double>(now - t_start) / 1e9),
          "frames/s");
    }
  }
  if (!ok) std::cerr << "sandpool-bench: raw echo: a reply was out of order or malformed\n";
  return reap(child, "echo") && ok;
}

}  // namespace sandpool::bench
