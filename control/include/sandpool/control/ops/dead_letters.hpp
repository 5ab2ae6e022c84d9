// The dead-letter operations: dlq_list, dlq_show, dlq_replay, dlq_purge, dlq_import
// (docs/protocol.md, docs/dead-letters.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/control/ops/op_info.hpp>
#include <sandpool/control/ops/tasks.hpp>

namespace sandpool::ops {

// Which letters (DeadLetterFilter); an absent member matches any. A member of the wrong type
// is refused `bad_request` naming it; reason must be a dead-letter reason
// (docs/dead-letters.md).
struct DlqFilter {
  std::optional<std::string> pool;
  std::optional<std::string> type;
  std::optional<std::string> reason;
  std::optional<std::uint64_t> task_id;
  std::optional<std::int64_t> since_ms;
  std::optional<std::int64_t> until_ms;
};

// `dlq_list`: the filter's members sit beside limit and cursor.
struct DlqListArgs {
  DlqFilter filter;
  std::uint64_t limit = 100;          // poold keeps it within 1..10000
  std::optional<std::string> cursor;  // a previous reply's next_cursor
};

// One letter: its task's account (TaskAccount's members) and the letter's own.
struct DeadLetterEntry {
  TaskAccount task;
  std::uint64_t letter_id = 0;
  std::string pool;
  std::int64_t dead_lettered_ms = 0;
  std::uint64_t payload_bytes = 0;
};

struct DlqListReply {
  std::vector<DeadLetterEntry> entries;
  std::optional<std::string> next_cursor;  // absent on the last page
};

// `dlq_show`: the letter id; the reply's blob carries the payload.
struct DlqShowArgs {
  std::uint64_t id = 0;
};

// The submit options the letter's task had.
struct LetterOptions {
  std::int32_t priority = 0;
  std::string key;
  std::optional<std::chrono::milliseconds> timeout;  // wire: timeout_ms
  std::optional<std::uint32_t> retries;
  std::string tenant;  // "" (absent on the wire): the default tenant
};

struct DlqShowReply {
  DeadLetterEntry letter;
  LetterOptions options;
};

// `dlq_replay`, `dlq_purge`: one of id, filter, (purge only) older_than_ms, or all, tried in
// that order.
struct DlqSelector {
  std::optional<std::uint64_t> id;
  std::optional<DlqFilter> filter;
  std::optional<std::chrono::milliseconds> older_than_ms;  // dlq_purge only
  bool all = false;
};

struct DlqReplayReply {
  std::vector<std::uint64_t> ids;  // the new tasks' ids (wire: also their count, `replayed`)
  std::uint64_t failed = 0;
  std::string first_error;  // "" when none (then absent on the wire)
};

struct DlqPurgeReply {
  std::uint64_t purged = 0;  // what was purged, also when the purge stopped part way
  std::string first_error;   // why it stopped part way; "" when it did not (absent on the wire)
};

// `dlq_import`: the spill-file lines travel in the request's blob; source and first_line
// name them in a parse error.
struct DlqImportArgs {
  std::string source = "request";
  std::uint64_t first_line = 1;  // from 1
};

struct DlqImportReply {
  std::uint64_t imported = 0;
  std::uint64_t already_present = 0;
};

struct DlqList {
  static constexpr std::string_view kName = "dlq_list";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kReads;
  using Args = DlqListArgs;
  using Reply = DlqListReply;
};
struct DlqShow {
  static constexpr std::string_view kName = "dlq_show";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kReads;
  using Args = DlqShowArgs;
  using Reply = DlqShowReply;
};
struct DlqReplay {
  static constexpr std::string_view kName = "dlq_replay";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kJobs;
  using Args = DlqSelector;
  using Reply = DlqReplayReply;
};
struct DlqPurge {
  static constexpr std::string_view kName = "dlq_purge";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kJobs;
  using Args = DlqSelector;
  using Reply = DlqPurgeReply;
};
struct DlqImport {
  static constexpr std::string_view kName = "dlq_import";
  static constexpr Rights kRights = Rights::kAdmin;
  static constexpr Lane kLane = Lane::kJobs;
  using Args = DlqImportArgs;
  using Reply = DlqImportReply;
};

}  // namespace sandpool::ops
