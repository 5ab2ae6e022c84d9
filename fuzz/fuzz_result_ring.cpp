// libFuzzer target: the manager's reader of one worker's shared region, on arbitrary
// shared-memory contents. A real region (SharedRegion::create: sealed memfd, mapped) with
// small rings; the input is a script of what a hostile worker does to the region between
// the manager's looks, and the manager's side does what PoolLoop does: pop whole messages
// off the result ring and decode them by kind, release the space, queue and publish task
// frames (which reads the worker's tail), read the header's status words and take a
// backtrace. Properties: no crash, no sanitizer error, no message over max_message, no
// message after kCorrupt, backtraces within kBacktraceBytes and printable.
//
// Script: a sequence of ops, each one byte (op % 5) and its operands:
//   0 write  [u16 offset][u8 n][n bytes]   bytes into the region at offset % size
//   1 store  [u16 offset][u64 value]       a u64 at (offset % size) rounded down to 8
//   2 read                                 the manager drains the result ring
//   3 send   [u8 n]                        the manager queues a task frame of n*32 bytes
//   4 look                                 the manager reads the header and diagnostics
//
// Built twice (fuzz/CMakeLists.txt): as the fuzzer, and with SANDPOOL_FUZZ_SEED_MAIN as a
// small program that writes the seed corpus (a worker host's real traffic as write ops).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/ipc/channel.hpp>
#include <sandpool/ipc/diagnostics.hpp>
#include <sandpool/ipc/layout.hpp>
#include <sandpool/ipc/messages.hpp>
#include <sandpool/ipc/region.hpp>

namespace sandpool::ipc {
namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

constexpr RegionConfig kConfig{4096, 4096, 16 * 1024};

// One region for the whole run, and its pristine contents, restored before each input.
struct Fixture {
  SharedRegion region;
  std::vector<std::byte> pristine;
  std::size_t size;
};

Fixture& fixture() {
  static Fixture* f = [] {
    Result<SharedRegion> r = SharedRegion::create(kConfig);
    if (!r) __builtin_trap();
    const std::size_t size = r->header()->region_size;
    auto* fx = new Fixture{std::move(r).value(), {}, size};
    const auto* base = reinterpret_cast<const std::byte*>(fx->region.header());
    fx->pristine.assign(base, base + size);
    return fx;
  }();
  return *f;
}

std::byte* region_bytes(Fixture& f) { return reinterpret_cast<std::byte*>(f.region.header()); }

// What PoolLoop::handle_message does with one message: decode it by kind.
void decode_by_kind(std::uint16_t kind, const std::string& msg) {
  switch (static_cast<MsgKind>(kind)) {
    case MsgKind::kReady: {
      ReadyMsg m;
      (void)decode(msg, &m);
      return;
    }
    case MsgKind::kResult: {
      ResultMsg m;
      (void)decode(msg, &m);
      return;
    }
    case MsgKind::kProgress: {
      ProgressMsg m;
      (void)decode(msg, &m);
      return;
    }
    case MsgKind::kLog: {
      LogMsg m;
      (void)decode(msg, &m);
      return;
    }
    default:
      return;  // the manager calls it a protocol error
  }
}

// The manager's side for one input.
class Manager {
 public:
  explicit Manager(Fixture& f)
      : f_(f),
        results_(f.region.result_consumer(), f.region.max_message()),
        tasks_(f.region.task_producer()) {}

  void read() {
    std::uint16_t kind = 0;
    for (int i = 0; i < 4096; ++i) {  // PoolLoop's per-iteration budget
      const RingStatus s = results_.next(&kind, &msg_);
      if (s == RingStatus::kEmpty) break;
      if (s == RingStatus::kCorrupt) {
        corrupt_ = true;
        break;
      }
      require(!corrupt_);  // nothing after kCorrupt
      require(msg_.size() <= f_.region.max_message());
      decode_by_kind(kind, msg_);
    }
    if (!corrupt_) (void)results_.release();
  }

