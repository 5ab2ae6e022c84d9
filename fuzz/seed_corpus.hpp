// What the seed generators share (the fuzz targets built with SANDPOOL_FUZZ_SEED_MAIN):
// writing one seed file, and the main that takes the corpus directory.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace sandpool::fuzz {

// Writes `bytes` to `path`; false on any error.
inline bool write_seed(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

// The seed generator's main: `usage: PROG DIR`, then write(DIR)'s exit code.
template <typename Write>
int seed_main(int argc, char** argv, const char* target, Write write) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR  (writes the %s seed corpus)\n", argv[0], target);
    return 2;
  }
  return write(std::string(argv[1]));
}

}  // namespace sandpool::fuzz
