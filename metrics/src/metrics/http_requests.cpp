// What a request's header and body decide (http_server_impl.hpp): the route, the refusals
// before the body is read, the body's framing and form fields, and the handler's answer;
// for a connection (http_connection.cpp) and for HttpServer::serve_one alike.
#include <exception>
#include <regex>
#include <string>

#include <spdlog/spdlog.h>

#include <sandpool/metrics/http_parts.hpp>
#include "metrics/http_server_impl.hpp"

namespace sandpool::http_internal {

HttpResponse failure(int status, std::string_view message) {
  HttpResponse res;
  http_parts::error_answer(res, status, message);
  res.close = true;
  return res;
}

std::optional<HttpResponse> decide_head(const HttpServer::Impl& s, const Parser& parser,
                                        HttpRequest& req, const HttpServer::Route** route) {
  const auto& head = parser.get();
  std::size_t fields = 0;
  for (const auto& f : head) {
    if (++fields > s.limits.max_headers) {
      return failure(431, "more than service.http.max_headers (" +
                              std::to_string(s.limits.max_headers) + ") header fields");
    }
    req.headers.emplace(text_of(f.name_string()), text_of(f.value()));
  }
  req.method = text_of(head.method_string());
  req.target = text_of(head.target());
  if (const Status target = http_parts::split_target(req.target, &req); !target) {
    return failure(400, target.message());
  }
  HttpResponse refused;
  refused.close = true;
  if (s.gate && !s.gate(req, refused)) return refused;
  bool other_method = false;
  for (const auto& r : s.routes) {
    std::smatch m;
    if (!std::regex_match(req.path, m, r.path)) continue;
    if (r.method != req.method) {
      other_method = true;
      continue;
    }
    *route = &r;
    for (const auto& g : m) req.matches.push_back(g.str());
    break;
  }
  if (*route == nullptr) {
    return failure(other_method ? 405 : 404,
                   other_method
                       ? req.method + " is not served at " + http_parts::printable(req.path)
                       : "nothing is served at " + http_parts::printable(req.path));
  }
  if ((*route)->admit && !(*route)->admit(req, refused)) return refused;
  return std::nullopt;
}

std::optional<HttpResponse> decide_framing(const HttpServer::Impl& s, Parser& parser,
                                           const HttpRequest& req, const HttpServer::Route& route) {
  const std::size_t bound = route.large_body ? s.limits.max_body : s.limits.small_body;
  const std::string encoding = req.header("Content-Encoding");
  if (!encoding.empty() && !beast::iequals(encoding, "identity")) {
    return failure(415, "Content-Encoding " + http_parts::printable(encoding) +
                            ": poold decompresses nothing; send the body as it is");
  }
  const auto length = parser.content_length();
  if (length && *length > bound) {
    return failure(413, "the body (" + std::to_string(*length) + " bytes) exceeds " +
                            std::to_string(bound) + " bytes, the most " +
                            http_parts::printable(req.path) + " takes" +
                            (route.large_body ? " (service.http.max_body)" : ""));
  }
  if (!parser.is_done()) parser.body_limit(bound);
  return std::nullopt;
}

HttpResponse body_too_large(const HttpServer::Impl& s, const HttpRequest& req,
                            const HttpServer::Route& route) {
  return failure(413,
                 "the body exceeds " +
                     std::to_string(route.large_body ? s.limits.max_body : s.limits.small_body) +
                     " bytes, the most " + http_parts::printable(req.path) + " takes");
}

std::optional<HttpResponse> take_body(Parser& parser, HttpRequest& req) {
  req.body = std::move(parser.get().body());
  const std::string type = req.header("Content-Type");
  if (type.rfind("application/x-www-form-urlencoded", 0) == 0) {
    if (auto bad = parse_query(req.body, &req.params)) {
      return failure(400, "form field '" + http_parts::printable(*bad) + "' is not UTF-8 text");
    }
  }
  return std::nullopt;
}

HttpResponse run_handler(const HttpServer::Route& route, const HttpRequest& req) {
  HttpResponse res;
  try {
    route.handler(req, res);
    return res;
  } catch (const std::exception& e) {
    spdlog::error("http: {} {} failed: {}", req.method, http_parts::printable(req.path), e.what());
  } catch (...) {
    spdlog::error("http: {} {} failed", req.method, http_parts::printable(req.path));
  }
  HttpResponse failed;
  http_parts::error_answer(failed, 500, "the request failed inside poold (logged)");
  return failed;
}

void add_default_headers(HttpResponse& res) {
  auto add = [&](std::string_view name, std::string value) {
    if (res.headers.find(name) == res.headers.end()) res.set_header(name, std::move(value));
  };
  add("X-Content-Type-Options", "nosniff");
  add("Referrer-Policy", "same-origin");
  add("Cache-Control", "no-store");
  add("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'");
  add("X-Frame-Options", "DENY");
}

HttpResponse answer_one(const HttpServer::Impl& s, std::string_view raw) {
  using Route = HttpServer::Route;
  Parser parser;
  parser.header_limit(static_cast<std::uint32_t>(s.limits.max_header_bytes));
  parser.body_limit(s.limits.max_body);
  parser.eager(false);  // the header alone first, as a connection reads it
  beast::error_code ec;
  std::size_t used = parser.put(net::buffer(raw.data(), raw.size()), ec);
  if (ec == bhttp::error::header_limit) {
    return failure(431, "the request line and headers exceed service.http.max_header_bytes");
  }
  if (ec == bhttp::error::need_more) return HttpResponse{0, {}, {}, {}, true};
  if (ec) return failure(400, std::string("malformed request: ") + ec.message());
  HttpRequest req;
  req.peer = "127.0.0.1";
  const Route* route = nullptr;
  if (auto answer = decide_head(s, parser, req, &route)) return std::move(*answer);
  if (auto answer = decide_framing(s, parser, req, *route)) return std::move(*answer);
  parser.eager(true);
  while (!parser.is_done()) {
    raw.remove_prefix(used);
    if (raw.empty()) return HttpResponse{0, {}, {}, {}, true};
    used = parser.put(net::buffer(raw.data(), raw.size()), ec);
    if (ec == bhttp::error::body_limit) return body_too_large(s, req, *route);
    if (ec == bhttp::error::need_more) return HttpResponse{0, {}, {}, {}, true};
    if (ec) return failure(400, std::string("malformed body: ") + ec.message());
    if (used == 0) return HttpResponse{0, {}, {}, {}, true};
  }
  if (auto answer = take_body(parser, req)) return std::move(*answer);
  return run_handler(*route, req);
}

}  // namespace sandpool::http_internal
