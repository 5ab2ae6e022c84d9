// The control protocol's framing (docs/protocol.md, "Frames"): pure encode/decode of
// length-prefixed frames, no I/O, so it is unit-tested and fuzzed on its own.
// Thread-safety: FrameDecoder is a plain value used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sandpool::control {

inline constexpr std::uint32_t kProtocolVersion = 1;
inline constexpr std::size_t kLengthBytes = 4;
inline constexpr std::size_t kHeaderBytes = 20;  // length, kind, flags, name_len, id, json_len
inline constexpr std::size_t kFixedBodyBytes = kHeaderBytes - kLengthBytes;
inline constexpr std::size_t kMaxNameBytes = 256;

enum class FrameKind : std::uint8_t {
  kHello = 1,    // client -> server, first frame
  kRequest = 2,  // client -> server
  kCancel = 3,   // client -> server: cancel the stream with this id
  kOk = 16,      // server -> client: final reply (also the hello's answer)
  kError = 17,   // server -> client: final reply; name = error code
  kEvent = 18,   // server -> client: one event of a stream
};
bool is_known_kind(std::uint8_t kind);

struct Frame {
  FrameKind kind = FrameKind::kRequest;
  std::uint64_t id = 0;
  std::string name;  // op (request), error code (error), empty otherwise
  std::string json;  // JSON text, may be empty
  std::string blob;  // raw bytes
};

// JSON deeper than this is refused before parsing: nlohmann::json parses, dumps and
// destroys recursively, so a 16 MiB "[[[[..." would overflow the stack.
inline constexpr std::size_t kMaxJsonDepth = 64;
// Returns true iff the arrays and objects in `text` nest at most `max_depth` deep (brackets
// inside strings do not count). A linear scan; it does not validate the JSON otherwise.
bool json_depth_within(std::string_view text, std::size_t max_depth = kMaxJsonDepth);

// Appends the encoding of `f` to `out`. The caller keeps name under kMaxNameBytes and the
// body under the peer's cap; the encoding itself is canonical (fixed widths, little-endian).
void encode_frame(const Frame& f, std::string* out);
// The body size (bytes after the length field) encode_frame would write.
std::size_t body_size(const Frame& f);

// Incremental decoder over a byte stream. feed() bytes as they arrive, then call next()
// until it returns kNeedMore. A frame whose header is readable but whose content is bad or
// too large is reported as kBadFrame with its id and skipped (the stream stays in sync);
// only a length below the fixed header makes the stream unframeable (kFatal): close it.
class FrameDecoder {
 public:
  enum class Status : std::uint8_t { kFrame, kNeedMore, kBadFrame, kFatal };
  struct Error {
    std::string code;  // "too_large", "bad_request"
    std::string message;
    std::uint64_t id = 0;
  };

  explicit FrameDecoder(std::size_t max_body) : max_body_(max_body) {}
  void feed(std::string_view bytes);
  Status next(Frame* frame, Error* error);
  std::size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::size_t max_body_;
  std::string buf_;
  std::size_t pos_ = 0;
  std::uint64_t skip_ = 0;  // bytes of an oversized body still to discard
  bool fatal_ = false;
};

}  // namespace sandpool::control
