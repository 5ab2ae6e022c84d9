#include <charconv>

#include "config/config_sections.hpp"

namespace sandpool::config {
namespace {

// "0660" or "660": three or four octal digits, permission bits only.
void read_socket_mode(MapReader& socket, std::uint32_t* mode) {
  constexpr std::string_view kExpected = "an octal mode like \"0660\"";
  const YAML::Node* v = socket.value("mode");
  if (v == nullptr) return;
  const std::string text = v->IsScalar() ? v->Scalar() : std::string();
  std::uint32_t parsed = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed, 8);
  if (text.size() < 3 || text.size() > 4 || ec != std::errc() || end != text.data() + text.size() ||
      parsed > 0777) {
    socket.fail("mode", "expected " + std::string(kExpected) + ", got " + describe(*v));
    return;
  }
  *mode = parsed;
}

// "host:port" or "[v6]:port"; port 0 asks for any free port. Returns true iff the key was
// present (valid or not).
bool read_listen(MapReader& section, HttpConfig* out) {
  std::string text;
  if (!section.string("listen", &text)) return section.value("listen") != nullptr;
  const std::size_t colon = text.rfind(':');
  if (colon != std::string::npos) {
    std::string host = text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    std::uint16_t port = 0;
    const char* first = text.data() + colon + 1;
    const char* last = text.data() + text.size();
    auto [end, ec] = std::from_chars(first, last, port);
    if (!host.empty() && first != last && ec == std::errc() && end == last) {
      out->host = std::move(host);
      out->port = port;
      return true;
    }
  }
  section.fail("listen", "expected HOST:PORT like 127.0.0.1:9464 (port 0: any free port), got " +
                             describe(*section.value("listen")));
  return true;
}

// `service.http`, and the `service.metrics.listen` it replaced (still read, with a warning;
// service.http.listen wins when both are given).
void read_http(MapReader& service, HttpConfig* out, std::vector<std::string>* warnings) {
  MapReader http = service.section("http");
  const bool http_listen = read_listen(http, out);
  http.string("read_token_file", &out->read_token_file);
  http.string("admin_token_file", &out->admin_token_file);
  http.string_list("hosts", &out->hosts);
  http.choice<bool>("metrics_access", &out->metrics_need_token, {{"open", false}, {"read", true}});
  http.count("max_connections", &out->max_connections, 1);
  http.count("max_connections_per_client", &out->max_connections_per_client, 1);
  http.count("backlog", &out->backlog, 1);
  http.size("max_header_bytes", &out->max_header_bytes, 1024);
  http.count("max_headers", &out->max_headers, 8);
  http.size("max_body", &out->max_body, 64u << 10);
  http.count("max_json_depth", &out->max_json_depth, 2);
  http.duration("idle_timeout", &out->idle_timeout, HttpConfig::Duration(1));
  http.duration("header_timeout", &out->header_timeout, HttpConfig::Duration(1));
  http.duration("body_timeout", &out->body_timeout, HttpConfig::Duration(1));
  http.duration("write_timeout", &out->write_timeout, HttpConfig::Duration(1));
  http.count("serving_threads", &out->serving_threads, 1);
  http.count("queued_requests", &out->queued_requests, 0);
  http.duration("call_timeout", &out->call_timeout, HttpConfig::Duration(1));
  http.duration("max_wait", &out->max_wait, HttpConfig::Duration(1));
  http.count("max_streams", &out->max_streams, 1);
  http.count("admin_reserved_streams", &out->admin_reserved_streams, 0);
  http.duration("session_idle_timeout", &out->session_idle_timeout, HttpConfig::Duration(1000));
  if (out->admin_reserved_streams > out->max_streams) {
    http.fail("admin_reserved_streams",
              "must not exceed max_streams (" + std::to_string(out->max_streams) + ")");
  }
  http.finish();

  MapReader metrics = service.section("metrics");
  if (const YAML::Node* old = metrics.value("listen")) {
    HttpConfig from_metrics = *out;
    read_listen(metrics, &from_metrics);
    if (!http_listen) {
      out->host = from_metrics.host;
      out->port = from_metrics.port;
    }
    warnings->push_back(metrics.errors().format(
        old->Mark(), metrics.path_of("listen"),
        http_listen ? "deprecated and ignored: service.http.listen is set"
                    : "deprecated: write service.http.listen (the one HTTP listener, which "
                      "serves /metrics)"));
  }
  metrics.finish();
}

// One `allow` entry: exactly one of user/group (a name, or a numeric id), and rights.
void read_allow_rule(ConfigErrors& errors, const YAML::Node& node, const std::string& path,
                     std::vector<AllowRule>* out) {
  MapReader r(errors, node, path);
  AllowRule rule;
  const std::size_t before = errors.count();
  std::string who;
  const bool user = r.string("user", &who);
  std::string group_name;
  const bool group = r.string("group", &group_name);
  r.choice<Rights>("rights", &rule.rights, {{"read", Rights::kRead}, {"admin", Rights::kAdmin}});
  r.finish();
  if (errors.count() != before) return;
  if (user == group) {
    errors.add(node.Mark(), path, "expected exactly one of user: or group: (a name or a number)");
    return;
  }
  rule.is_group = group;
  const std::string& text = group ? group_name : who;
  std::uint32_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec == std::errc() && end == text.data() + text.size()) {
    rule.id = id;
  } else {
    rule.name = text;
  }
  out->push_back(std::move(rule));
}

