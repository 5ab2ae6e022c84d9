// `schedules:` of poold's YAML (docs/configuration.md, "schedules"; docs/schedules.md): one
// entry per schedule, checked as the Scheduler will check it, errors at the offending key.
#include <algorithm>
#include <cctype>
#include <map>

#include <sandpool/config/config.hpp>
#include <sandpool/schedule/scheduler.hpp>

#include "config/config_sections.hpp"

namespace sandpool::config {
namespace {

// Unix seconds, or an RFC 3339 UTC time `YYYY-MM-DDTHH:MM:SSZ`; nullopt when neither.
std::optional<std::int64_t> read_instant(const std::string& s) {
  if (!s.empty() && s.size() <= 12 && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      })) {
    return std::stoll(s);
  }
  if (s.size() != 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
      s[16] != ':' || s[19] != 'Z') {
    return std::nullopt;
  }
  int f[6];
  const int at[6] = {0, 5, 8, 11, 14, 17};
  const int len[6] = {4, 2, 2, 2, 2, 2};
  for (int i = 0; i < 6; ++i) {
    f[i] = 0;
    for (int k = 0; k < len[i]; ++k) {
      const char c = s[at[i] + k];
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
      f[i] = f[i] * 10 + (c - '0');
    }
  }
  if (f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > days_in_month(f[0], f[1]) || f[3] > 23 ||
      f[4] > 59 || f[5] > 59) {
    return std::nullopt;
  }
  return civil_as_utc(CivilTime{f[0], f[1], f[2], f[3], f[4], f[5]});
}

void read_schedule(ConfigErrors& errors, const YAML::Node& node, const std::string& path,
                   ScheduleSpec* out, YAML::Mark* name_mark) {
  MapReader r(errors, node, path);
  *name_mark = node.Mark();
  if (const YAML::Node* n = r.value("name")) *name_mark = n->Mark();
  const std::size_t before = errors.count();
  r.string("name", &out->name);
  std::string cron;
  std::string every;
  const bool has_cron = r.string("cron", &cron);
  const bool has_every = r.string("every", &every);
  if (has_cron && has_every) r.fail("every", "give cron or every, not both");
  if (!r.has("cron") && !r.has("every")) r.fail("cron", "a schedule needs cron or every");
  out->expression = has_every ? "@every " + every : cron;
  r.string("zone", &out->zone);
  r.string("type", &out->task.type);
  r.string("pool", &out->task.pool);
  if (const YAML::Node* p = r.value("payload")) {
    if (p->IsScalar()) {
      out->payload = p->Scalar();
    } else {
      r.fail("payload", "expected a string");
    }
  }
  if (const YAML::Node* p = r.value("priority")) {
    int v = 0;
    if (!p->IsScalar() || !YAML::convert<int>::decode(*p, v) || v < -1000000 || v > 1000000) {
      r.fail("priority", "expected an integer");
    }
    out->task.options.priority = v;
  }
  std::chrono::milliseconds timeout{0};
  if (r.duration("timeout", &timeout, std::chrono::milliseconds(1)))
    out->task.options.timeout = timeout;
  std::uint32_t retries = 0;
  if (r.count("retries", &retries)) out->task.options.retries = retries;
  r.string("key", &out->task.options.key);
  r.string("tenant", &out->task.options.tenant);
  for (const char* key : {"start", "end"}) {
    std::string text;
    if (!r.string(key, &text)) continue;
    const auto t = read_instant(text);
    if (!t) {
      r.fail(key, "expected Unix seconds or YYYY-MM-DDTHH:MM:SSZ, got \"" + text + "\"");
      continue;
    }
    (std::string_view(key) == "start" ? out->start_s : out->end_s) = *t;
  }
  r.choice<CatchUp>("catch_up", &out->catch_up,
                    {{"skip", CatchUp::kSkip}, {"run_once", CatchUp::kRunOnce}});
  r.choice<Overlap>(
      "overlap", &out->overlap,
      {{"allow", Overlap::kAllow}, {"skip", Overlap::kSkip}, {"queue", Overlap::kQueue}});
  r.boolean("paused", &out->paused);
  r.finish();
  if (errors.count() != before) return;
  if (Status st = validate_schedule(*out); !st) {
    // The expression's errors at its key; the rest at the entry.
    const std::string& msg = st.message();
    const char* key = msg.find(": expression: ") != std::string::npos
                          ? (has_every ? "every" : "cron")
                      : msg.find(": zone: ") != std::string::npos         ? "zone"
                      : msg.find("type is required") != std::string::npos ? "type"
                                                                          : "name";
    MapReader again(errors, node, path);
    again.value(key);
    again.fail(key, msg);
  }
}

}  // namespace

void read_schedules(ConfigErrors& errors, const YAML::Node* node, std::vector<ScheduleSpec>* out) {
  if (node == nullptr || node->IsNull()) return;
  if (!node->IsSequence()) {
    errors.add(node->Mark(), "schedules", "expected a list of schedules, got " + describe(*node));
    return;
  }
  out->resize(node->size());
  std::map<std::string, std::size_t> names;
  for (std::size_t i = 0; i < node->size(); ++i) {
    const std::string path = "schedules[" + std::to_string(i) + "]";
    YAML::Mark mark;
    read_schedule(errors, (*node)[i], path, &(*out)[i], &mark);
    const std::string& name = (*out)[i].name;
    if (name.empty()) continue;
    auto [it, fresh] = names.emplace(name, i);
    if (!fresh) {
      errors.add(mark, path + ".name",
                 "schedule name \"" + name + "\" is already used by schedules[" +
                     std::to_string(it->second) + "]");
    }
  }
}

}  // namespace sandpool::config
