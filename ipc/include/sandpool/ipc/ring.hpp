// SPSC byte ring over shared memory, viewed by role: RingProducer and RingConsumer each
// keep their own position in private memory and only *publish* it to the shared control
// block; the peer's published position is loaded once per batch, bounded and checked for
// monotonicity, so a hostile peer can at worst make this side report kCorrupt.
//
// Records: an 8-byte RecordHeader then `length` payload bytes, padded to 8. Positions stay
// 8-aligned, so a header never straddles the end of the ring; a payload may (two copies).
//
// Thread-safety: one producer thread and one consumer thread per ring; the objects
// themselves are not shared. Neither side blocks: waiting is the channel's job (wake.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <sandpool/ipc/layout.hpp>

namespace sandpool::ipc {

struct RecordHeader {
  std::uint32_t length;  // payload bytes that follow
  std::uint16_t kind;    // MsgKind
  std::uint16_t flags;   // kRecordMore
};
static_assert(sizeof(RecordHeader) == 8);

// Another fragment of the same message follows this record.
inline constexpr std::uint16_t kRecordMore = 1;

enum class RingStatus {
  kOk,       // done
  kFull,     // producer: no room now (call again after the consumer frees space)
  kEmpty,    // consumer: nothing published
  kCorrupt,  // the peer published an impossible position or record: protocol error
};

// Returns the bytes a record of `payload` bytes occupies in the ring.
constexpr std::uint64_t record_span(std::uint64_t payload) {
  return sizeof(RecordHeader) + align_up(payload, 8);
}

class RingProducer {
 public:
  RingProducer() = default;
  // ctl and data live in the mapped region and must outlive this view. capacity is a power
  // of two and a multiple of 8.
  RingProducer(RingControl* ctl, std::byte* data, std::uint64_t capacity)
      : ctl_(ctl), data_(data), capacity_(capacity) {}

  // The largest payload one record may carry: a quarter of the ring, so several records
  // are in flight and a message larger than that is fragmented by the channel.
  std::uint64_t max_record_payload() const { return capacity_ / 4 - sizeof(RecordHeader); }

  // Writes one record (payload a then b, concatenated). It is not visible to the consumer
  // until publish(). Returns kOk, kFull (nothing written), or kCorrupt (the consumer's
  // published tail is impossible). Precondition: a.size()+b.size() <= max_record_payload().
  RingStatus try_push(std::uint16_t kind, std::uint16_t flags, std::string_view a,
                      std::string_view b = {}) {
    const std::uint64_t len = a.size() + b.size();
    const std::uint64_t need = record_span(len);
    if (head_ + need - cached_tail_ > capacity_) {
      RingStatus s = refresh_tail();
      if (s != RingStatus::kOk) return s;
      if (head_ + need - cached_tail_ > capacity_) return RingStatus::kFull;
    }
    RecordHeader h{static_cast<std::uint32_t>(len), kind, flags};
    copy_in(head_, &h, sizeof h);
    copy_in(head_ + sizeof h, a.data(), a.size());
    copy_in(head_ + sizeof h + a.size(), b.data(), b.size());
    head_ += need;
    return RingStatus::kOk;
  }

  // Returns true iff a record of `payload` bytes fits right now (refreshing the tail).
  bool fits(std::uint64_t payload) {
    if (head_ + record_span(payload) - cached_tail_ <= capacity_) return true;
    return refresh_tail() == RingStatus::kOk &&
           head_ + record_span(payload) - cached_tail_ <= capacity_;
  }

  // Makes every record written so far visible. Returns true iff the consumer had gone to
  // sleep; the caller must then wake it (data_seq was bumped here).
  bool publish() {
    if (head_ == published_) return false;
    published_ = head_;
    // Dekker with RingConsumer::prepare_sleep: both sides store, then load the other's
    // word, all seq_cst, so either we see the flag or the consumer sees our head. (Not
    // release/relaxed plus atomic_thread_fence: TSan does not model fences, and g++
    // rejects them under -fsanitize=thread with -Werror. On x86 a seq_cst store costs the
    // same as the fence did.)
    ctl_->head.store(head_, std::memory_order_seq_cst);
    if (ctl_->consumer_sleeping.load(std::memory_order_seq_cst) == 0) return false;
    if (ctl_->consumer_sleeping.exchange(0, std::memory_order_relaxed) == 0) return false;
    ctl_->data_seq.fetch_add(1, std::memory_order_release);
    return true;
  }

