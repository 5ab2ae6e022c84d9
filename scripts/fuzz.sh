#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and runs each for a bounded time
# (FUZZ_SECONDS, default 25: under two minutes for the four) from its committed seed
# corpus in tests/fuzz/<target>/. Exits non-zero when a fuzzer finds a crash, a leak or a
# sanitizer error; the input that did it is left in build-fuzz/artifacts/ (replay it with:
# build-fuzz/bin/fuzz_<target> FILE).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-25}"
jobs="${JOBS:-$(nproc)}"
targets=(messages result_ring config control_frames)

CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DSANDPOOL_FUZZ=ON \
  -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# Only the fuzz targets: the rest of the tree is not needed here.
cmake --build build-fuzz --target "${targets[@]/#/fuzz_}" -j "$jobs"

status=0
for target in "${targets[@]}"; do
  seeds="tests/fuzz/$target"
  if [ ! -d "$seeds" ] || [ -z "$(ls -A "$seeds")" ]; then
    echo "fuzz: no seed corpus in $seeds" >&2
    status=1
    continue
  fi
  # New inputs go to a scratch corpus under build-fuzz/; the committed seeds are only read.
  work="build-fuzz/corpus/$target"
  mkdir -p "$work" build-fuzz/artifacts
  echo "fuzz: $target for ${seconds}s"
  if ! "build-fuzz/bin/fuzz_$target" -max_total_time="$seconds" -print_final_stats=1 \
      -artifact_prefix="build-fuzz/artifacts/${target}-" "$work" "$seeds"; then
    echo "fuzz: $target FAILED; reproducer in build-fuzz/artifacts/" >&2
    status=1
  fi
done
exit "$status"
