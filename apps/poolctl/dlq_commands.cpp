// dlq list|show|replay|purge|import: the dead-letter store, through the service or, with
// --state-dir, read directly (offline_dead_letters.hpp).
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "offline_dead_letters.hpp"
#include "op_call.hpp"
#include "output.hpp"

namespace sandpool::poolctl {
namespace {

using nlohmann::json;

struct DlqArgs {
  std::string state_dir;
  std::string pool, type, reason, since, until, cursor, older_than;
  std::string file;  // import
  std::uint64_t limit = 0;
  std::uint64_t id = 0;
  bool all = false;
};

// The dlq_list filters given on the command line; --since/--until are durations ago.
json filter_of(const DlqArgs& a) {
  json f = json::object();
  if (!a.pool.empty()) f["pool"] = a.pool;
  if (!a.type.empty()) f["type"] = a.type;
  if (!a.reason.empty()) f["reason"] = a.reason;
  if (!a.since.empty()) f["since_ms"] = wall_now_ms() - duration_arg("--since", a.since).count();
  if (!a.until.empty()) f["until_ms"] = wall_now_ms() - duration_arg("--until", a.until).count();
  return f;
}

void add_filters(CLI::App* sub, DlqArgs& a) {
  sub->add_option("--pool", a.pool, "only this pool's letters");
  sub->add_option("--type", a.type, "only this task type");
  sub->add_option("--reason", a.reason, "only this reason (retries_exhausted, shutdown, ...)");
  sub->add_option("--since", a.since, "dead-lettered at most this long ago (1h, 30m)");
  sub->add_option("--until", a.until, "dead-lettered at least this long ago");
}

// replay/purge: exactly one of ID, --all, filters (purge: or --older-than).
json selector_of(const DlqArgs& a, bool purge) {
  const json f = filter_of(a);
  const int given = (a.id != 0) + a.all + !f.empty() + (purge && !a.older_than.empty());
  if (given != 1) {
    throw CLI::ValidationError(std::string("dlq ") + (purge ? "purge" : "replay"),
                               purge ? "give one of ID, --all, filters or --older-than"
                                     : "give one of ID, --all or filters");
  }
  if (a.id != 0) return {{"id", a.id}};
  if (a.all) return {{"all", true}};
  if (!f.empty()) return {{"filter", f}};
  return {{"older_than_ms", duration_arg("--older-than", a.older_than).count()}};
}

// Where the letters are: the service's dlq_* operations, or the store in --state-dir.
struct DlqBackend {
  std::function<Result<json>(const json&)> list, replay, purge;
  std::function<Result<Letter>(std::uint64_t)> show;
  std::shared_ptr<void> owner;  // the Client or the OfflineDeadLetters the functions use
};

// Runs `fn` on the backend; returns the exit code when it cannot be opened.
int with_backend(const Cli& cli, const DlqArgs& a, const std::function<int(DlqBackend&)>& fn) {
  DlqBackend b;
  if (!a.state_dir.empty()) {
    auto store = OfflineDeadLetters::open(a.state_dir);
    if (!store) return fail("dlq --state-dir", store.status());
    std::shared_ptr<OfflineDeadLetters> s = std::move(store).value();
    b.list = [s](const json& f) { return s->list(f); };
    b.show = [s](std::uint64_t id) { return s->show(id); };
    b.purge = [s](const json& sel) { return s->purge(sel); };
    b.owner = s;
    return fn(b);
  }
  auto client = connect(cli);
  if (!client) return kExitUnreachable;
  auto c = std::make_shared<Client>(std::move(client).value());
  b.list = [c](const json& f) { return json_call_from<ops::DlqList>(*c, f); };
  b.show = [c](std::uint64_t id) -> Result<Letter> {
    auto r = c->dlq_show(id);
    if (!r) return r.status();
    return Letter{ops::encode(r->reply), std::move(r->blob)};
  };
  b.replay = [c](const json& sel) { return json_call_from<ops::DlqReplay>(*c, sel); };
  b.purge = [c](const json& sel) { return json_call_from<ops::DlqPurge>(*c, sel); };
  b.owner = c;
  return fn(b);
}

int finish(const Cli& cli, const std::string& what, const Result<json>& r,
           const std::function<void(const json&)>& human) {
  if (!r) return fail(what, r.status());
  cli.json ? print_json(std::cout, *r) : human(*r);
  return kExitOk;
}

// The service's letters carry the task's fields (its `id` is the task id) plus `letter_id`;
// the offline store's carry the letter id as `id`. The table shows the id that show, replay
// and purge take first, as `id`, in both.
json letter_rows(const json& entries) {
  json rows = json::array();
  for (json e : entries) {
    if (e.contains("letter_id")) {
      e["id"] = json(e["letter_id"]);
      e.erase("letter_id");
    }
    rows.push_back(std::move(e));
  }
  return rows;
}

int run_list(const Cli& cli, DlqBackend& backend, const DlqArgs& a) {
  json f = filter_of(a);
  if (!a.cursor.empty()) f["cursor"] = a.cursor;
  if (a.limit != 0) f["limit"] = a.limit;
  return finish(cli, "dlq list", backend.list(f), [](const json& b) {
    const json entries = b.value("entries", json::array());
    if (entries.empty()) {
      std::cout << "no dead letters\n";
    } else {
      print_object_table(std::cout, letter_rows(entries),
                         {"id", "task_id", "pool", "tenant", "type", "reason", "dead_lettered_ms",
                          "attempts", "error"},
                         wall_now_ms());
    }
    if (b.contains("next_cursor") && !b["next_cursor"].is_null()) {
      const json& c = b["next_cursor"];
      std::cout << "more: --cursor "
                << (c.is_string()
                        ? c.get<std::string>()
                        : c.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
                << "\n";
    }
  });
}

int run_show(const Cli& cli, DlqBackend& backend, std::uint64_t id) {
  auto r = backend.show(id);
  if (!r) return fail("dlq show " + std::to_string(id), r.status());
  json letter = r->letter;
  letter["payload"] = r->payload;
  if (cli.json) {
    print_json(std::cout, letter);
    return kExitOk;
  }
  letter.erase("payload");
  print_human(std::cout, letter, wall_now_ms());
  std::cout << "\npayload (" << human_bytes(static_cast<double>(r->payload.size())) << "):\n"
            << r->payload << "\n";
  return kExitOk;
}

int purge_with(const Cli& cli, DlqBackend& backend, const json& selector) {
  const Result<json> r = backend.purge(selector);
  const auto stopped = [](const json& b) { return b.value("first_error", std::string()); };
  const int code = finish(cli, "dlq purge", r, [&](const json& b) {
    std::cout << b.value("purged", 0) << " dead letters purged\n";
    if (!stopped(b).empty()) std::cout << "stopped part way: " << stopped(b) << "\n";
  });
  // Stopped part way (a Redis pool unreachable): the count is what was purged; exit 1.
  return code == kExitOk && !stopped(*r).empty() ? kExitFailed : code;
}

int replay_with(const Cli& cli, DlqBackend& backend, const json& selector) {
  return finish(cli, "dlq replay", backend.replay(selector), [](const json& b) {
    std::cout << b.value("replayed", 0) << " dead letters replayed\n";
    if (b.contains("ids") && !b["ids"].empty())
      std::cout << "task ids: "
                << b["ids"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (b.value("failed", 0) > 0) {
      std::cout << b.value("failed", 0)
                << " not replayed (left in place): " << b.value("first_error", std::string())
                << "\n";
    }
  });
}

}  // namespace

void add_dlq_commands(CLI::App& app, Cli& cli) {
  auto a = std::make_shared<DlqArgs>();
  auto* dlq = app.add_subcommand("dlq", "dead letters: list, show, replay, purge, import");
  dlq->require_subcommand(1);
  dlq->add_option("--state-dir", a->state_dir,
                  "read the store in this state dir directly, without the service");

  auto* list = dlq->add_subcommand("list", "the dead letters, oldest first, one page");
  add_filters(list, *a);
  list->add_option("--limit", a->limit, "letters per page");
  list->add_option("--cursor", a->cursor, "continue after this cursor (from the last page)");
  list->callback([&cli, a] {
    (void)filter_of(*a);  // check the durations now: a usage error
    cli.action = [&cli, a] {
      return with_backend(cli, *a, [&](DlqBackend& b) { return run_list(cli, b, *a); });
    };
  });

  auto* show = dlq->add_subcommand("show", "one dead letter with every attempt and its payload");
  show->add_option("ID", a->id, "dead letter id")->required();
  show->callback([&cli, a] {
    cli.action = [&cli, a] {
      return with_backend(cli, *a, [&](DlqBackend& b) { return run_show(cli, b, a->id); });
    };
  });

  auto* load = dlq->add_subcommand(
      "import", "load a spill file (unwritten-dead-letters-*.jsonl) into the store");
  load->add_option("FILE", a->file, "the spill file; renamed FILE.imported once loaded")
      ->required();
  load->callback(
      [&cli, a] { cli.action = [&cli, a] { return run_dlq_import(cli, a->file, a->state_dir); }; });

  for (const bool purge : {false, true}) {
    auto* sub = dlq->add_subcommand(purge ? "purge" : "replay",
                                    purge ? "delete dead letters" : "submit dead letters again");
    sub->add_option("ID", a->id, "dead letter id");
    sub->add_flag("--all", a->all, "every dead letter");
    add_filters(sub, *a);
    if (purge)
      sub->add_option("--older-than", a->older_than, "dead-lettered longer ago (168h, 12h)");
    sub->callback([&cli, a, purge] {
      const json selector = selector_of(*a, purge);
      if (!purge && !a->state_dir.empty()) {
        throw CLI::ValidationError("--state-dir", "replay needs the running service");
      }
      cli.action = [&cli, a, selector, purge] {
        return with_backend(cli, *a, [&](DlqBackend& backend) {
          return purge ? purge_with(cli, backend, selector) : replay_with(cli, backend, selector);
        });
      };
    });
  }
}

}  // namespace sandpool::poolctl
