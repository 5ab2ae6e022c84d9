#!/bin/sh
# sandpool beside piscina (issue 37's "Done when"): ROUNDS (3) alternating rounds of
# `sandpool-bench --only W1,W2,W3,raw` and the piscina peer (run-piscina.sh), then, per round,
# the ratios the issue names: W1 / piscina W1 (goal >= 30), W1 / raw echo (>= 0.15), W2 p50 /
# raw futex ping-pong p50 (<= 1), W2 p50 / piscina W2 p50, and W3's wall (<= 1.05 s).
# Never run in CI (it installs piscina from the npm registry on first use).
# Usage: bench/peers/side-by-side.sh [build dir (build)]
# Environment: ROUNDS (3), PISCINA_TASKS (200000), BENCH_ARGS (extra sandpool-bench options).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
bench="$build/bin/sandpool-bench"
[ -x "$bench" ] || { echo "side-by-side: no $bench (build sandpool-bench first)" >&2; exit 2; }
rounds=${ROUNDS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
i=1
while [ "$i" -le "$rounds" ]; do
  # shellcheck disable=SC2086
  "$bench" --only W1,W2,W3,raw --w1-crash-tasks 0 ${BENCH_ARGS:-} >"$out/sandpool.$i" 2>/dev/null ||
    { echo "side-by-side: sandpool-bench failed in round $i" >&2; exit 1; }
  "$here/run-piscina.sh" "${PISCINA_TASKS:-200000}" >"$out/piscina.$i" ||
    { echo "side-by-side: the piscina peer failed in round $i" >&2; exit 1; }
  i=$((i + 1))
done
echo "# round: W1 tasks/s (sandpool / piscina = ratio, goal >= 30) | W1 / raw echo (goal >= 0.15)"
echo "#        | W2 p50 us (sandpool / futex ping-pong = ratio, goal <= 1; piscina) | W3 wall s (goal <= 1.05)"
i=1
while [ "$i" -le "$rounds" ]; do
  awk -v round="$i" '
    FILENAME ~ /sandpool/ { s[$1 " " $2] = $3 }
    FILENAME ~ /piscina/  { p[$2] = $3 }
    END {
      w1 = s["W1 throughput"]; echo = s["raw echo_stream_throughput"]
      w2 = s["W2 p50"]; futex = s["raw futex_pingpong_p50"]; pw1 = p["W1_throughput"]
      printf "round %d: W1 %d / %d = %.1fx | of raw echo (%.2f M frames/s) %.3f | ", round, w1, pw1,
             w1 / pw1, echo / 1e6, w1 / echo
      printf "W2 p50 %.1f / %.1f = %.2f; piscina %.1f | W3 %.3f s\n", w2, futex, w2 / futex,
             p["W2_p50"], s["W3 wall"]
    }' "$out/sandpool.$i" "$out/piscina.$i"
  i=$((i + 1))
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
