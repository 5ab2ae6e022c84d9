// libFuzzer target: arbitrary bytes from a control-socket peer into the frame decoder
// (control/include/sandpool/control/frame_codec.hpp), delivered in arbitrary chunks under an
// arbitrary frame cap, then each frame's JSON as the server parses it (depth check first).
//
// Input layout: [0] chunk size selector (1 << (byte % 17) bytes), [1..2] max_body as
// u16 little-endian * 64 (0 .. ~4 MiB), then the stream.
//
// Built twice (fuzz/CMakeLists.txt): as the fuzzer, and with SANDPOOL_FUZZ_SEED_MAIN as a
// small program that writes the seed corpus into the directory it is given.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include <sandpool/control/frame_codec.hpp>

namespace sandpool::control {
namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

// A decoded frame must survive encode -> decode unchanged.
void check_round_trip(const Frame& f, std::size_t max_body) {
  std::string bytes;
  encode_frame(f, &bytes);
  require(bytes.size() == kLengthBytes + body_size(f));
  FrameDecoder again(max_body);
  again.feed(bytes);
  Frame g;
  FrameDecoder::Error err;
  require(again.next(&g, &err) == FrameDecoder::Status::kFrame);
  require(g.kind == f.kind && g.id == f.id && g.name == f.name && g.json == f.json &&
          g.blob == f.blob);
}

void run(std::string_view in) {
  if (in.size() < 3) return;
  const std::size_t chunk = std::size_t{1} << (static_cast<std::uint8_t>(in[0]) % 17);
  const std::size_t max_body = (static_cast<std::uint8_t>(in[1]) |
                                (static_cast<std::size_t>(static_cast<std::uint8_t>(in[2])) << 8)) *
                               64;
  in.remove_prefix(3);
  FrameDecoder d(max_body);
  bool fatal = false;
  for (std::size_t off = 0; off < in.size(); off += chunk) {
    d.feed(in.substr(off, chunk));
    // The decoder never holds more than one frame's worth beyond the chunk just fed.
    require(d.buffered() <= kLengthBytes + max_body + kFixedBodyBytes + chunk * 2);
    for (;;) {
      Frame f;
      FrameDecoder::Error err;
      const auto st = d.next(&f, &err);
      if (st == FrameDecoder::Status::kNeedMore) break;
      if (st == FrameDecoder::Status::kFatal) {
        fatal = true;
        break;
      }
      require(!fatal);  // a dead stream stays dead
      if (st == FrameDecoder::Status::kBadFrame) {
        require(err.code == "bad_request" || err.code == "too_large");
        continue;
      }
      require(is_known_kind(static_cast<std::uint8_t>(f.kind)));
      require(f.name.size() <= kMaxNameBytes);
      require(body_size(f) <= max_body);
      check_round_trip(f, max_body);
      // What the server does next with a request's arguments.
      if (json_depth_within(f.json)) {
        const auto args = nlohmann::json::parse(f.json, nullptr, false);
        if (args.is_object()) (void)args.dump();
      }
    }
    if (fatal) {
      Frame f;
      FrameDecoder::Error err;
      require(d.next(&f, &err) == FrameDecoder::Status::kFatal);
      return;
    }
  }
}

}  // namespace
}  // namespace sandpool::control

#ifndef SANDPOOL_FUZZ_SEED_MAIN

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sandpool::control::run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

#else  // the seed generator

#include "seed_corpus.hpp"

#include <cstdio>
#include <utility>

namespace sandpool::control {
namespace {

// The 3-byte prefix (chunk selector, max_body / 64) and then `frames`.
std::string seed(std::uint8_t chunk_selector, std::uint16_t max_body_64,
                 std::initializer_list<Frame> frames) {
  std::string s;
  s.push_back(static_cast<char>(chunk_selector));
  s.push_back(static_cast<char>(max_body_64 & 0xff));
  s.push_back(static_cast<char>(max_body_64 >> 8));
  for (const Frame& f : frames) encode_frame(f, &s);
  return s;
}

}  // namespace
}  // namespace sandpool::control

namespace sandpool::control {
namespace {

int write_seeds(const std::string& dir) {
  const Frame hello{FrameKind::kHello, 1, "", R"({"version":1,"client":"poolctl"})", ""};
  const Frame status{FrameKind::kRequest, 2, "status", "{}", ""};
  const Frame submit{FrameKind::kRequest, 3, "submit",
                     R"({"type":"echo","wait":true,"progress":true})", std::string("\0\1pay", 5)};
  const Frame cancel{FrameKind::kCancel, 3, "", "", ""};
  const Frame event{FrameKind::kEvent, 3, "", R"({"event":"progress","id":7})", "half"};
  const Frame error{FrameKind::kError, 4, "busy", R"({"message":"too many"})", ""};
  const Frame big{FrameKind::kRequest, 5, "submit", "{}", std::string(5000, 'p')};
  std::string fatal = seed(16, 1024, {hello});
  fatal += std::string("\x05\x00\x00\x00short", 9);
  const std::pair<const char*, std::string> seeds[] = {
      {"hello", seed(16, 1024, {hello})},
      {"session", seed(3, 1024, {hello, status, submit, cancel})},
      {"replies", seed(0, 1024, {event, error})},
      {"oversized", seed(5, 16, {hello, big, status})},
      {"unframeable", fatal},
  };
  bool ok = true;
  for (const auto& [name, bytes] : seeds) {
    run(bytes);  // the seeds themselves must keep every property
    ok = ok && fuzz::write_seed(dir + "/" + name, bytes);
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace sandpool::control

int main(int argc, char** argv) {
  return sandpool::fuzz::seed_main(argc, argv, "fuzz_control_frames",
                                   sandpool::control::write_seeds);
}

#endif
