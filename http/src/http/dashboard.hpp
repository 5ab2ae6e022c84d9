// The dashboard at / (docs/dashboard.md): server-rendered pages, readable with JavaScript
// off, every asset compiled in (dashboard_assets.cpp). Each page reads what it shows through
// the Api's call(), so with the rights of the browser's token (a session cookie set by the
// login form): the same operations, rights and errors as the socket. Forms post to /ui/...
// with the session's CSRF token and redirect back with a message.
//
// Thread-safety: the routes run on the listener's serving threads. Lifetime: `api` and
// `access` outlive the Dashboard.
#pragma once

#include "http/api.hpp"
#include "http/http_access.hpp"

namespace sandpool::http {

class Dashboard {
 public:
  Dashboard(Api& api, HttpAccess& access) : api_(api), access_(access) {}
  void install(HttpServer& server);

 private:
  Api& api_;
  HttpAccess& access_;
};

// The embedded assets (dashboard_assets.cpp).
extern const char* const kDashboardCss;
extern const char* const kDashboardJs;

}  // namespace sandpool::http
