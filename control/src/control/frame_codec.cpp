#include <sandpool/control/frame_codec.hpp>

#include <algorithm>

namespace sandpool::control {
namespace {

void put_le(std::string* out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_le(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

bool is_known_kind(std::uint8_t kind) {
  switch (static_cast<FrameKind>(kind)) {
    case FrameKind::kHello:
    case FrameKind::kRequest:
    case FrameKind::kCancel:
    case FrameKind::kOk:
    case FrameKind::kError:
    case FrameKind::kEvent:
      return true;
  }
  return false;
}

bool json_depth_within(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

std::size_t body_size(const Frame& f) {
  return kFixedBodyBytes + f.name.size() + f.json.size() + f.blob.size();
}

void encode_frame(const Frame& f, std::string* out) {
  out->reserve(out->size() + kLengthBytes + body_size(f));
  put_le(out, body_size(f), 4);
  put_le(out, static_cast<std::uint8_t>(f.kind), 1);
  put_le(out, 0, 1);  // flags
  put_le(out, f.name.size(), 2);
  put_le(out, f.id, 8);
  put_le(out, f.json.size(), 4);
  out->append(f.name);
  out->append(f.json);
  out->append(f.blob);
}

void FrameDecoder::feed(std::string_view bytes) {
  if (fatal_) return;
  if (skip_ > 0) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(skip_, bytes.size()));
    skip_ -= n;
    bytes.remove_prefix(n);
  }
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {  // compact: keep the buffer from creeping
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
}

FrameDecoder::Status FrameDecoder::next(Frame* frame, Error* error) {
  if (fatal_) return Status::kFatal;
  if (skip_ > 0) return Status::kNeedMore;
  const std::size_t avail = buf_.size() - pos_;
  if (avail < kLengthBytes) return Status::kNeedMore;
  const char* p = buf_.data() + pos_;
  const std::uint64_t body = get_le(p, 4);
  if (body < kFixedBodyBytes) {
    fatal_ = true;
    error->code = "bad_request";
    error->message = "frame length " + std::to_string(body) + " is below the " +
                     std::to_string(kFixedBodyBytes) + "-byte header";
    error->id = 0;
    buf_.clear();
    pos_ = 0;
    return Status::kFatal;
  }
  if (avail < kHeaderBytes) return Status::kNeedMore;
  const auto kind = static_cast<std::uint8_t>(p[4]);
  const auto flags = static_cast<std::uint8_t>(p[5]);
  const std::uint64_t name_len = get_le(p + 6, 2);
  const std::uint64_t id = get_le(p + 8, 8);
  const std::uint64_t json_len = get_le(p + 16, 4);
  error->id = id;
  if (body > max_body_) {
    // Discard the body as it arrives without buffering it; the stream stays framed.
    const std::uint64_t rest = body - kFixedBodyBytes;
    const std::size_t here =
        static_cast<std::size_t>(std::min<std::uint64_t>(rest, avail - kHeaderBytes));
    pos_ += kHeaderBytes + here;
    skip_ = rest - here;
    error->code = "too_large";
    error->message = "frame of " + std::to_string(body) + " bytes is over the limit of " +
                     std::to_string(max_body_);
    return Status::kBadFrame;
  }
  if (avail < kLengthBytes + body) return Status::kNeedMore;
  pos_ += kLengthBytes + body;
  error->code = "bad_request";
  if (!is_known_kind(kind)) {
    error->message = "unknown frame kind " + std::to_string(kind);
    return Status::kBadFrame;
  }
  if (flags != 0) {
    error->message = "frame flags must be 0, got " + std::to_string(flags);
    return Status::kBadFrame;
  }
  if (name_len > kMaxNameBytes || kFixedBodyBytes + name_len + json_len > body) {
    error->message = "frame section lengths (name " + std::to_string(name_len) + ", json " +
                     std::to_string(json_len) + ") exceed its length " + std::to_string(body);
    return Status::kBadFrame;
  }
  const char* q = p + kHeaderBytes;
  frame->kind = static_cast<FrameKind>(kind);
  frame->id = id;
  frame->name.assign(q, name_len);
  frame->json.assign(q + name_len, json_len);
  const std::size_t blob_len = body - kFixedBodyBytes - name_len - json_len;
  frame->blob.assign(q + name_len + json_len, blob_len);
  return Status::kFrame;
}

}  // namespace sandpool::control
