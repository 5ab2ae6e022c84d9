// The JSON mapping of the control operations' types (<sandpool/control/control_ops.hpp>): encode()
// writes what travels on the wire, decode() reads it back, checking each field's type and
// naming the field in its error. The server decodes arguments and encodes replies; the
// Client does the reverse: one mapping for both sides (docs/protocol.md, "Operations").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <sandpool/base/status.hpp>
#include <sandpool/control/control_ops.hpp>

namespace sandpool::ops {

// Reads the members of one JSON object into typed fields. The first error wins and every
// later read is skipped; status() is then kInvalidArgument with a message naming the field:
// `field "count": expected an unsigned integer`. Integers are range-checked, never cut.
class ArgReader {
 public:
  // `object` must outlive the reader; anything but an object fails every read.
  explicit ArgReader(const nlohmann::json& object) : object_(object) {}

  // A member that must be there (a string must also be non-empty).
  template <class T>
  ArgReader& required(std::string_view name, T* out) {
    return read(name, out, true);
  }
  // A member that may be absent (then *out keeps its value) or null only where T is optional.
  template <class T>
  ArgReader& optional(std::string_view name, T* out) {
    return read(name, out, false);
  }

  const Status& status() const { return status_; }

 private:
  template <class T>
  ArgReader& read(std::string_view name, T* out, bool required);
  template <class T>
  ArgReader& read(std::string_view name, std::optional<T>* out, bool required);
  void fail(std::string_view name, std::string_view what);

