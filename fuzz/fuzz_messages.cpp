// libFuzzer target: arbitrary bytes into every message decoder, and into a MessageReceiver
// over a ring whose memory and published positions come from the same bytes: everything a
// hostile worker controls on the manager's side of the channel.
//
// Built twice (fuzz/CMakeLists.txt): as the fuzzer, and with SANDPOOL_FUZZ_SEED_MAIN as a
// small program that writes the seed corpus (valid encodings, and rings holding valid
// fragmented messages) into the directory it is given.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/ipc/channel.hpp>
#include <sandpool/ipc/layout.hpp>
#include <sandpool/ipc/messages.hpp>
#include <sandpool/ipc/ring.hpp>

namespace sandpool::ipc {
namespace {

// A property the code under test must keep; crashes so libFuzzer saves the input.
void require(bool ok) {
  if (!ok) __builtin_trap();
}

// A successful decode must re-encode to exactly the input: the encoding is canonical
// (fixed widths, no padding), so anything else means decode accepted bytes it misread.
template <class M>
void decode_one(std::string_view in) {
  M m;
  if (!decode(in, &m).is_ok()) return;
  std::string again;
  encode(m, &again);
  require(again == in);
}

void decode_all(std::string_view in) {
  decode_one<TaskMsg>(in);
  decode_one<CancelMsg>(in);
  decode_one<StopMsg>(in);
  decode_one<ReadyMsg>(in);
  decode_one<ResultMsg>(in);
  decode_one<ProgressMsg>(in);
  decode_one<LogMsg>(in);
}

// What the manager does with a message from a worker: decode it by kind.
void decode_by_kind(std::uint16_t kind, std::string_view msg) {
  switch (static_cast<MsgKind>(kind)) {
    case MsgKind::kReady:
      return decode_one<ReadyMsg>(msg);
    case MsgKind::kResult:
      return decode_one<ResultMsg>(msg);
    case MsgKind::kProgress:
      return decode_one<ProgressMsg>(msg);
    case MsgKind::kLog:
      return decode_one<LogMsg>(msg);
    default:
      return decode_one<TaskMsg>(msg);
  }
}

// Ring input layout:
//   [0]      capacity = 64 << (byte % 7), i.e. 64 .. 4096 bytes
//   [1..4]   max_message (u32 little-endian) % 2 MiB
//   [5]      publishes = byte % 8 + 1
//   then one u64 per publish: odd -> that head as is (anything at all); even -> the last
//            head plus (v >> 1) % (2 * capacity), a plausible advance or a bit too far
//   rest     the ring's bytes (zero-padded)
struct RingInput {
  std::uint64_t capacity = 0;
  std::uint64_t max_message = 0;
  std::vector<std::uint64_t> heads;  // the raw u64s
  std::string_view ring_bytes;
};

bool parse(std::string_view in, RingInput* r) {
  if (in.size() < 6) return false;
  r->capacity = std::uint64_t{64} << (static_cast<std::uint8_t>(in[0]) % 7);
  std::uint32_t max = 0;
  std::memcpy(&max, in.data() + 1, sizeof max);
  r->max_message = max % (2u << 20);
  const std::size_t publishes = static_cast<std::uint8_t>(in[5]) % 8 + 1;
  in.remove_prefix(6);
  if (in.size() < publishes * 8) return false;
  for (std::size_t i = 0; i < publishes; ++i) {
    std::uint64_t v = 0;
    std::memcpy(&v, in.data() + 8 * i, sizeof v);
    r->heads.push_back(v);
  }
  in.remove_prefix(publishes * 8);
  r->ring_bytes = in.substr(0, r->capacity);
  return true;
}

// Returns how many whole messages came out before the end or corruption.
std::size_t receive_all(const RingInput& in) {
  auto ctl = std::make_unique<RingControl>();
  std::vector<std::byte> data(in.capacity);
  std::memcpy(data.data(), in.ring_bytes.data(), in.ring_bytes.size());
  MessageReceiver rx(RingConsumer(ctl.get(), data.data(), in.capacity), in.max_message);

  std::size_t received = 0;
  std::uint64_t head = 0;
  std::uint16_t kind = 0;
  std::string msg;
  for (std::uint64_t v : in.heads) {
    head = (v & 1) != 0 ? v : head + (v >> 1) % (2 * in.capacity);
    ctl->head.store(head, std::memory_order_release);
    RingStatus s;
    // Bounded: each kOk consumes at least one record of the bytes published.
    for (int i = 0; i < 100000 && (s = rx.next(&kind, &msg)) == RingStatus::kOk; ++i) {
      require(msg.size() <= in.max_message);
      decode_by_kind(kind, msg);
      ++received;
    }
    if (s == RingStatus::kCorrupt) {
      require(rx.next(&kind, &msg) == RingStatus::kCorrupt);  // final
      return received;
    }
    (void)rx.release();
    require(rx.ring().position() <= head);
  }
  return received;
}

}  // namespace
}  // namespace sandpool::ipc

