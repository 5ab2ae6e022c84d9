#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and runs each for a bounded time
# (FUZZ_SECONDS, default 30) from its committed seed corpus in tests/fuzz/<target>/, JOBS
# (default nproc) at a time: on 2 cores the eight take four rounds, about two minutes. Exits
# non-zero when a fuzzer finds a crash, a leak or a sanitizer error; the input that
# did it is left in build-fuzz/artifacts/ (replay it with: build-fuzz/bin/fuzz_<target> FILE).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-30}"
jobs="${JOBS:-$(nproc)}"
targets=(messages result_ring config control_frames journal_records http_requests cron tzif)

# FUZZ_STEP: `build` only builds, `run` only runs (what make fuzz-build and make fuzz do, so
# .ci/run times them apart), anything else both.
step="${FUZZ_STEP:-all}"

# CMAKE_ARGS as for the other build dirs (Makefile). The default linker: gold links clang's
# sanitizer runtime with a warning per ASan symbol.
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DSANDPOOL_FUZZ=ON \
  -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSANDPOOL_LINKER=default \
  ${CMAKE_ARGS:-} >/dev/null
if [ "$step" != run ]; then
  # Only the fuzz targets: the rest of the tree is not needed here.
  cmake --build build-fuzz --target "${targets[@]/#/fuzz_}" -j "$jobs"
fi
[ "$step" = build ] && exit 0

# The fuzzers are single-threaded: they run `jobs` at a time, each for the full time on a
# core of its own. Each one's output goes to build-fuzz/<target>.log, printed when it ends.
mkdir -p build-fuzz/artifacts
run_one() {
  local target=$1
  # New inputs go to a scratch corpus under build-fuzz/; the committed seeds are only read.
  local work="build-fuzz/corpus/$target"
  mkdir -p "$work"
  "build-fuzz/bin/fuzz_$target" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="build-fuzz/artifacts/${target}-" "$work" "tests/fuzz/$target" \
    >"build-fuzz/$target.log" 2>&1
}

status=0
pids=()
names=()
finish_oldest() {
  local rc=0
  wait "${pids[0]}" || rc=$?
  cat "build-fuzz/${names[0]}.log"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: ${names[0]} FAILED; reproducer in build-fuzz/artifacts/" >&2
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