  const nlohmann::json& object_;
  Status status_;
};

// One value of each type the operations use; false when `v` is not one (or out of range).
bool read_value(const nlohmann::json& v, bool* out);
bool read_value(const nlohmann::json& v, std::string* out);
bool read_value(const nlohmann::json& v, std::uint64_t* out);
bool read_value(const nlohmann::json& v, std::uint32_t* out);
bool read_value(const nlohmann::json& v, std::int32_t* out);
bool read_value(const nlohmann::json& v, std::int64_t* out);
bool read_value(const nlohmann::json& v, std::chrono::milliseconds* out);  // unsigned ms
// Wall-clock ms since the epoch, within the system clock's range.
bool read_value(const nlohmann::json& v, std::chrono::system_clock::time_point* out);
bool read_value(const nlohmann::json& v, double* out);
bool read_value(const nlohmann::json& v, std::vector<std::string>* out);
// What a reader of `out`'s type expected: "an unsigned integer", "a string", ...
std::string_view expected(const bool*);
std::string_view expected(const std::string*);
std::string_view expected(const std::uint64_t*);
std::string_view expected(const std::uint32_t*);
std::string_view expected(const std::int32_t*);
std::string_view expected(const std::int64_t*);
std::string_view expected(const std::chrono::milliseconds*);
std::string_view expected(const std::chrono::system_clock::time_point*);
std::string_view expected(const double*);
std::string_view expected(const std::vector<std::string>*);

// The unsigned integers of the array member `name` of `j` (absent: *out stays empty).
Status decode_numbers(const nlohmann::json& j, std::string_view name,
                      std::vector<std::uint64_t>* out);

// The array member `name` of `j`, each element decoded by decode(); absent: *out stays empty.
// An element's error names the array and the element's index.
template <class T>
Status decode_array(const nlohmann::json& j, std::string_view name, std::vector<T>* out) {
  if (!j.is_object()) return Status::invalid("expected an object");
  const auto it = j.find(name);
  if (it == j.end()) return Status::ok();
  if (!it->is_array()) {
    return Status::invalid("field \"" + std::string(name) + "\": expected an array");
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    T value;
    if (Status st = decode((*it)[i], &value); !st) {
      return st.with_context(std::string(name) + "[" + std::to_string(i) + "]");
    }
    out->push_back(std::move(value));
  }
  return Status::ok();
}

template <class T>
ArgReader& ArgReader::read(std::string_view name, T* out, bool required) {
  if (!status_.is_ok()) return *this;
  if (!object_.is_object()) {
    status_ = Status::invalid("arguments: expected an object");
    return *this;
  }
  const auto it = object_.find(name);
  if (it == object_.end()) {
    if (required) fail(name, std::string("missing, expected ") + std::string(expected(out)));
    return *this;
  }
  T value{};
  if (!read_value(*it, &value)) {
    fail(name, std::string("expected ") + std::string(expected(out)));
    return *this;
  }
  if constexpr (std::is_same_v<T, std::string>) {
    if (required && value.empty()) {
      fail(name, "expected a non-empty string");
      return *this;
    }
  }
  *out = std::move(value);
  return *this;
}

template <class T>
ArgReader& ArgReader::read(std::string_view name, std::optional<T>* out, bool required) {
  if (!status_.is_ok()) return *this;
  if (!required && object_.is_object() && !object_.contains(name)) return *this;
  if (object_.is_object() && object_.contains(name) && object_[std::string(name)].is_null()) {
    out->reset();  // null: the optional's "none"
    return *this;
  }
  T value{};
  read(name, &value, required);
  if (status_.is_ok()) *out = std::move(value);
  return *this;
}

// --- The operations' types --------------------------------------------------------------------
// decode() returns kInvalidArgument naming the field (a server reading arguments) or, for a
// reply, the same message (the Client turns it into kProtocol).

nlohmann::json encode(const TaskIdArgs& a);
Status decode(const nlohmann::json& j, TaskIdArgs* out);
nlohmann::json encode(const WaitArgs& a);
Status decode(const nlohmann::json& j, WaitArgs* out);
nlohmann::json encode(const AttemptAccount& a);
Status decode(const nlohmann::json& j, AttemptAccount* out);
nlohmann::json encode(const TaskAccount& a);
Status decode(const nlohmann::json& j, TaskAccount* out);
nlohmann::json encode(const TaskListArgs& a);
Status decode(const nlohmann::json& j, TaskListArgs* out);
nlohmann::json encode(const TaskSummary& t);
Status decode(const nlohmann::json& j, TaskSummary* out);
nlohmann::json encode(const TaskListReply& r);
Status decode(const nlohmann::json& j, TaskListReply* out);
nlohmann::json encode(const CancelReply& r);
Status decode(const nlohmann::json& j, CancelReply* out);

// Submits (op_json_submit.cpp).
nlohmann::json encode(const SubmitArgs& a);
Status decode(const nlohmann::json& j, SubmitArgs* out);
nlohmann::json encode(const SubmitReply& r);
Status decode(const nlohmann::json& j, SubmitReply* out);
nlohmann::json encode(const SubmitEvent& e);
Status decode(const nlohmann::json& j, SubmitEvent* out);
nlohmann::json encode(const SubmitBatchArgs& a);
Status decode(const nlohmann::json& j, SubmitBatchArgs* out);
nlohmann::json encode(const BatchRefusal& r);
Status decode(const nlohmann::json& j, BatchRefusal* out);
nlohmann::json encode(const SubmitBatchReply& r);
Status decode(const nlohmann::json& j, SubmitBatchReply* out);
nlohmann::json encode(const PoolArgs& a);
Status decode(const nlohmann::json& j, PoolArgs* out);
nlohmann::json encode(const ScaleArgs& a);
Status decode(const nlohmann::json& j, ScaleArgs* out);
nlohmann::json encode(const StrategyArgs& a);
Status decode(const nlohmann::json& j, StrategyArgs* out);
nlohmann::json encode(const RestartArgs& a);
Status decode(const nlohmann::json& j, RestartArgs* out);
nlohmann::json encode(const KillWorkerArgs& a);
Status decode(const nlohmann::json& j, KillWorkerArgs* out);
nlohmann::json encode(const PoolStateReply& r);
Status decode(const nlohmann::json& j, PoolStateReply* out);

// Reads (op_json_reads.cpp).
nlohmann::json encode(const ScheduleNameArgs& a);
Status decode(const nlohmann::json& j, ScheduleNameArgs* out);
nlohmann::json encode(const ScheduleInfo& s);
Status decode(const nlohmann::json& j, ScheduleInfo* out);
nlohmann::json encode(const ScheduleListReply& r);
Status decode(const nlohmann::json& j, ScheduleListReply* out);
nlohmann::json encode(const ScheduleAddArgs& a);
Status decode(const nlohmann::json& j, ScheduleAddArgs* out);
nlohmann::json encode(const ScheduleRunReply& r);
Status decode(const nlohmann::json& j, ScheduleRunReply* out);
nlohmann::json encode(const NoArgs& a);
Status decode(const nlohmann::json& j, NoArgs* out);
nlohmann::json encode(const EventsArgs& a);
Status decode(const nlohmann::json& j, EventsArgs* out);
nlohmann::json encode(const EmptyReply& r);
Status decode(const nlohmann::json& j, EmptyReply* out);
nlohmann::json encode(const VersionReply& r);
Status decode(const nlohmann::json& j, VersionReply* out);
nlohmann::json encode(const PoolEventRecord& e);
Status decode(const nlohmann::json& j, PoolEventRecord* out);
nlohmann::json encode(const NoEvent& e);
Status decode(const nlohmann::json& j, NoEvent* out);
nlohmann::json encode(const PoolFilterArgs& a);
Status decode(const nlohmann::json& j, PoolFilterArgs* out);
nlohmann::json encode(const PoolStatus& p);
Status decode(const nlohmann::json& j, PoolStatus* out);
nlohmann::json encode(const DeadLetterStoreStatus& d);
Status decode(const nlohmann::json& j, DeadLetterStoreStatus* out);
nlohmann::json encode(const JournalStatus& d);
nlohmann::json encode(const RedisStatus& d);
Status decode(const nlohmann::json& j, RedisStatus* out);
Status decode(const nlohmann::json& j, JournalStatus* out);
nlohmann::json encode(const StatusReply& r);
Status decode(const nlohmann::json& j, StatusReply* out);
nlohmann::json encode(const WorkerStatus& w);
Status decode(const nlohmann::json& j, WorkerStatus* out);
nlohmann::json encode(const PoolTarget& p);
Status decode(const nlohmann::json& j, PoolTarget* out);
nlohmann::json encode(const WorkersReply& r);
Status decode(const nlohmann::json& j, WorkersReply* out);
nlohmann::json encode(const TenantWaiting& t);
Status decode(const nlohmann::json& j, TenantWaiting* out);
nlohmann::json encode(const PoolCounters& p);
Status decode(const nlohmann::json& j, PoolCounters* out);
nlohmann::json encode(const StatsReply& r);
Status decode(const nlohmann::json& j, StatsReply* out);

// Dead letters (op_json_dlq.cpp).
nlohmann::json encode(const DlqFilter& f);
Status decode(const nlohmann::json& j, DlqFilter* out);
nlohmann::json encode(const DlqListArgs& a);
Status decode(const nlohmann::json& j, DlqListArgs* out);
nlohmann::json encode(const DeadLetterEntry& e);
Status decode(const nlohmann::json& j, DeadLetterEntry* out);
nlohmann::json encode(const DlqListReply& r);
Status decode(const nlohmann::json& j, DlqListReply* out);
nlohmann::json encode(const DlqShowArgs& a);
Status decode(const nlohmann::json& j, DlqShowArgs* out);
nlohmann::json encode(const LetterOptions& o);
Status decode(const nlohmann::json& j, LetterOptions* out);
nlohmann::json encode(const DlqShowReply& r);
Status decode(const nlohmann::json& j, DlqShowReply* out);
nlohmann::json encode(const DlqSelector& s);
Status decode(const nlohmann::json& j, DlqSelector* out);
nlohmann::json encode(const DlqReplayReply& r);
Status decode(const nlohmann::json& j, DlqReplayReply* out);
nlohmann::json encode(const DlqPurgeReply& r);
Status decode(const nlohmann::json& j, DlqPurgeReply* out);

// Dead-letter import and admin (op_json_admin.cpp).
nlohmann::json encode(const DlqImportArgs& a);
Status decode(const nlohmann::json& j, DlqImportArgs* out);
nlohmann::json encode(const DlqImportReply& r);
Status decode(const nlohmann::json& j, DlqImportReply* out);
nlohmann::json encode(const ReloadReconfigured& r);
Status decode(const nlohmann::json& j, ReloadReconfigured* out);
nlohmann::json encode(const ReloadScaled& r);
Status decode(const nlohmann::json& j, ReloadScaled* out);
nlohmann::json encode(const ReloadFailure& r);
Status decode(const nlohmann::json& j, ReloadFailure* out);
nlohmann::json encode(const ReloadReply& r);
Status decode(const nlohmann::json& j, ReloadReply* out);
nlohmann::json encode(const ShutdownArgs& a);
Status decode(const nlohmann::json& j, ShutdownArgs* out);
nlohmann::json encode(const ShutdownReply& r);
Status decode(const nlohmann::json& j, ShutdownReply* out);

}  // namespace sandpool::ops
