// Fragmentation and reassembly of whole messages over one ring.
#include <sandpool/ipc/channel.hpp>

#include <algorithm>

namespace sandpool::ipc {

RingStatus MessageSender::send(std::uint16_t kind, std::string_view bytes) {
  if (corrupt_) return RingStatus::kCorrupt;
  // The hot path: a small message with nothing ahead of it goes straight into the ring,
  // without a copy or an allocation.
  if (queue_.empty() && bytes.size() <= ring_.max_record_payload()) {
    RingStatus s = ring_.try_push(kind, 0, bytes);
    if (s == RingStatus::kCorrupt) corrupt_ = true;
    if (s != RingStatus::kFull) return s;
  }
  queue_.push_back(Pending{kind, std::string(bytes)});
  queued_bytes_ += bytes.size();
  RingStatus s = pump();
  return s == RingStatus::kFull ? RingStatus::kOk : s;
}

RingStatus MessageSender::pump() {
  if (corrupt_) return RingStatus::kCorrupt;
  while (!queue_.empty()) {
    RingStatus s = write_fragments(queue_.front());
    if (s == RingStatus::kCorrupt) corrupt_ = true;
    if (s != RingStatus::kOk) return s;
    queue_.pop_front();
  }
  return RingStatus::kOk;
}

// Writes p's remaining fragments until done (kOk) or the ring is full. A message of zero
// bytes is still one (empty, final) record, hence the do-while.
RingStatus MessageSender::write_fragments(Pending& p) {
  const std::uint64_t max_fragment = ring_.max_record_payload();
  do {
    const std::uint64_t left = p.bytes.size() - p.offset;
    const std::uint64_t n = std::min(left, max_fragment);
    const std::uint16_t flags = n < left ? kRecordMore : 0;
    RingStatus s = ring_.try_push(p.kind, flags, std::string_view(p.bytes).substr(p.offset, n));
    if (s != RingStatus::kOk) return s;
    p.offset += n;
    queued_bytes_ -= n;
  } while (p.offset < p.bytes.size());
  return RingStatus::kOk;
}

RingStatus MessageReceiver::next(std::uint16_t* kind, std::string* msg) {
  if (corrupt_) return RingStatus::kCorrupt;
  // No honest record is larger than the ring, nor than a whole message.
  const std::uint64_t max_record = std::min(max_message_, ring_.capacity());
  for (;;) {
    RecordHeader h{};
    RingStatus s = ring_.try_pop(&h, &record_, max_record);
    if (s == RingStatus::kEmpty) return s;  // a partial message stays for the next call
    if (s == RingStatus::kCorrupt) return fail();
    const bool more = (h.flags & kRecordMore) != 0;
    // Unknown flag bits, and an empty fragment that is not the last, never come from
    // MessageSender. The latter would let a peer keep this loop busy forever without
    // growing the message, so both are protocol errors.
    if ((h.flags & ~kRecordMore) != 0 || (more && h.length == 0)) return fail();

    if (!in_partial_) {
      if (!more) {
        // Swapping hands the caller's old buffer back as scratch: no allocation per
        // message once both buffers have grown.
        *kind = h.kind;
        msg->swap(record_);
        return RingStatus::kOk;
      }
      in_partial_ = true;
      partial_kind_ = h.kind;
      partial_.swap(record_);
      continue;
    }
    if (h.kind != partial_kind_ || h.length > max_message_ - partial_.size()) return fail();
    partial_.append(record_);
    if (!more) {
      *kind = partial_kind_;
      msg->swap(partial_);
      partial_.clear();
      in_partial_ = false;
      return RingStatus::kOk;
    }
  }
}

// Corruption is final: the peer is presumed hostile from here on and nothing it wrote,
// not even fragments already received, is handed out.
RingStatus MessageReceiver::fail() {
  corrupt_ = true;
  in_partial_ = false;
  partial_ = std::string();
  return RingStatus::kCorrupt;
}

}  // namespace sandpool::ipc
