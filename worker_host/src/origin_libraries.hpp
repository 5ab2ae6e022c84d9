// The libraries a plugin expects beside itself, found through its directory's fd.
//
// The worker loads its plugin through /proc/self/fd/N (the file the manager opened and
// checked), and for such a name glibc sets $ORIGIN to "/proc/self/fd": a RUNPATH of
// "$ORIGIN" or "$ORIGIN/lib" then finds nothing. So before loading the plugin the loader
// reads the plugin's ELF dynamic section itself (DT_NEEDED, DT_RUNPATH or else DT_RPATH),
// and loads each needed library that the search path finds under $ORIGIN through
// /proc/self/fd/<directory fd>/...; glibc then matches the plugin's DT_NEEDED to it by its
// soname and searches no further. A library so loaded has its own $ORIGIN right (the
// directory's fd), so its dependencies resolve on their own.
//
// The plugin file is the plugin author's: the reader bounds every offset and length by the
// file's size and a fixed cap before reading, and treats what it cannot make sense of as
// "no such libraries" (dlopen then reports the file in its own words).
#pragma once

#include <string>
#include <vector>

#include <sandpool/base/status.hpp>

namespace sandpool::worker {

// What the dynamic section asks for.
struct DynamicNeeds {
  std::vector<std::string> needed;       // DT_NEEDED, in order
  std::vector<std::string> search_path;  // DT_RUNPATH entries (else DT_RPATH's), in order
};

// Reads the dynamic section of the ELF file open on `fd` (pread only; the file offset is
// untouched). An ELF file of another class or byte order than this process, or one without
// a dynamic section, gives empty needs. kPlugin errors only for a read that fails.
Result<DynamicNeeds> read_dynamic_needs(int fd);

// Returns "sub/dir/name" relative to the plugin's directory for each needed library that
// the search path finds under $ORIGIN (or ${ORIGIN}) first, in DT_NEEDED order. `exists(p)`
// says whether a path relative to the plugin's directory names a file; entries of the
// search path that are not under $ORIGIN are looked at with `exists_abs`, and a library they
// find first is left to glibc. Bare names only: a DT_NEEDED with a '/' is glibc's.
template <typename Exists, typename ExistsAbs>
std::vector<std::string> libraries_beside(const DynamicNeeds& needs, Exists&& exists,
                                          ExistsAbs&& exists_abs);

// The part of `entry` after a leading $ORIGIN or ${ORIGIN} ("" for the directory itself,
// "/lib" ...), or false when it does not start with one.
bool strip_origin(const std::string& entry, std::string* rest);

template <typename Exists, typename ExistsAbs>
std::vector<std::string> libraries_beside(const DynamicNeeds& needs, Exists&& exists,
                                          ExistsAbs&& exists_abs) {
  std::vector<std::string> out;
  for (const std::string& name : needs.needed) {
    if (name.empty() || name.find('/') != std::string::npos) continue;
    for (const std::string& entry : needs.search_path) {
      std::string rest;
      if (strip_origin(entry, &rest)) {
        while (!rest.empty() && rest.front() == '/') rest.erase(0, 1);
        const std::string relative = rest.empty() ? name : rest + "/" + name;
        if (exists(relative)) {
          out.push_back(relative);
          break;
        }
      } else if (!entry.empty() && entry.front() == '/' && exists_abs(entry + "/" + name)) {
        break;  // glibc finds it there first, by its own path
      }
    }
  }
  return out;
}

}  // namespace sandpool::worker