  // Before blocking for space: announces it. Returns true iff there is still no room for
  // `payload` bytes (the caller may block on space_seq's value loaded, with acquire, before
  // this call).
  bool prepare_wait(std::uint64_t payload) {
    // Dekker with RingConsumer::release (see publish): store the flag, then load the tail
    // (in fits), both seq_cst.
    ctl_->producer_waiting.store(1, std::memory_order_seq_cst);
    if (fits(payload)) {
      ctl_->producer_waiting.store(0, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  void cancel_wait() { ctl_->producer_waiting.store(0, std::memory_order_relaxed); }

  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t position() const { return head_; }
  // The head last stored to the shared word: what that word must still say, since only
  // this side writes it (a worker checks its own region with it, region_check.hpp).
  std::uint64_t published() const { return published_; }
  // Returns true iff the consumer's shared tail is one refresh_tail() would accept now.
  bool peer_position_plausible() const {
    const std::uint64_t t = ctl_->tail.load(std::memory_order_acquire);
    return t >= cached_tail_ && t <= published_ && (t & 7) == 0;
  }
  // Bytes written but not yet consumed, as far as this side knows.
  std::uint64_t in_use() const { return head_ - cached_tail_; }
  RingControl* control() const { return ctl_; }

 private:
  // Loads the consumer's tail once and checks it: never behind what we saw, never ahead of
  // what we published.
  RingStatus refresh_tail() {
    // seq_cst rather than acquire for prepare_wait's Dekker; the same instruction as an
    // acquire load on x86 and ARMv8.
    std::uint64_t t = ctl_->tail.load(std::memory_order_seq_cst);
    if (t < cached_tail_ || t > published_ || (t & 7) != 0) return RingStatus::kCorrupt;
    cached_tail_ = t;
    return RingStatus::kOk;
  }
  void copy_in(std::uint64_t pos, const void* src, std::uint64_t n) {
    if (n == 0) return;
    const std::uint64_t off = pos & (capacity_ - 1);
    const std::uint64_t first = n < capacity_ - off ? n : capacity_ - off;
    std::memcpy(data_ + off, src, first);
    if (first < n) std::memcpy(data_, static_cast<const std::byte*>(src) + first, n - first);
  }

  RingControl* ctl_ = nullptr;
  std::byte* data_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::uint64_t head_ = 0;         // private write position
  std::uint64_t published_ = 0;    // last head stored to ctl_->head
  std::uint64_t cached_tail_ = 0;  // consumer's tail as last loaded
};

class RingConsumer {
 public:
  RingConsumer() = default;
  RingConsumer(RingControl* ctl, const std::byte* data, std::uint64_t capacity)
      : ctl_(ctl), data_(data), capacity_(capacity) {}

  // Copies the next record out: its header into *h and its payload into *out (replacing
  // the contents). Loads the producer's head only when the records seen so far are used
  // up. Returns kOk, kEmpty, or kCorrupt (impossible head, or a record that claims more
  // than was published or more than max_payload).
  RingStatus try_pop(RecordHeader* h, std::string* out, std::uint64_t max_payload) {
    if (tail_ == cached_head_) {
      std::uint64_t hd = ctl_->head.load(std::memory_order_acquire);
      if (hd < cached_head_ || hd - tail_ > capacity_ || (hd & 7) != 0) return RingStatus::kCorrupt;
      cached_head_ = hd;
      if (tail_ == cached_head_) return RingStatus::kEmpty;
    }
    const std::uint64_t avail = cached_head_ - tail_;
    if (avail < sizeof(RecordHeader)) return RingStatus::kCorrupt;
    copy_out(tail_, h, sizeof *h);
    if (h->length > max_payload || record_span(h->length) > avail) return RingStatus::kCorrupt;
    out->resize(h->length);
    copy_out(tail_ + sizeof *h, out->data(), h->length);
    tail_ += record_span(h->length);
    return RingStatus::kOk;
  }

  // Returns true iff a record is published and not yet popped (loads the head).
  bool has_data() {
    if (tail_ != cached_head_) return true;
    return ctl_->head.load(std::memory_order_seq_cst) != tail_;  // seq_cst: prepare_sleep
  }

  // Publishes the consumed position, freeing space. Returns true iff the producer was
  // waiting for space; the caller must then wake it (space_seq was bumped here).
  bool release() {
    if (tail_ == published_) return false;
    published_ = tail_;
    // Dekker with RingProducer::prepare_wait, like publish() with prepare_sleep.
    ctl_->tail.store(tail_, std::memory_order_seq_cst);
    if (ctl_->producer_waiting.load(std::memory_order_seq_cst) == 0) return false;
    if (ctl_->producer_waiting.exchange(0, std::memory_order_relaxed) == 0) return false;
    ctl_->space_seq.fetch_add(1, std::memory_order_release);
    return true;
  }

  // Before blocking: announces the sleep. Returns true iff the ring is still empty, in
  // which case the caller may block (on data_seq's value loaded, with acquire, before this
  // call, or on its eventfd). Returns false, with the flag cleared, when data arrived meanwhile.
  bool prepare_sleep() {
    // Dekker with RingProducer::publish: store the flag, then load the head (in has_data),
    // both seq_cst.
    ctl_->consumer_sleeping.store(1, std::memory_order_seq_cst);
    if (has_data()) {
      ctl_->consumer_sleeping.store(0, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  void cancel_sleep() { ctl_->consumer_sleeping.store(0, std::memory_order_relaxed); }

  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t position() const { return tail_; }
  // The tail last stored to the shared word (see RingProducer::published).
  std::uint64_t published() const { return published_; }
  RingControl* control() const { return ctl_; }

 private:
  void copy_out(std::uint64_t pos, void* dst, std::uint64_t n) const {
    if (n == 0) return;
    const std::uint64_t off = pos & (capacity_ - 1);
    const std::uint64_t first = n < capacity_ - off ? n : capacity_ - off;
    std::memcpy(dst, data_ + off, first);
    if (first < n) std::memcpy(static_cast<std::byte*>(dst) + first, data_, n - first);
  }

  RingControl* ctl_ = nullptr;
  const std::byte* data_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::uint64_t tail_ = 0;         // private read position
  std::uint64_t published_ = 0;    // last tail stored to ctl_->tail
  std::uint64_t cached_head_ = 0;  // producer's head as last loaded
};

}  // namespace sandpool::ipc
