// Hostile images against the real thumbnail plugin (plugins/thumbnail/: Debian's
// libjpeg-turbo, libpng, libwebp) under the default strict seccomp profile: the committed
// corpus of malformed files (tests/hostile/thumbnail_corpus/, its README says how each was
// made), decompression bombs refused from their header, a bomb let through by a cap set too
// high, and a progressive JPEG built to burn CPU. Each case: the attack's outcome, ordinary
// tasks beside it complete, both pools still serve, nothing is left behind (HostileWorld).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "hostile_world.hpp"
#include "image_samples.hpp"

using namespace sandpool;
using sandpool::hostile::hostile_options;
using sandpool::hostile::HostileWorld;
using sandpool::testing::ImageFormat;
using sandpool::testing::thumbnail_payload;

namespace {

PoolOptions thumbnail_options(const std::string& config = "{}") {
  PoolOptions o = hostile_options(std::string(SANDPOOL_PLUGIN_DIR) + "/libthumbnail.so");
  o.plugin_config_json = config;
  return o;
}

bool thumbnail_worker_alive(Pool& pool, std::int32_t pid) {
  const auto ws = pool.workers();
  return std::any_of(ws.begin(), ws.end(), [&](const WorkerInfo& w) { return w.pid == pid; });
}

const std::filesystem::path kThumbnailCorpus =
    std::filesystem::path(SANDPOOL_SOURCE_DIR) / "tests/hostile/thumbnail_corpus";

std::string read_corpus_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string png_bomb_file(std::uint32_t width, std::uint32_t height) {
  std::uint8_t* data = nullptr;
  std::size_t len = 0;
  REQUIRE(sample_png_bomb(width, height, &data, &len) == 0);
  return sandpool::testing::take(data, len);
}

// The attempt ended in the plugin, with `outcome` and `error`; its worker lives on.
void require_thumbnail_refused(HostileWorld& world, const TaskResult& r, Outcome outcome,
                               const std::string& error) {
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == outcome);
  CHECK(r.history[0].error == error);
  CHECK(thumbnail_worker_alive(world.pool(), r.history[0].worker_pid));
}

struct CorpusExpectation {
  Outcome outcome;
  std::string error;
};

// Every file of the corpus and what its task must end with.
std::map<std::string, CorpusExpectation> corpus_expectations() {
  const Outcome failed = Outcome::kFailed, limit = Outcome::kResourceLimit;
  return {
      {"empty", {failed, "thumbnail: the image is empty"}},
      {"random.bin",
       {failed,
        "thumbnail: not a JPEG, PNG or WebP image (its first bytes are none of their "
        "signatures)"}},
      {"truncated.jpg", {failed, "thumbnail: jpeg: Premature end of JPEG file"}},
      {"truncated_progressive.jpg", {failed, "thumbnail: jpeg: Premature end of JPEG file"}},
      {"header_only.jpg", {failed, "thumbnail: jpeg: JPEG datastream contains no image"}},
      {"fuzzed.jpg",
       {failed, "thumbnail: jpeg: Corrupt JPEG data: 32 extraneous bytes before marker 0xd9"}},
      {"bomb_65000x65000.jpg",
       {limit,
        "thumbnail: jpeg: the image is 65000x65000 = 4225000000 pixels, more than max_pixels "
        "50000000"}},
      {"cmyk.jpg", {failed, "thumbnail: jpeg: Unsupported color conversion request"}},
      {"bad_crc.png", {failed, "thumbnail: png: IDAT: CRC error"}},
      {"truncated.png", {failed, "thumbnail: png: the file ends early (truncated)"}},
      {"signature_only.png", {failed, "thumbnail: png: the file ends early (truncated)"}},
      {"bomb_100000x100000.png",
       {limit,
        "thumbnail: png: the image is 100000x100000 = 10000000000 pixels, more than "
        "max_pixels 50000000"}},
      {"truncated.webp", {failed, "thumbnail: webp: the file ends early (truncated)"}},
      {"animated.webp", {failed, "thumbnail: webp: animated WebP is not supported"}},
      {"bomb_16384x16384.webp",
       {limit,
        "thumbnail: webp: the image is 16384x16384 = 268435456 pixels, more than max_pixels "
        "50000000"}},
  };
}

}  // namespace

TEST_CASE("every file of the malformed thumbnail corpus ends its own task, never its worker") {
  const auto expected = corpus_expectations();
  HostileWorld world;
  world.start(thumbnail_options());
  std::size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kThumbnailCorpus)) {
    const std::string name = entry.path().filename().string();
    if (name == "README.md") continue;
    INFO(name);
    const auto it = expected.find(name);
    REQUIRE(it != expected.end());  // a new corpus file needs its expected outcome here
    const TaskResult r =
        world.attack("thumbnail", thumbnail_payload("width=32", read_corpus_file(entry)));
    require_thumbnail_refused(world, r, it->second.outcome, it->second.error);
    ++seen;
  }
  CHECK(seen == expected.size());
  CHECK(world.pool().stats().restarts == 0);
  world.close_and_check_clean();
}

