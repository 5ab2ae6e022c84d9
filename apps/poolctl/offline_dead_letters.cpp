#include "offline_dead_letters.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>

#include <sandpool/store/dead_letters.hpp>
#include <sandpool/store/task_journal_options.hpp>

namespace sandpool::poolctl {
namespace {

using nlohmann::json;

json letter_json(const DeadLetter& l) {
  json history = json::array();
  for (const Attempt& a : l.task.history) {
    json e{{"number", a.number},         {"outcome", to_string(a.outcome)},
           {"error", a.error},           {"worker_pid", a.worker_pid},
           {"started_ms", a.started_ms}, {"ended_ms", a.ended_ms}};
    if (!a.backtrace.empty()) e["backtrace"] = a.backtrace;
    history.push_back(std::move(e));
  }
  json j{{"id", l.letter_id},
         {"task_id", l.task.id},
         {"pool", l.pool},
         {"type", l.task.type},
         {"reason", to_string(l.task.reason)},
         {"dead_lettered_ms", l.dead_lettered_ms},
         {"attempts", l.task.attempts()},
         {"error", l.task.error},
         {"history", std::move(history)}};
  if (!l.options.tenant.empty()) j["tenant"] = l.options.tenant;  // as the service's letters
  return j;
}

Result<DeadLetterFilter> filter_of(const json& f) {
  DeadLetterFilter out;
  if (f.contains("pool")) out.pool = f["pool"].get<std::string>();
  if (f.contains("type")) out.type = f["type"].get<std::string>();
  if (f.contains("reason")) {
    const std::string r = f["reason"].get<std::string>();
    for (int i = 0; i <= static_cast<int>(DeadReason::kRejected); ++i) {
      if (to_string(static_cast<DeadReason>(i)) == r) out.reason = static_cast<DeadReason>(i);
    }
    if (!out.reason) return Status::invalid("no dead-letter reason named " + r);
  }
  if (f.contains("since_ms")) out.from_ms = f["since_ms"].get<std::int64_t>();
  if (f.contains("until_ms")) out.until_ms = f["until_ms"].get<std::int64_t>();
  return out;
}

}  // namespace

OfflineDeadLetters::OfflineDeadLetters(std::unique_ptr<DeadLetterStore> store)
    : store_(std::move(store)) {}
OfflineDeadLetters::~OfflineDeadLetters() = default;

Result<std::unique_ptr<OfflineDeadLetters>> OfflineDeadLetters::open(const std::string& dir,
                                                                     Journal journal) {
  std::error_code ec;
  if (!std::filesystem::exists(dir + "/dead_letters.db", ec)) {
    return Status::error(Code::kNotFound, "no dead-letter store in " + dir);
  }
  DeadLetterStoreOptions o;
  o.state_dir = dir;
  o.max_count = 0;  // no retention: reading offline deletes nothing
  o.max_age = std::chrono::milliseconds(0);
  o.logger = std::make_shared<spdlog::logger>("poolctl-dlq", spdlog::sinks_init_list{});
  if (journal == Journal::kConsult) {
    // Consulted, not maintained: no retention bound deletes a finished task, no live task is
    // carried forward (the slack is beyond any file; 2 * live + slack must not wrap), and no
    // thread watches syncs.
    TaskJournalOptions j;
    j.max_finished = 0;
    j.max_finished_age = std::chrono::milliseconds(0);
    j.max_finished_bytes = 0;
    j.compaction_slack = std::uint64_t{1} << 60;
    j.sync_timeout = std::chrono::milliseconds(0);
    o.journal = j;
  }
  auto store = DeadLetterStore::open(std::move(o));
  if (!store) return store.status();
  return std::unique_ptr<OfflineDeadLetters>(new OfflineDeadLetters(std::move(store).value()));
}

// The cursor is "<dead_lettered_ms>:<letter_id>" of the last letter of the previous page.
Result<json> OfflineDeadLetters::list(const json& f) {
  auto filter = filter_of(f);
  if (!filter) return filter.status();
  DeadLetterPage page;
  page.limit = f.value("limit", std::size_t{100});
  if (f.contains("cursor")) {
    const std::string c = f["cursor"].get<std::string>();
    const auto colon = c.find(':');
    if (colon == std::string::npos) return Status::invalid("bad cursor " + c);
    page.after = DeadLetterCursor{std::stoll(c.substr(0, colon)), std::stoull(c.substr(colon + 1))};
  }
  auto l = store_->list(*filter, page);
  if (!l) return l.status();
  json entries = json::array();
  for (const DeadLetter& d : l->letters) {
    json e = letter_json(d);
    e.erase("history");
    entries.push_back(std::move(e));
  }
  json reply{{"entries", std::move(entries)}};
  if (l->next) {
    reply["next_cursor"] =
        std::to_string(l->next->dead_lettered_ms) + ":" + std::to_string(l->next->letter_id);
  }
  return reply;
}

Result<Letter> OfflineDeadLetters::show(std::uint64_t id) {
  auto l = store_->get(id);
  if (!l) return l.status();
  return Letter{letter_json(*l), l->payload};
}

Result<json> OfflineDeadLetters::purge(const json& selector) {
  Result<std::uint64_t> n = std::uint64_t{0};
  if (selector.contains("id")) {
    n = store_->purge(selector["id"].get<std::uint64_t>());
  } else if (selector.contains("older_than_ms")) {
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    n = store_->purge_older_than(now - selector["older_than_ms"].get<std::int64_t>());
  } else {
    auto filter = filter_of(selector.value("filter", json::object()));
    if (!filter) return filter.status();
    n = store_->purge(*filter);  // {"all": true}: the empty filter matches every letter
  }
  if (!n) return n.status();
  return json{{"purged", *n}};
}

Result<json> OfflineDeadLetters::import_letters(const std::vector<DeadLetter>& letters) {
  auto r = store_->import_letters(letters);
  if (!r) return r.status();
  return json{{"imported", r->imported}, {"already_present", r->already_present + r->journaled}};
}

}  // namespace sandpool::poolctl
