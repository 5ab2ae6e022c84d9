// A world-readable scratch directory for the privilege tests: a worker that drops to
// `nobody` must be able to read its plugin, and the build tree may sit where nobody cannot
// look (a home directory). Copies of plugins go here; tests that need a group-writable
// plugin chmod their copy.
//
// Ownership: owns the directory and everything in it; the destructor removes them.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace sandpool::testing {

class PublicDir {
 public:
  PublicDir() {
    char tmpl[] = "/tmp/sandpool_public_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path_ = tmpl;
    REQUIRE(::chmod(path_.c_str(), 0755) == 0);
  }
  ~PublicDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  PublicDir(const PublicDir&) = delete;
  PublicDir& operator=(const PublicDir&) = delete;

  const std::string& path() const { return path_; }

  // Copies `file` in with `mode`; returns the copy's path.
  std::string copy(const std::string& file, mode_t mode = 0644) const {
    return copy_to(path_, file, mode);
  }

  // Copies `file` into the directory `dir` with `mode`; returns the copy's path.
  static std::string copy_to(const std::string& dir, const std::string& file, mode_t mode) {
    const std::string to = dir + "/" + std::filesystem::path(file).filename().string();
    std::filesystem::copy_file(file, to, std::filesystem::copy_options::overwrite_existing);
    REQUIRE(::chmod(to.c_str(), mode) == 0);
    return to;
  }

  // Writes `text` to `name` in here with `mode`; returns its path.
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0644) const {
    const std::string to = path_ + "/" + name;
    std::ofstream(to) << text;
    REQUIRE(::chmod(to.c_str(), mode) == 0);
    return to;
  }

 private:
  std::string path_;
};

// True iff this process runs as root; the privilege tests need it (CI runs them as root).
inline bool running_as_root() { return ::geteuid() == 0; }

}  // namespace sandpool::testing