TEST_CASE("a decompression bomb is refused from its header before a pixel is decoded") {
  HostileWorld world;
  // The cap low enough that a small bomb (quick to make) is over it; the check reads IHDR,
  // so the pixel buffer is never allocated.
  world.start(thumbnail_options(R"({"max_pixels": 1000000})"));
  const std::string bomb = png_bomb_file(2000, 2000);
  CHECK(bomb.size() < 50000);  // 12 MB of pixels in a few KB
  const TaskResult r = world.attack("thumbnail", thumbnail_payload("width=32", bomb));
  require_thumbnail_refused(
      world, r, Outcome::kResourceLimit,
      "thumbnail: png: the image is 2000x2000 = 4000000 pixels, more than max_pixels 1000000");
  world.close_and_check_clean();
}

TEST_CASE("a bomb let through by a cap set too high meets the worker's address-space limit") {
  HostileWorld world;
  // No caps at all: the 100000x100000 PNG of the corpus asks for 30 GB of pixels, which the
  // pool's 512 MiB RLIMIT_AS (hostile_options) refuses to malloc; the worker lives on.
  world.start(thumbnail_options(R"({"max_pixels": 0, "max_width": 0, "max_height": 0})"));
  const TaskResult r = world.attack(
      "thumbnail",
      thumbnail_payload("width=32", read_corpus_file(kThumbnailCorpus / "bomb_100000x100000.png")));
  require_thumbnail_refused(
      world, r, Outcome::kResourceLimit,
      "thumbnail: out of memory: the decoded 100000x100000 image needs 30000000000 "
      "bytes");
  CHECK(world.pool().stats().restarts == 0);
  world.close_and_check_clean();
}

// Under a cgroup the memory limit counts what is touched and RLIMIT_AS is off: the bomb's
// pixel buffer is granted, and libpng fills it row by row until the OOM killer ends the
// worker. It costs that worker and that task only.
TEST_CASE("a real bomb let through by a cap set too high is killed at the cgroup's memory limit",
          "[needs-cgroup]") {
  HostileWorld world;
  PoolOptions o = thumbnail_options(R"({"max_pixels": 0})");
  o.sandbox.limits.address_space = 64ull << 20;  // the cgroup's memory.max
  o.workers = 1;
  world.start_with_cgroups(o);
  const TaskResult r =
      world.attack("thumbnail", thumbnail_payload("width=32", png_bomb_file(6000, 6000)));
  REQUIRE(r.attempts() == 1);
  const Attempt& a = r.history[0];
  INFO(a.error);
  CHECK(a.outcome == Outcome::kResourceLimit);
  CHECK(a.error.rfind("resource_limit: memory", 0) == 0);
  CHECK_FALSE(
      thumbnail_worker_alive(world.pool(), a.worker_pid));  // replaced; attack() saw it serve
  world.close_and_check_clean();
}

TEST_CASE("a progressive JPEG of endless scans is stopped at the 100th") {
  HostileWorld world;
  world.start(thumbnail_options());
  // The last scan of a progressive JPEG repeated 200 times before EOI: libjpeg takes each
  // repeat for a new pass over the whole image (and warns only).
  const std::string jpeg = sandpool::testing::encode(
      sandpool::testing::gradient(64, 64), sandpool::testing::ImageFormat::kProgressiveJpeg);
  const std::size_t last_scan = jpeg.rfind("\xff\xda");
  REQUIRE(last_scan != std::string::npos);
  const std::string scan = jpeg.substr(last_scan, jpeg.size() - 2 - last_scan);
  std::string endless = jpeg.substr(0, jpeg.size() - 2);
  for (int i = 0; i < 200; ++i) endless += scan;
  endless += "\xff\xd9";
  const TaskResult r = world.attack("thumbnail", thumbnail_payload("width=32", endless));
  require_thumbnail_refused(world, r, Outcome::kFailed, "thumbnail: jpeg: more than 100 scans");
  world.close_and_check_clean();
}

// The encoder stops as soon as its output would pass max_result, before it builds more: the
// error names max_result, and the worker's memory grows by no more than the output it may
// return (the encoder's buffer, at most max_result) and the decoded image, plus slack.
TEST_CASE("a thumbnail whose encoding would pass max_result stops at it, naming it") {
  HostileWorld world;
  PoolOptions o = thumbnail_options();
  o.max_result = 256;
  world.start(o);
  const std::string image =
      sandpool::testing::encode(sandpool::testing::gradient(1024, 1024), ImageFormat::kPng);
  const auto [format, error] = GENERATE(table<std::string, std::string>({
      {"png", "thumbnail: png output: the encoded image would exceed max_result (256 bytes)"},
      {"jpeg", "thumbnail: jpeg output: the encoded image would exceed max_result (256 bytes)"},
  }));
  const TaskResult r =
      world.attack("thumbnail", thumbnail_payload("width=1024 format=" + format, image));
  require_thumbnail_refused(world, r, Outcome::kFailed, error);
  world.close_and_check_clean();
}
