#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time (FUZZ_SECONDS, default 20) from its committed
# seed corpus in tests/fuzz/<target>/, JOBS (default nproc) at a time: on 2 cores the eight
# take four rounds, about a minute and a half. The targets are built by `make fuzz-build` (or
# `make asan-build`) in the ASan tree, FUZZ_DIR (default build-asan). Exits non-zero when a
# fuzzer finds a crash, a leak or a sanitizer error; the input that did it is left in
# FUZZ_DIR/fuzz-runs/artifacts/ (replay it with: FUZZ_DIR/bin/fuzz_<target> FILE). Longer runs are
# for people: FUZZ_SECONDS=600 make fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-20}"
jobs="${JOBS:-$(nproc)}"
dir="${FUZZ_DIR:-build-asan}"
out="$dir/fuzz-runs"
# The same list as the fuzz_targets target (fuzz/CMakeLists.txt).
targets=(messages result_ring config control_frames journal_records http_requests cron tzif batch_layout)
for target in "${targets[@]}"; do
  [ -x "$dir/bin/fuzz_$target" ] || { echo "fuzz: $dir/bin/fuzz_$target is missing (make fuzz-build)" >&2; exit 2; }
done

# The fuzzers are single-threaded: they run `jobs` at a time, each for the full time on a
# core of its own. Each one's output goes to FUZZ_DIR/fuzz-runs/<target>.log, printed when it ends.
mkdir -p "$out/artifacts"
run_one() {
  local target=$1
  # New inputs go to a scratch corpus under FUZZ_DIR/fuzz-runs/; the committed seeds are only read.
  local work="$out/corpus/$target"
  mkdir -p "$work"
  "$dir/bin/fuzz_$target" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/${target}-" "$work" "tests/fuzz/$target" \
    >"$out/$target.log" 2>&1
}

status=0
pids=()
names=()
finish_oldest() {
  local rc=0
  wait "${pids[0]}" || rc=$?
  cat "$out/${names[0]}.log"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: ${names[0]} FAILED; reproducer in $out/artifacts/" >&2
    status=1
  fi
  pids=("${pids[@]:1}")
  names=("${names[@]:1}")
}
for target in "${targets[@]}"; do
  seeds="tests/fuzz/$target"
  if [ ! -d "$seeds" ] || [ -z "$(ls -A "$seeds")" ]; then
    echo "fuzz: no seed corpus in $seeds" >&2
    status=1
    continue
  fi
  [ "${#pids[@]}" -ge "$jobs" ] && finish_oldest
  echo "fuzz: $target for ${seconds}s"
  run_one "$target" &
  pids+=("$!")
  names+=("$target")
done
while [ "${#pids[@]}" -gt 0 ]; do finish_oldest; done
exit "$status"
