// Whole messages over a ring: MessageSender cuts a message larger than one record into
// fragments (kRecordMore on all but the last) and keeps what does not fit queued until
// pump(); MessageReceiver reassembles, refusing anything over max_message.
// Thread-safety: one thread per object, like the ring views they wrap.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include <sandpool/ipc/ring.hpp>

namespace sandpool::ipc {

class MessageSender {
 public:
  MessageSender() = default;
  explicit MessageSender(RingProducer ring) : ring_(ring) {}

  // Writes the message now if nothing is queued and it fits; otherwise queues a copy and
  // writes what fits. Returns kOk (written or queued) or kCorrupt (the consumer's tail is
  // impossible; final: every later call returns kCorrupt too). The caller bounds
  // bytes.size() by max_message beforehand. Nothing is visible before publish().
  RingStatus send(std::uint16_t kind, std::string_view bytes);
  // Writes queued fragments as space allows. Returns kOk when nothing is left queued,
  // kFull when some is, kCorrupt on a bad tail.
  RingStatus pump();
  bool has_queued() const { return !queue_.empty(); }
  std::uint64_t queued_bytes() const { return queued_bytes_; }
  // See RingProducer::publish.
  bool publish() { return ring_.publish(); }
  RingProducer& ring() { return ring_; }

 private:
  struct Pending {
    std::uint16_t kind;
    std::string bytes;
    std::uint64_t offset = 0;  // bytes already written as fragments
  };
  RingStatus write_fragments(Pending& p);
  RingProducer ring_;
  std::deque<Pending> queue_;
  std::uint64_t queued_bytes_ = 0;
  bool corrupt_ = false;
};

class MessageReceiver {
 public:
  MessageReceiver() = default;
  MessageReceiver(RingConsumer ring, std::uint64_t max_message)
      : ring_(ring), max_message_(max_message) {}

  // Returns kOk with *kind and *msg set to the next whole message; kEmpty when no whole
  // message is available yet (fragments read so far are kept); kCorrupt when the peer
  // broke the ring, mixed kinds within one fragmented message, sent an empty or
  // unknown-flagged fragment, or exceeded max_message. kCorrupt is final: every later call
  // returns it too, and no fragment of the broken message is ever handed out.
  // Call release() before sleeping on kEmpty: a message larger than the ring only
  // completes if its first fragments' space is given back.
  RingStatus next(std::uint16_t* kind, std::string* msg);
  // See RingConsumer::release.
  bool release() { return ring_.release(); }
  RingConsumer& ring() { return ring_; }

 private:
  RingStatus fail();
  RingConsumer ring_;
  std::uint64_t max_message_ = 0;
  std::string record_;   // scratch for one record
  std::string partial_;  // fragments of an incomplete message
  std::uint16_t partial_kind_ = 0;
  bool in_partial_ = false;
  bool corrupt_ = false;
};

}  // namespace sandpool::ipc
