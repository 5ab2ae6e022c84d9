// The main() of a fuzz target built as a plain program (tests/fuzz/CMakeLists.txt): feeds
// every file of the seed directory it is given, in name order, to the target's
// LLVMFuzzerTestOneInput, as libFuzzer does before it starts mutating. A seed that trips an
// invariant (__builtin_trap), crashes, or makes the entry point return non-zero fails the run;
// so does an empty or missing directory, and so does a target that no longer compiles, since
// this program is part of the normal build.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SEED_DIR\n", argv[0]);
    return 2;
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> seeds;
  for (const fs::directory_entry& e : fs::directory_iterator(argv[1], ec)) {
    if (e.is_regular_file()) seeds.push_back(e.path());
  }
  if (ec || seeds.empty()) {
    std::fprintf(stderr, "no seeds in %s%s%s\n", argv[1], ec ? ": " : "",
                 ec ? ec.message().c_str() : "");
    return 1;
  }
  std::sort(seeds.begin(), seeds.end());
  int failed = 0;
  for (const fs::path& seed : seeds) {
    std::ifstream in(seed, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    // Named before the call: a crash in it leaves this as the last line.
    std::printf("seed %s (%zu bytes)\n", seed.filename().c_str(), bytes.size());
    std::fflush(stdout);
    const int rc =
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    if (rc != 0) {
      std::printf("  the entry point returned %d\n", rc);
      ++failed;
    }
  }
  std::printf("%zu seeds replayed, %d failed\n", seeds.size(), failed);
  return failed == 0 ? 0 : 1;
}
