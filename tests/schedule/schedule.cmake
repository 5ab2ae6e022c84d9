# How ctest -j2 schedules the slowest and the heaviest tests (read by ctest, through
# CMakeLists.txt here, and by check_schedule.cmake). Names are ctest's, whole.
#
# sp_schedule_alone: tests that load the machine for their whole run (half a minute of
# poolctl loops, the bench groups): run with nothing beside them (RUN_SERIAL), so a short
# window in another test never runs next to them.
set(sp_schedule_alone
  "poold_service_tests:poold: half a minute of workers and waited-submit loops, status always answers, shutdown stops it"
  "bench_tests:the cluster group runs its nodes through a redis-server of its own and loses none"
  "bench_tests:a 20,000-task soak ends every accepted task exactly once and loses none")

# sp_schedule_costs: the ten longest tests of the plain tree and their seconds (ctest's
# Testing/Temporary/CTestCostData.txt of a full ctest -j2 run), as NAME|SECONDS; the package
# test's 25 s is its run alone (2026-12-06), not yet from a full run. A fresh
# build dir has no cost data: COST makes ctest start these first, so the run does not end
# waiting on one of them alone.
set(sp_schedule_costs
  "docs: every config key, poolctl command and control operation is documented, and only those|70"
  "poold_service_tests:poold: half a minute of workers and waited-submit loops, status always answers, shutdown stops it|31"
  "poold_service_tests:crash points: a stop that keeps a task, killed at each write, keeps it open|35"
  "python: installs offline into a venv and submits a task|34"
  "package: the .deb unpacked runs a task through an out-of-tree plugin, and lintian's tags are explained|25"
  "poold_service_tests:crash points: a dead-lettering killed at each write leaves one letter or an open task|29"
  "browser: the dashboard's pages in chromium show and change what poold holds|23"
  "poold_service_tests:crash points: a dead-letter replay killed at each write leaves the letter or the task|19"
  "redis_cluster_tests:three poold nodes share a redis pool through a SIGKILL of one and a restart of redis|18"
  "poold_service_tests:poold: a letter its locked store cannot take waits, is spilled at stop to the file the log names, and `dlq import` loads it once|17"
  "pool_tests:a burst of 10,000 tasks where 10% crash their worker: every task ends once|16")