// `journal: on|off` (or true/false), or a mapping {enabled, sync, group_commit, sync_timeout}.
void read_journal(MapReader& service, JournalConfig* out) {
  const YAML::Node* node = service.value("journal");
  if (node == nullptr) return;
  if (node->IsScalar()) {
    const std::string text = node->Scalar();
    if (text == "on" || text == "true") {
      out->enabled = true;
    } else if (text == "off" || text == "false") {
      out->enabled = false;
    } else {
      service.fail("journal", "expected on, off or a mapping {enabled, sync, group_commit}, got " +
                                  describe(*node));
    }
    return;
  }
  MapReader journal = service.section("journal");
  journal.boolean("enabled", &out->enabled);
  journal.choice<StoreSync>("sync", &out->sync,
                            {{"normal", StoreSync::kNormal}, {"full", StoreSync::kFull}});
  journal.duration("group_commit", &out->group_commit);
  if (out->group_commit > std::chrono::milliseconds(1000)) {
    journal.fail("group_commit",
                 "expected at most 1s (every submit may wait this long for its commit), got " +
                     describe(*journal.value("group_commit")));
  }
  journal.duration("sync_timeout", &out->sync_timeout);
  if (out->sync_timeout < std::chrono::milliseconds(100)) {
    journal.fail("sync_timeout",
                 "expected at least 100ms (a sync slower than this turns the journal failing), "
                 "got " +
                     describe(*journal.value("sync_timeout")));
  }
  journal.finish();
}

// `service.redis`: the server the Redis pools share (docs/redis-pools.md).
void read_redis(MapReader redis, RedisConfig* out) {
  if (redis.string("address", &out->address)) {
    const bool unix_path = out->address.rfind("unix:/", 0) == 0;
    const auto colon = out->address.rfind(':');
    const bool host_port = !unix_path && out->address.rfind("unix:", 0) != 0 && colon != 0 &&
                           out->address.find('/') == std::string::npos;
    if (!unix_path && !host_port) {
      redis.fail("address",
                 "expected unix:/absolute/path or host:port, got \"" + out->address + "\"");
    }
  }
  redis.string("password_file", &out->password_file);
  redis.count("db", &out->db, 0);
  if (redis.string("prefix", &out->prefix) &&
      out->prefix.find_first_of("{} \t\r\n") != std::string::npos) {
    redis.fail("prefix", "expected no braces or white space, got \"" + out->prefix + "\"");
  }
  redis.count("dead_letters", &out->dead_letters, 1, UINT64_MAX);
  redis.count("finished", &out->finished, 1, UINT64_MAX);
  redis.duration("finished_max_age", &out->finished_max_age, std::chrono::milliseconds(1));
  redis.size("finished_max_bytes", &out->finished_max_bytes, 1);
  redis.duration("heartbeat", &out->heartbeat, std::chrono::milliseconds(50));
  redis.finish();
}

