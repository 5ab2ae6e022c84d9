// A file that holds a secret (a bearer token, a password): read whole, refused unless it is a
// regular file that only its owner may read or write (mode 0600 or stricter), since a
// secret others can read is no secret. The trailing line end (and spaces) are dropped.
#pragma once

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/base/status.hpp>

namespace sandpool {

// `what` names the file in errors ("service.http.read_token_file /etc/...").
inline Result<std::string> read_secret_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (Status s = posix_call_rc("stat " + path, [&] { return ::stat(path.c_str(), &st); }); !s) {
    return Status::error(s.code(), what + ": " + s.message());
  }
  if (!S_ISREG(st.st_mode)) return Status::invalid(what + ": not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::invalid(what + ": mode " + mode +
                           " lets others read it; chmod 0600 (owner only)");
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return Status::error(Code::kSystem, what + ": cannot be read");
  std::string secret = text.str();
  while (!secret.empty() &&
         (secret.back() == '\n' || secret.back() == '\r' || secret.back() == ' ')) {
    secret.pop_back();
  }
  return secret;
}

}  // namespace sandpool