#ifndef SANDPOOL_FUZZ_SEED_MAIN

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sandpool::ipc;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  decode_all(in);
  RingInput ring;
  if (parse(in, &ring)) (void)receive_all(ring);
  return 0;
}

#else  // the seed generator

#include "seed_corpus.hpp"

#include <cstdio>

namespace sandpool::ipc {
namespace {

// A ring input (layout above) holding `messages` as a MessageSender writes them, each
// published as one plausible advance of the head.
std::string ring_seed(std::uint8_t capacity_selector, const std::vector<std::string>& messages,
                      std::uint16_t kind) {
  const std::uint64_t capacity = std::uint64_t{64} << (capacity_selector % 7);
  auto ctl = std::make_unique<RingControl>();
  std::vector<std::byte> data(capacity);
  MessageSender tx(RingProducer(ctl.get(), data.data(), capacity));
  std::vector<std::uint64_t> heads;  // relative advances, encoded even (see parse)
  std::uint64_t prev = 0;
  for (const std::string& m : messages) {
    if (heads.size() == 8 || tx.send(kind, m) != RingStatus::kOk) break;
    tx.publish();
    const std::uint64_t head = ctl->head.load();
    heads.push_back((head - prev) << 1);
    prev = head;
    if (tx.has_queued()) break;  // one ring's worth: the rest would overwrite it
  }
  if (heads.empty()) heads.push_back(0);
  std::string out;
  out.push_back(static_cast<char>(capacity_selector));
  const std::uint32_t max_message = 1 << 20;
  out.append(reinterpret_cast<const char*>(&max_message), sizeof max_message);
  out.push_back(static_cast<char>(heads.size() - 1));
  for (std::uint64_t h : heads) out.append(reinterpret_cast<const char*>(&h), sizeof h);
  out.append(reinterpret_cast<const char*>(data.data()), capacity);
  return out;
}

int write_seeds(const std::string& dir) {
  std::vector<std::pair<std::string, std::string> > seeds;
  std::string bytes;
  encode(TaskMsg{1, 1, 123456, "echo", "payload"}, &bytes);
  seeds.emplace_back("task", bytes);
  encode(CancelMsg{7}, &bytes);
  seeds.emplace_back("cancel", bytes);
  encode(ReadyMsg{42, {"echo", "upper", ""}, "rlimits+seccomp:strict"}, &bytes);
  seeds.emplace_back("ready", bytes);
  encode(ResultMsg{3, TaskStatus::kFail, "partial", "handler failed"}, &bytes);
  seeds.emplace_back("result", bytes);
  encode(ResultMsg{4, TaskStatus::kLimit, "", "lua: instruction limit reached"}, &bytes);
  seeds.emplace_back("result-limit", bytes);
  encode(ProgressMsg{3, "50%"}, &bytes);
  seeds.emplace_back("progress", bytes);
  encode(LogMsg{0, 3, "init failed"}, &bytes);
  seeds.emplace_back("log", bytes);

  std::vector<std::string> small;
  for (std::uint64_t id = 1; id <= 6; ++id) {
    encode(ResultMsg{id, TaskStatus::kOk, std::string(id * 5, 'r'), ""}, &bytes);
    small.push_back(bytes);
  }
  seeds.emplace_back("ring-results", ring_seed(4, small, 17));  // 1 KiB ring
  encode(ProgressMsg{9, std::string(300, 'p')}, &bytes);
  seeds.emplace_back("ring-fragmented", ring_seed(3, {bytes}, 18));  // 512 B ring: 3 records
  encode(ReadyMsg{1, {"a", "b"}, ""}, &bytes);
  seeds.emplace_back("ring-ready", ring_seed(0, {bytes, bytes}, 16));

  for (const auto& [name, content] : seeds) {
    // Each seed goes through the harness once here: it must pass, and a ring seed must
    // deliver messages (else it seeds nothing of the receiver).
    decode_all(content);
    RingInput ring;
    const std::size_t received = parse(content, &ring) ? receive_all(ring) : 0;
    if (name.rfind("ring-", 0) == 0 && received == 0) {
      std::fprintf(stderr, "seed %s delivers no message\n", name.c_str());
      return 1;
    }
    if (!fuzz::write_seed(dir + "/" + name, content)) {
      std::perror(name.c_str());
      return 1;
    }
    std::printf("%s: %zu bytes, %zu messages through the ring\n", name.c_str(), content.size(),
                received);
  }
  return 0;
}

}  // namespace
}  // namespace sandpool::ipc

int main(int argc, char** argv) {
  return sandpool::fuzz::seed_main(argc, argv, "fuzz_messages", sandpool::ipc::write_seeds);
}

#endif