// service.log: the level and format of poold's own log.
void read_log(MapReader log, ServiceConfig* out) {
  log.choice<LogLevel>("level", &out->log_level,
                       {{"trace", LogLevel::kTrace},
                        {"debug", LogLevel::kDebug},
                        {"info", LogLevel::kInfo},
                        {"warn", LogLevel::kWarn},
                        {"error", LogLevel::kError},
                        {"critical", LogLevel::kCritical},
                        {"off", LogLevel::kOff}});
  log.choice<LogFormat>("format", &out->log_format,
                        {{"text", LogFormat::kText}, {"json", LogFormat::kJson}});
  log.finish();
}

// service.connections: the control socket's connection and buffer bounds.
void read_connections(MapReader connections, ServiceConfig* out) {
  connections.count("max", &out->max_connections, 1);
  connections.count("max_outstanding", &out->max_outstanding_requests, 1);
  connections.size("max_buffered", &out->max_buffered_bytes, 64 * 1024);
  connections.finish();
}

// service.control: the control socket's per-uid and per-connection bounds; after
// read_connections, whose max it divides and bounds.
void read_control(MapReader control, ServiceConfig* out) {
  // Unless given: an eighth of connections.max (8 of the default 64).
  out->admin_reserved_connections = out->max_connections / 8;
  if (control.count("admin_reserved_connections", &out->admin_reserved_connections) &&
      out->admin_reserved_connections >= out->max_connections) {
    control.fail("admin_reserved_connections",
                 "expected fewer than connections.max (" + std::to_string(out->max_connections) +
                     "), got " + std::to_string(out->admin_reserved_connections) +
                     ": peers without admin rights would get no connection");
  }
  control.count("connections_per_uid", &out->connections_per_uid, 1);
  control.count("streams_per_connection", &out->streams_per_connection, 1);
  control.count("streams_per_uid", &out->streams_per_uid, 1);
  control.duration("idle_timeout", &out->idle_timeout);
  control.finish();
}

}  // namespace

void read_service(MapReader service, ServiceConfig* out, std::vector<std::string>* warnings) {
  MapReader socket = service.section("socket");
  socket.string("path", &out->socket_path);
  read_socket_mode(socket, &out->socket_mode);
  socket.string("group", &out->socket_group);
  socket.finish();

  if (const YAML::Node* allow = service.value("allow")) {
    if (allow->IsSequence()) {
      for (std::size_t i = 0; i < allow->size(); ++i) {
        read_allow_rule(service.errors(), (*allow)[i],
                        service.path_of("allow") + "[" + std::to_string(i) + "]", &out->allow);
      }
    } else if (!allow->IsNull()) {
      service.fail("allow", "expected a list of {user|group, rights}, got " + describe(*allow));
    }
  }

  service.string("state_dir", &out->state_dir);

  read_http(service, &out->http, warnings);

  read_log(service.section("log"), out);

  service.duration("shutdown_timeout", &out->shutdown_timeout);

  read_connections(service.section("connections"), out);
  read_control(service.section("control"), out);

  read_journal(service, &out->journal);
  const bool keep_given = service.has("shutdown_unfinished");
  service.choice<ShutdownUnfinished>(
      "shutdown_unfinished", &out->shutdown_unfinished,
      {{"keep", ShutdownUnfinished::kKeep}, {"dead_letter", ShutdownUnfinished::kDeadLetter}});
  if (keep_given && !out->journal.enabled &&
      out->shutdown_unfinished == ShutdownUnfinished::kKeep) {
    service.fail("shutdown_unfinished",
                 "keep needs the journal (service.journal is off): without it what is left at a "
                 "shutdown can only be dead-lettered; use dead_letter");
  }

  read_redis(service.section("redis"), &out->redis);
  if (service.string("node", &out->node) &&
      out->node.find_first_of(" \t\r\n") != std::string::npos) {
    service.fail("node", "expected a name without white space, got \"" + out->node + "\"");
  }

  MapReader records = service.section("task_records");
  records.count("max", &out->task_records_max, 1, UINT64_MAX);
  records.duration("max_age", &out->task_records_max_age, std::chrono::milliseconds(1));
  records.finish();

  service.finish();
}

}  // namespace sandpool::config