  void send(std::size_t bytes) {
    // The pool bounds what waits for a worker (concurrency); so does this.
    if (tasks_corrupt_ || tasks_.queued_bytes() > 64 * 1024) return;
    std::string payload(bytes, 't');
    std::string frame;
    encode(TaskMsgView{++task_id_, 1, -1, "echo", payload}, &frame);
    if (tasks_.send(static_cast<std::uint16_t>(MsgKind::kTask), frame) == RingStatus::kCorrupt ||
        (tasks_.has_queued() && tasks_.pump() == RingStatus::kCorrupt)) {
      tasks_corrupt_ = true;
      return;
    }
    (void)tasks_.publish();
  }

  void look() {
    RegionHeader& h = *f_.region.header();
    // Status words are plain numbers to the manager; any value is fine, none is trusted.
    (void)h.heartbeat_ms.load();
    (void)h.started_task.load();
    (void)h.phase.load();
    (void)h.violation_syscall.load();
    (void)h.diagnostics.fatal_report.load();
    if (std::optional<std::string> bt = take_backtrace(h.diagnostics)) {
      require(bt->size() <= kBacktraceBytes);
      for (char c : *bt) require(c == '\n' || (c >= 0x20 && c < 0x7f) || c == '?');
    }
  }

 private:
  Fixture& f_;
  MessageReceiver results_;
  MessageSender tasks_;
  std::string msg_;
  std::uint64_t task_id_ = 0;
  bool corrupt_ = false;
  bool tasks_corrupt_ = false;
};

// Reads a little-endian integer of sizeof(T) bytes; false when the input is used up.
template <class T>
bool take(std::string_view& in, T* out) {
  if (in.size() < sizeof(T)) return false;
  std::memcpy(out, in.data(), sizeof(T));
  in.remove_prefix(sizeof(T));
  return true;
}

void run_script(std::string_view in) {
  Fixture& f = fixture();
  std::memcpy(region_bytes(f), f.pristine.data(), f.size);
  Manager manager(f);
  std::uint8_t op = 0;
  while (take(in, &op)) {
    switch (op % 5) {
      case 0: {
        std::uint16_t off = 0;
        std::uint8_t n = 0;
        if (!take(in, &off) || !take(in, &n) || in.size() < n) return;
        const std::size_t at = off % f.size;
        const std::size_t len = std::min<std::size_t>(n, f.size - at);
        std::memcpy(region_bytes(f) + at, in.data(), len);
        in.remove_prefix(n);
        break;
      }
      case 1: {
        std::uint16_t off = 0;
        std::uint64_t v = 0;
        if (!take(in, &off) || !take(in, &v)) return;
        const std::size_t at = (off % f.size) & ~std::size_t{7};
        std::memcpy(region_bytes(f) + at, &v, sizeof v);
        break;
      }
      case 2:
        manager.read();
        break;
      case 3: {
        std::uint8_t n = 0;
        if (!take(in, &n)) return;
        manager.send(std::size_t{n} * 32);
        break;
      }
      default:
        manager.look();
        break;
    }
  }
  manager.read();
  manager.look();
}

}  // namespace
}  // namespace sandpool::ipc

