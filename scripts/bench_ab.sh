#!/bin/bash
# Alternates two builds' W1/W2 runs on this host: scripts/bench_ab.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]
# (e.g. a worktree of the commit before a change, built with `cmake --build B --target
# sandpool-bench sandpool-worker sp_example_plugins`, against build/). Prints one line per run:
# side round W1-best-tasks/s W1-loop-cpu-us W2-p50-us W2-p99-us.
set -euo pipefail
before=${1:?before build dir}
after=${2:?after build dir}
rounds=${3:-3}
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    dir=$before
    [ "$side" = after ] && dir=$after
    "$dir/bin/sandpool-bench" --only W1,W2 --w1-crash-tasks 0 |
      awk -v s="$side" -v r="$r" '/^W1 throughput /{t=$3} /^W1 loop_cpu_per_task/{l=$3}
        /^W2 p50 /{p=$3} /^W2 p99 /{q=$3} END{print s, r, t, l, p, q}'
  done
done
