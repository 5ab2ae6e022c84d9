// The worker channel's message codec: one cereal serialize() per message, through the
// bounded archives and field wrappers of wire_archive.hpp.
#include <sandpool/ipc/messages.hpp>

#include <exception>
#include <string>

#include "wire_archive.hpp"

namespace sandpool::ipc {

using wire::field;
using wire::ranged_byte;

// The wire order of each message is the order of the members named here. Appending a
// member is a protocol version change (layout.hpp's kRegionVersion), not a silent one.
template <class Ar>
void serialize(Ar& ar, TaskMsg& m) {
  ar(field("id", m.id), field("attempt", m.attempt), field("deadline_mono_ms", m.deadline_mono_ms),
     field("type", m.type), field("payload", m.payload));
}

// Encoding only: the manager sends a task straight from its record, without copying the
// payload into a TaskMsg first. Same members, same order as TaskMsg.
template <class Ar>
void save(Ar& ar, const TaskMsgView& m) {
  ar(field("id", m.id), field("attempt", m.attempt), field("deadline_mono_ms", m.deadline_mono_ms),
     field("type", m.type), field("payload", m.payload));
}

template <class Ar>
void serialize(Ar& ar, CancelMsg& m) {
  ar(field("id", m.id));
}

template <class Ar>
void serialize(Ar&, StopMsg&) {}

template <class Ar>
void serialize(Ar& ar, ReadyMsg& m) {
  ar(field("pid", m.pid), field("task_types", m.task_types), field("isolation", m.isolation));
}

template <class Ar>
void serialize(Ar& ar, ResultMsg& m) {
  ar(field("id", m.id), ranged_byte("status", m.status, static_cast<std::uint8_t>(5)),
     field("data", m.data), field("error", m.error));
}

template <class Ar>
void serialize(Ar& ar, ProgressMsg& m) {
  ar(field("id", m.id), field("data", m.data));
}

template <class Ar>
void serialize(Ar& ar, LogMsg& m) {
  ar(field("id", m.id), ranged_byte("level", m.level, static_cast<std::uint8_t>(3)),
     field("text", m.text));
}

namespace {

static_assert(static_cast<std::uint8_t>(TaskStatus::kLimit) == 5,
              "ResultMsg's status range check assumes kLimit is the last value");

// The message's name for error messages, e.g. "TaskMsg".
constexpr const char* message_name(MsgKind kind) {
  switch (kind) {
    case MsgKind::kTask:
      return "TaskMsg";
    case MsgKind::kCancel:
      return "CancelMsg";
    case MsgKind::kStop:
      return "StopMsg";
    case MsgKind::kReady:
      return "ReadyMsg";
    case MsgKind::kResult:
      return "ResultMsg";
    case MsgKind::kProgress:
      return "ProgressMsg";
    case MsgKind::kLog:
      return "LogMsg";
  }
  return "message";
}

// One set of archives per thread, rebound for each message (see wire_archive.hpp).
struct Archives {
  wire::SizeArchive size;
  wire::StringOutputArchive out;
  wire::BoundedInputArchive in;
};
Archives& archives() {
  thread_local Archives a;
  return a;
}

template <class M>
void encode_message(const M& m, std::string* out) {
  Archives& a = archives();
  out->clear();
  // A kept buffer (kEncodeScratchBytes) takes the message without counting its bytes first,
  // a second walk of its members (~10% of a worker's CPU per no-op task): a larger message
  // grows it by doubling, a few times at most, and it keeps that capacity.
  if (out->capacity() < kEncodeScratchBytes) {
    a.size.reset();
    a.size(m);
    out->reserve(a.size.size());
  }
  a.out.rebind(out);
  a.out(m);
  a.out.rebind(nullptr);
}

template <class M>
Status decode_message(std::string_view in, M* m) {
  const char* what = message_name(M::kKind);
  try {
    wire::BoundedInputArchive& ar = archives().in;
    ar.rebind(in);
    ar(*m);
    if (ar.remaining() != 0) {
      return Status::protocol(std::string(what) + ": " + std::to_string(ar.remaining()) +
                              " trailing bytes");
    }
    return Status::ok();
  } catch (const wire::DecodeError& e) {
    return Status::protocol(std::string(what) + "." + e.field() + ": " + e.what());
  } catch (const std::exception& e) {
    // Nothing else is expected (lengths are capped before allocating); still, no
    // exception leaves the codec.
    return Status::protocol(std::string(what) + ": " + e.what());
  }
}

}  // namespace

void encode(const TaskMsg& m, std::string* out) { encode_message(m, out); }
void encode(const TaskMsgView& m, std::string* out) { encode_message(m, out); }
void encode(const CancelMsg& m, std::string* out) { encode_message(m, out); }
void encode(const StopMsg& m, std::string* out) { encode_message(m, out); }
void encode(const ReadyMsg& m, std::string* out) { encode_message(m, out); }
void encode(const ResultMsg& m, std::string* out) { encode_message(m, out); }
void encode(const ProgressMsg& m, std::string* out) { encode_message(m, out); }
void encode(const LogMsg& m, std::string* out) { encode_message(m, out); }

Status decode(std::string_view in, TaskMsg* m) { return decode_message(in, m); }
Status decode(std::string_view in, CancelMsg* m) { return decode_message(in, m); }
Status decode(std::string_view in, StopMsg* m) { return decode_message(in, m); }
Status decode(std::string_view in, ReadyMsg* m) { return decode_message(in, m); }
Status decode(std::string_view in, ResultMsg* m) { return decode_message(in, m); }
Status decode(std::string_view in, ProgressMsg* m) { return decode_message(in, m); }
Status decode(std::string_view in, LogMsg* m) { return decode_message(in, m); }

}  // namespace sandpool::ipc
