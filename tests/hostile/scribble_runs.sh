#!/usr/bin/env bash
# Issue 40's "50 of 50 runs", by hand (ctest runs the 20-iteration loop of
# scribble_test.cpp): a `scribble` or `scribble_ff` task followed by a normal `upper ok` on
# ONE worker, through sandpool-run and through poold, RUNS times each. A run passes when the
# normal task completes with "OK" (the scribbler itself is dead-lettered, retries exhausted).
#   tests/hostile/scribble_runs.sh [BUILD_DIR] [RUNS]
set -uo pipefail
build=$(realpath "${1:-build}")
runs=${2:-50}
plugin="$build/hostile-plugins/libscribbler.so"
tmp=$(mktemp -d)
poold_pid=
cleanup() {
  [[ -n $poold_pid ]] && kill "$poold_pid" 2>/dev/null && wait "$poold_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# sandpool-run: one run per process, --workers 1 --retries 1, both tasks through type `act`.
via_run() {
  local type=$1 passed=0 i out
  for ((i = 1; i <= runs; i++)); do
    out=$(printf '%s\nupper ok\n' "$type" |
      "$build/bin/sandpool-run" --plugin "$plugin" --type act --workers 1 --retries 1 --json \
        2>>"$tmp/run.log")
    if sed -n 2p <<<"$out" | grep -q '"state":"completed".*"result":"OK"'; then
      ((passed++))
    else
      echo "sandpool-run $type run $i: $(sed -n 2p <<<"$out")" >&2
    fi
  done
  echo "sandpool-run --workers 1 --retries 1: $type then 'upper ok': $passed of $runs passed"
}

# poold: one service, a one-worker pool; each run submits the scribbler, then waits for the
# normal task.
via_poold() {
  local type=$1 passed=0 i out
  for ((i = 1; i <= runs; i++)); do
    "$build/bin/poolctl" --socket "$tmp/poold.sock" submit "$type" x >/dev/null ||
      echo "poolctl submit $type failed" >&2
    out=$("$build/bin/poolctl" --socket "$tmp/poold.sock" submit upper ok --wait \
      --wait-timeout 60s 2>&1)
    if [[ $out == OK ]]; then ((passed++)); else echo "poold $type run $i: $out" >&2; fi
  done
  echo "poold (workers 1, retries 1): $type then 'upper ok': $passed of $runs passed"
}

via_run scribble
via_run scribble_ff

cat >"$tmp/poold.yaml" <<YAML
service:
  socket: {path: $tmp/poold.sock}
  state_dir: $tmp/state
  journal: {enabled: false}
pools:
  - name: scribbler
    plugin: $plugin
    workers: {initial: 1}
    concurrency: 8
    task_defaults: {retries: 1}
    restart: {max_restarts: 1000, within: 1s}
YAML
mkdir -p "$tmp/state"
"$build/bin/poold" --config "$tmp/poold.yaml" 2>"$tmp/poold.log" &
poold_pid=$!
for _ in $(seq 100); do [[ -S $tmp/poold.sock ]] && break; sleep 0.1; done
via_poold scribble
via_poold scribble_ff
"$build/bin/poolctl" --socket "$tmp/poold.sock" stats scribbler --wide | cut -c1-200
echo "worker exits in poold's log: $(grep -c 'exited with code 72' "$tmp/poold.log") with code 72," \
  "$(grep -c 'exited with code 70' "$tmp/poold.log") with 70," \
  "$(grep -c 'sandbox_violation' "$tmp/poold.log") sandbox_violation"
