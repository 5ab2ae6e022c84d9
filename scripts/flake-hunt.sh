#!/usr/bin/env bash
# Runs the tests that flaked under load (and those issue #33's audit found window-bound) N
# times each, under a CPU hog that keeps both cores busy, and prints
#   flake-hunt runs N failures F
# F counts failed test runs (a test that fails in 3 of the N rounds counts 3). Exit status 0
# only when F is 0. The figure of the last hunt is in docs/development.md.
#
# usage: scripts/flake-hunt.sh [N]        (default 20; BUILD=build-asan hunts in that tree)
# The hog is stress-ng (scripts/deps.sh) with as many CPU workers as cores, at the tests'
# own priority; ctest runs the tests JOBS (default nproc) at a time as make test does.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-20}
build=${BUILD:-build}
jobs=${JOBS:-$(nproc)}

# ctest -R patterns, one per test or family. A test here failed under load once, or was
# bound to a window the audit named; each was then fixed to wait on a condition.
patterns=(
  # pool_tests: the last replacement's Ready heard before the raised max_payload was released
  'pool_tests:reconfigure with a new launch spec rolls the workers'
  # a throttle read from two snapshots (fixed 2026-12-05)
  'concurrency_per_type'
  # CPU time in 10 ms ticks on a loaded VM (fixed 2026-12-05)
  'hostile_library_tests:a replace bomb fails naming max_result'
  # the Python client: a callback on a future already done; a cancel before its request left
  'python: (futures|aio)'
  # the dashboard in chromium: an expiry window set by a task's length; a check(true)
  'browser: the dashboard'
  # killed mid-task by the clock: tasks now run until their worker dies or the test cancels
  'pool_tests:(kill-worker SIGKILLs a worker|a worker killed from outside mid-task|tasks waiting in a dead worker.s ring|a task accepted while the pool closes)'
  'worker_host_tests:a sandboxed worker asked for a backtrace'
  # Redis: workers SIGSTOPped while tasks must be held; slow beats where failover is not the subject
  'redis_pool_tests:(a dead node.s tasks are claimed|a node that loses Redis keeps running)'
  'redis_cluster_tests:(three poold nodes share|a task waiting out its backoff|a redis pool.s scheduled task|two poold nodes share a redis pool.s (rate limit|cap))'
  'bench_tests:the cluster group runs its nodes'
  # the event hub's slow follower, now counted exactly through a delivery hook
  'poold_tests:a follower the hub cannot keep up with'
  # poold as a process: its log read to the end; tasks that hold a slot until cancelled; waits
  # known taken before the task can end; not_before placed after the wall clock
  'poold_service_tests:poold: (a letter its locked store|a kill -9 during a batch|SIGTERM keeps what is left|concurrency_per_type holds|a task whose not_before passes|a thread stuck in one item|wait answers once the task ends|an admin.s submit does not queue|a pool with workers.min 0)'
  'poold_http_tests:http: (without an admin token|poold refuses a listener)'
  # the test's schema repair met the store's retrying writer with busy_timeout 0 (1/40 under
  # ASan and a hog, 2026-12-06)
  'dead_letter_tests:a database that reads as corrupt keeps letters pending'
  # fired a slot twice once on a loaded machine (fired 2, expected 1; a helper's run,
  # 2026-12-06): hunted for the evidence
  'redis_cluster_tests:two poold nodes on one redis pool fire each slot'
  # a serving thread counted busy until after its answer was sent: the client's next request
  # met a full lane (CI, stop 43; 2/300 under stress-ng, 0/1000 once freed before delivery)
  'metrics_tests:http server: a full lane answers 503 at once'
)

command -v stress-ng >/dev/null || { echo "flake-hunt: stress-ng is missing (scripts/deps.sh)" >&2; exit 2; }
[ -d "$build" ] || { echo "flake-hunt: no build dir $build (make build)" >&2; exit 2; }
for p in "${patterns[@]}"; do  # a renamed test must not silently leave the hunt
  n=$(ctest --test-dir "$build" -N -R "$p" | sed -n 's/^Total Tests: //p')
  [ "${n:-0}" -gt 0 ] || { echo "flake-hunt: no test matches '$p'" >&2; exit 2; }
done
regex=$(IFS='|'; echo "${patterns[*]}")
count=$(ctest --test-dir "$build" -N -R "$regex" | sed -n 's/^Total Tests: //p')
[ "${count:-0}" -gt 0 ] || { echo "flake-hunt: no test matches" >&2; exit 2; }
echo "flake-hunt: $count tests, $rounds rounds, under stress-ng --cpu $(nproc)"

stress-ng --cpu "$(nproc)" --timeout 0 >/dev/null 2>&1 &
hog=$!
trap 'kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null || true' EXIT

failures=0
log=$(mktemp)
for ((i = 1; i <= rounds; i++)); do
  ctest --test-dir "$build" -R "$regex" -j "$jobs" --output-on-failure >"$log" 2>&1 || true
  failed=$(sed -n 's/^[[:space:]]*[0-9][0-9]* - \(.*\) (\(Failed\|Timeout\|SEGFAULT\|Subprocess aborted\|Exception\|Child aborted\|Not Run\))$/\1/p' "$log")
  n=$(printf '%s' "$failed" | grep -c . || true)
  if [ "$n" -gt 0 ]; then
    echo "flake-hunt: round $i: $n failed:"
    printf '  %s\n' "$failed"
    cp "$log" "${log}.round$i"
    echo "  (output kept in ${log}.round$i)"
  fi
  failures=$((failures + n))
  echo "flake-hunt: round $i of $rounds done, $failures failures so far"
done
rm -f "$log"
echo "flake-hunt runs $rounds failures $failures"
[ "$failures" -eq 0 ]