#ifndef SANDPOOL_FUZZ_SEED_MAIN

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sandpool::ipc::run_script(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

#else  // the seed generator

#include "seed_corpus.hpp"

#include <cstdio>
#include <functional>

namespace sandpool::ipc {
namespace {

// Write ops (op 0) that turn `before` into `after`, in runs of at most 255 bytes.
void append_diff(const std::vector<std::byte>& before, const std::byte* after, std::string* out) {
  std::size_t i = 0;
  while (i < before.size()) {
    if (before[i] == after[i]) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < before.size() && end - i < 255 && before[end] != after[end]) ++end;
    const auto off = static_cast<std::uint16_t>(i);
    const auto n = static_cast<std::uint8_t>(end - i);
    out->push_back(0);
    out->append(reinterpret_cast<const char*>(&off), sizeof off);
    out->push_back(static_cast<char>(n));
    out->append(reinterpret_cast<const char*>(after + i), n);
    i = end;
  }
}

// A script in which the worker side does `worker` (through a real MessageSender on the
// region, as the worker host would), expressed as write ops, then the manager reads.
std::string traffic_seed(const std::function<void(MessageSender&, RegionHeader&)>& worker) {
  Fixture& f = fixture();
  std::memcpy(region_bytes(f), f.pristine.data(), f.size);
  MessageSender tx(f.region.result_producer());
  worker(tx, *f.region.header());
  (void)tx.publish();
  std::string script;
  append_diff(f.pristine, region_bytes(f), &script);
  script.push_back(2);  // read
  script.push_back(4);  // look
  return script;
}

void send(MessageSender& tx, MsgKind kind, const std::string& bytes) {
  (void)tx.send(static_cast<std::uint16_t>(kind), bytes);
}

int write_seeds(const std::string& dir) {
  std::vector<std::pair<std::string, std::string> > seeds;
  seeds.emplace_back("ready-result", traffic_seed([](MessageSender& tx, RegionHeader& h) {
                       std::string b;
                       encode(ReadyMsg{42, {"echo"}, "rlimits+seccomp:strict"}, &b);
                       send(tx, MsgKind::kReady, b);
                       encode(ResultMsg{1, TaskStatus::kOk, "done", ""}, &b);
                       send(tx, MsgKind::kResult, b);
                       h.started_task.store(1);
                       h.heartbeat_ms.store(12345);
                     }));
  seeds.emplace_back("progress-log", traffic_seed([](MessageSender& tx, RegionHeader&) {
                       std::string b;
                       encode(ProgressMsg{1, "50%"}, &b);
                       send(tx, MsgKind::kProgress, b);
                       encode(LogMsg{1, 2, "a warning"}, &b);
                       send(tx, MsgKind::kLog, b);
                     }));
  // Larger than a record (a quarter of the 4 KiB ring): fragments.
  seeds.emplace_back("fragmented", traffic_seed([](MessageSender& tx, RegionHeader&) {
                       std::string b;
                       encode(ResultMsg{2, TaskStatus::kOk, std::string(2500, 'r'), ""}, &b);
                       send(tx, MsgKind::kResult, b);
                     }));
  seeds.emplace_back("backtrace", traffic_seed([](MessageSender&, RegionHeader& h) {
                       const char text[] = "#0 spin+0x10 (libhang.so)\n#1 sp_plugin_handle+0x2";
                       std::memcpy(h.diagnostics.backtrace, text, sizeof text - 1);
                       // Region v3: request 1 asked of one thread, which answered its section.
                       h.diagnostics.backtrace_used.store(sizeof text - 1);
                       h.diagnostics.backtrace_expected.store(1);
                       h.diagnostics.backtrace_answered.store(1);
                       h.diagnostics.backtrace_request.store(1);
                     }));
  // The manager sends tasks, then the worker's tail moves.
  std::string tasks;
  for (int i = 0; i < 3; ++i) {
    tasks.push_back(3);
    tasks.push_back(static_cast<char>(20));
  }
  seeds.emplace_back("tasks", tasks);

  for (const auto& [name, content] : seeds) {
    run_script(content);  // each seed passes the harness
    if (!fuzz::write_seed(dir + "/" + name, content)) {
      std::perror(name.c_str());
      return 1;
    }
    std::printf("%s: %zu bytes\n", name.c_str(), content.size());
  }
  return 0;
}

}  // namespace
}  // namespace sandpool::ipc

int main(int argc, char** argv) {
  return sandpool::fuzz::seed_main(argc, argv, "fuzz_result_ring", sandpool::ipc::write_seeds);
}

#endif
