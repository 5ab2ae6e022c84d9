// libFuzzer target: arbitrary bytes as one HTTP request to poold's listener, through every
// check a connection makes (header and body limits, the decoded target, Host and Origin, the
// route, its rights before its body, the JSON body's depth) into the real API and dashboard
// routes (HttpService::serve_one), with a control handler that answers every operation at
// once. Nothing may crash, throw or hang; every answer has a status and the security headers,
// and a JSON answer is valid UTF-8 JSON.
//
// Input layout: [0] bit 0 picks the listener (0: no token, anonymous reads; 1: read and admin
// tokens), then the request's bytes.
//
// Seeds: tests/fuzz/http_requests/, read-only.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>
#include <sandpool/config/config.hpp>
#include <sandpool/control/control.hpp>

#include <sandpool/http/http_service.hpp>
#include <sandpool/metrics/http_server.hpp>

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

// Answers every operation with an empty success, an `events` request with one event first.
class InstantHandler final : public sandpool::ControlHandler {
 public:
  void handle(sandpool::Request request, sandpool::Responder responder) override {
    if (request.op == "events") {
      (void)responder.event(nlohmann::json{{"event", "worker_ready"}, {"pool", "echo"}});
    }
    (void)responder.ok(nlohmann::json::object(), request.blob);
  }
};

std::string write_token(const std::string& dir, const char* name, const char* token) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << token << "\n";
  require(::chmod(path.c_str(), 0600) == 0);
  return path;
}

struct Listeners {
  Listeners() {
    char tmpl[] = "/tmp/fuzz_http_XXXXXX";
    require(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    sandpool::HttpConfig open;
    open.port = 0;
    open.max_wait = std::chrono::milliseconds(1);
    open.call_timeout = std::chrono::milliseconds(1000);
    sandpool::HttpConfig guarded = open;
    guarded.read_token_file = write_token(dir, "read.token", "read-token-0123456789abcdef");
    guarded.admin_token_file = write_token(dir, "admin.token", "admin-token-0123456789abcdef");
    for (auto* c : {&open, &guarded}) {
      auto s = sandpool::http::HttpService::start(
          *c, handler, [] { return std::string("m\n"); },
          [] { return std::optional<std::string>(); });
      require(s.is_ok());
      services.push_back(std::move(*s));
    }
  }
  std::string dir;
  InstantHandler handler;
  std::vector<std::unique_ptr<sandpool::http::HttpService>> services;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Listeners listeners;
  if (size < 1) return 0;
  auto& service = *listeners.services[data[0] & 1u];
  const std::string_view raw(reinterpret_cast<const char*>(data + 1), size - 1);
  const sandpool::HttpResponse res = service.serve_one(raw);
  if (res.status == 0) return 0;  // the bytes ended before the request did
  require(res.status >= 100 && res.status <= 599);
  require(res.headers.count("X-Content-Type-Options") == 1);
  const auto type = res.headers.find("Content-Type");
  if (type != res.headers.end() && type->second == "application/json" && !res.stream) {
    require(sandpool::valid_utf8(res.body));
    require(nlohmann::json::accept(res.body));
  }
  return 0;
}
