#include <sandpool/metrics/http_parts.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>

#include <nlohmann/json.hpp>

namespace sandpool {

bool HeaderLess::operator()(std::string_view a, std::string_view b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) <
           std::tolower(static_cast<unsigned char>(y));
  });
}

std::string HttpRequest::header(std::string_view name) const {
  const auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

std::string HttpRequest::param(std::string_view name, std::size_t i) const {
  auto [from, to] = params.equal_range(name);
  for (; from != to; ++from, --i) {
    if (i == 0) return from->second;
  }
  return {};
}

void HttpResponse::set_header(std::string_view name, std::string value) {
  auto [from, to] = headers.equal_range(name);
  headers.erase(from, to);
  headers.emplace(std::string(name), std::move(value));
}

void HttpResponse::set_content(std::string content, std::string_view content_type) {
  body = std::move(content);
  set_header("Content-Type", std::string(content_type));
}

std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (in.size() - i < 3) return std::nullopt;
      const int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += c == '+' && plus_is_space ? ' ' : c;
    }
  }
  return out;
}

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t size = s.size();
  std::size_t i = 0;
  while (i < size) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t extra = 0;
    std::uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07u;
    } else {
      return false;
    }
    if (size - i <= extra) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3Fu);
    }
    static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

std::optional<std::string> parse_query(std::string_view text, HttpParams* out) {
  while (!text.empty()) {
    const std::size_t amp = text.find('&');
    const std::string_view pair = text.substr(0, amp);
    text = amp == std::string_view::npos ? std::string_view() : text.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    auto key = percent_decode(pair.substr(0, eq), true);
    if (!key || !valid_utf8(*key)) return http_parts::printable(pair.substr(0, eq));
    auto value = eq == std::string_view::npos ? std::optional<std::string>(std::string())
                                              : percent_decode(pair.substr(eq + 1), true);
    if (!value || !valid_utf8(*value)) return *key;
    out->emplace(std::move(*key), std::move(*value));
  }
  return std::nullopt;
}

namespace http_parts {

Result<HostPort> parse_listen(std::string_view listen, std::string_view what) {
  const auto bad = [&](std::string_view why) {
    return Status::invalid(std::string(what) + " listen address '" + std::string(listen) +
                           "': " + std::string(why) + " (expected host:port, e.g. 127.0.0.1:9464)");
  };
  const std::size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos) return bad("no port");
  std::string_view host = listen.substr(0, colon);
  const std::string_view port = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad("an IPv6 host goes in brackets");
  }
  if (host.empty()) return bad("no host");
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535) {
    return bad("the port is not a number from 0 to 65535");
  }
  return HostPort{std::string(host), static_cast<std::uint16_t>(value)};
}

Status split_target(std::string_view target, HttpRequest* req) {
  if (target.empty() || target.front() != '/') {
    return Status::invalid("the request target is not a path beginning with /");
  }
  const std::size_t q = target.find('?');
  auto path = percent_decode(target.substr(0, q), false);
  if (!path) return Status::invalid("the path holds a malformed %-escape");
  const bool control = std::any_of(path->begin(), path->end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (!valid_utf8(*path) || control) {
    return Status::invalid("the path '" + printable(*path) +
                           "' is not UTF-8 text without control characters");
  }
  req->path = std::move(*path);
  if (q == std::string_view::npos) return Status::ok();
  if (auto bad = parse_query(target.substr(q + 1), &req->query)) {
    return Status::invalid("the query's '" + printable(*bad) +
                           "' is not UTF-8 text (or holds a malformed %-escape)");
  }
  req->params = req->query;
  return Status::ok();
}

void error_answer(HttpResponse& res, int status, std::string_view message) {
  std::string_view code = "bad_request";
  switch (status) {
    case 401:
      code = "unauthorized";
      break;
    case 403:
      code = "forbidden";
      break;
    case 404:
      code = "not_found";
      break;
    case 413:
    case 431:
      code = "too_large";
      break;
    case 421:
      code = "misdirected";
      break;
    case 429:
    case 503:
      code = "busy";
      break;
    case 500:
      code = "internal";
      break;
    case 504:
      code = "timeout";
      break;
    default:
      break;
  }
  res.status = status;
  res.body.clear();
  res.stream = nullptr;
  const nlohmann::json body{{"error", code}, {"message", message}};
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

std::string printable(std::string_view s) {
  std::string out;
  const std::size_t n = std::min<std::size_t>(s.size(), 200);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > n) out += "...";
  return out;
}

}  // namespace http_parts
}  // namespace sandpool
