// Crash points (issue 34, docs/journal.md "Testing it against crashes and full disks"): each
// path that moves a task between the journal, the dead letters and a pool is killed at every
// SQLite write point in turn (poold_faults, crash@N), and the plain poold, restarted on the
// same state dir, must find each task in exactly one place: open and then run to an end,
// ended once, or exactly one letter. The driver is bench/crash_points.cpp, which
// `sandpool-bench --only journal` runs too.
#include <catch2/catch.hpp>

#include "crash_points.hpp"
#include "poold_test_support.hpp"

namespace sandpool::testing {
namespace {

namespace cp = crash_points;

cp::PathReport run_every_point(cp::Path path) {
  TempDir scratch;
  cp::Setup s;
  s.poold = std::string(SANDPOOL_BIN_DIR) + "/poold";
  s.poold_faults = std::string(SANDPOOL_BIN_DIR) + "/poold_faults";
  s.plugin_dir = SANDPOOL_PLUGIN_DIR;
  s.scratch = scratch.path;
  cp::PathReport r = cp::run_crash_points(path, s);
  std::string problems;
  for (const std::string& p : r.problems) problems += p + "\n";
  INFO(cp::path_name(path) << ": " << r.write_points << " write points, " << r.points_run
                           << " killed in turn, " << r.crashed << " crashed there\n"
                           << problems);
  CHECK(r.problems.empty());
  CHECK(r.write_points > 0);
  CHECK(r.points_run == r.write_points);
  CHECK(r.crashed > 0);
  CHECK(r.lost == 0);
  CHECK(r.dup == 0);
  return r;
}

TEST_CASE("crash points: a finish killed at each write leaves its task in one place") {
  run_every_point(cp::Path::kFinish);
}

TEST_CASE("crash points: a dead-lettering killed at each write leaves one letter or an open task") {
  run_every_point(cp::Path::kDeadLetter);
}

TEST_CASE("crash points: a stop that keeps a task, killed at each write, keeps it open") {
  run_every_point(cp::Path::kStopKeep);
}

TEST_CASE("crash points: a dead-letter replay killed at each write leaves the letter or the task") {
  run_every_point(cp::Path::kReplay);
}

}  // namespace
}  // namespace sandpool::testing
