#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <sandpool/control/frame_codec.hpp>

using sandpool::control::encode_frame;
using sandpool::control::Frame;
using sandpool::control::FrameDecoder;
using sandpool::control::FrameKind;
using DecodeStatus = FrameDecoder::Status;

namespace {

Frame request(std::uint64_t id, std::string op, std::string json, std::string blob) {
  Frame f;
  f.kind = FrameKind::kRequest;
  f.id = id;
  f.name = std::move(op);
  f.json = std::move(json);
  f.blob = std::move(blob);
  return f;
}

std::string encoded(const Frame& f) {
  std::string out;
  encode_frame(f, &out);
  return out;
}

// A header with chosen fields, for frames encode_frame would never write.
std::string raw_header(std::uint32_t body, std::uint8_t kind, std::uint8_t flags,
                       std::uint16_t name_len, std::uint64_t id, std::uint32_t json_len) {
  std::string h;
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>(body >> (8 * i)));
  h.push_back(static_cast<char>(kind));
  h.push_back(static_cast<char>(flags));
  for (int i = 0; i < 2; ++i) h.push_back(static_cast<char>(name_len >> (8 * i)));
  for (int i = 0; i < 8; ++i) h.push_back(static_cast<char>(id >> (8 * i)));
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>(json_len >> (8 * i)));
  return h;
}

void require_same(const Frame& a, const Frame& b) {
  CHECK(a.kind == b.kind);
  CHECK(a.id == b.id);
  CHECK(a.name == b.name);
  CHECK(a.json == b.json);
  CHECK(a.blob == b.blob);
}

}  // namespace

TEST_CASE("a frame is a little-endian header followed by name, json and blob") {
  const std::string bytes = encoded(request(0x0102030405060708, "op", "{}", "B"));
  CHECK(bytes == raw_header(16 + 2 + 2 + 1, 2, 0, 2, 0x0102030405060708, 2) + "op{}B");
  CHECK(bytes.substr(8, 8) == std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
}

TEST_CASE("every kind of frame survives a round trip, fed whole or byte by byte") {
  const std::string binary("\0\xff\x01payload\0", 11);
  auto kind = GENERATE(FrameKind::kHello, FrameKind::kRequest, FrameKind::kCancel, FrameKind::kOk,
                       FrameKind::kError, FrameKind::kEvent);
  Frame f = request(42, "submit", R"({"type":"echo"})", binary);
  f.kind = kind;
  const std::string bytes = encoded(f);
  const bool bytewise = GENERATE(false, true);

  FrameDecoder d(1 << 20);
  Frame out;
  FrameDecoder::Error err;
  if (bytewise) {
    for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
      d.feed(bytes.substr(i, 1));
      REQUIRE(d.next(&out, &err) == DecodeStatus::kNeedMore);
    }
    d.feed(bytes.substr(bytes.size() - 1));
  } else {
    d.feed(bytes);
  }
  REQUIRE(d.next(&out, &err) == DecodeStatus::kFrame);
  require_same(out, f);
  CHECK(d.next(&out, &err) == DecodeStatus::kNeedMore);
  CHECK(d.buffered() == 0);
}

TEST_CASE("frames arriving together are decoded one after the other, empty parts too") {
  std::string bytes;
  std::vector<Frame> sent;
  for (std::uint64_t id = 1; id <= 50; ++id) {
    sent.push_back(
        request(id, id % 2 ? "status" : "", id % 3 ? "" : "{}", std::string(id * 7, 'x')));
    encode_frame(sent.back(), &bytes);
  }
  FrameDecoder d(1 << 20);
  d.feed(bytes);
  for (const Frame& f : sent) {
    Frame out;
    FrameDecoder::Error err;
    REQUIRE(d.next(&out, &err) == DecodeStatus::kFrame);
    require_same(out, f);
  }
}

TEST_CASE("a malformed frame is reported with its id and skipped, and the next one decodes") {
  struct Case {
    const char* what;
    std::string bytes;
  };
  auto c = GENERATE(
      Case{"unknown kind", raw_header(16, 99, 0, 0, 7, 0)},
      Case{"kind zero", raw_header(16, 0, 0, 0, 7, 0)},
      Case{"non-zero flags", raw_header(16, 2, 1, 0, 7, 0)},
      Case{"name longer than the frame", raw_header(18, 2, 0, 3, 7, 0) + "ab"},
      Case{"json longer than the frame", raw_header(18, 2, 0, 1, 7, 2) + "ab"},
      Case{"json length near 2^32", raw_header(18, 2, 0, 1, 7, 0xffffffff) + "ab"},
      Case{"name over the limit", raw_header(16 + 300, 2, 0, 300, 7, 0) + std::string(300, 'n')});
  INFO(c.what);
  FrameDecoder d(1 << 20);
  d.feed(c.bytes);
  d.feed(encoded(request(8, "status", "", "")));
  Frame out;
  FrameDecoder::Error err;
  REQUIRE(d.next(&out, &err) == DecodeStatus::kBadFrame);
  CHECK(err.id == 7);
  CHECK(err.code == "bad_request");
  CHECK_FALSE(err.message.empty());
  REQUIRE(d.next(&out, &err) == DecodeStatus::kFrame);
  CHECK(out.id == 8);
  CHECK(out.name == "status");
}

TEST_CASE("an oversized frame is too_large, its body discarded unbuffered as it arrives") {
  const Frame big = request(5, "submit", "{}", std::string(10000, 'p'));
  const std::string bytes = encoded(big) + encoded(request(6, "status", "", ""));
  const std::size_t chunk = GENERATE(1, 7, 100, 4096, 100000);
  FrameDecoder d(1000);
  std::vector<std::uint64_t> bad, good;
  for (std::size_t i = 0; i < bytes.size(); i += chunk) {
    d.feed(bytes.substr(i, chunk));
    CHECK(d.buffered() <= chunk + 1000);
    for (;;) {
      Frame out;
      FrameDecoder::Error err;
      const auto st = d.next(&out, &err);
      if (st == DecodeStatus::kNeedMore) break;
      if (st == DecodeStatus::kBadFrame) {
        CHECK(err.code == "too_large");
        bad.push_back(err.id);
      } else {
        REQUIRE(st == DecodeStatus::kFrame);
        good.push_back(out.id);
      }
    }
  }
  CHECK(bad == std::vector<std::uint64_t>{5});
  CHECK(good == std::vector<std::uint64_t>{6});
}

TEST_CASE("a length below the fixed header cannot be framed: the stream is dead") {
  const std::uint32_t len = GENERATE(0u, 1u, 15u);
  FrameDecoder d(1 << 20);
  d.feed(raw_header(len, 2, 0, 0, 1, 0));
  Frame out;
  FrameDecoder::Error err;
  CHECK(d.next(&out, &err) == DecodeStatus::kFatal);
  d.feed(encoded(request(2, "status", "", "")));
  CHECK(d.next(&out, &err) == DecodeStatus::kFatal);
}

TEST_CASE("JSON nesting is measured outside strings, before anything parses it") {
  using sandpool::control::json_depth_within;
  CHECK(json_depth_within(""));
  CHECK(json_depth_within(R"({"a":[1,{"b":[]}]})", 4));
  CHECK_FALSE(json_depth_within(R"({"a":[1,{"b":[]}]})", 3));
  CHECK(json_depth_within(R"({"a":"[[[[[[[[[[\"[[[["})", 1));
  CHECK(json_depth_within(std::string(64, '[') + std::string(64, ']')));
  CHECK_FALSE(json_depth_within(std::string(65, '[')));
  CHECK_FALSE(json_depth_within(std::string(5000000, '{')));
}
