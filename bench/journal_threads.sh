#!/usr/bin/env bash
# CPU per task of each poold thread for a journaled and an unjournaled batch
# (docs/performance.md, "The round log, and jemalloc in poold").
# usage: bench/journal_threads.sh [build dir, default build] [tasks per batch, default 100000]
# Starts a poold of the build on a scratch dir with one 2-worker echo pool, warms it up with
# one batch, then runs three `poolctl batch` of the given size and prints, per thread, the CPU
# it used (utime + stime from /proc/<pid>/task/*/stat) divided by the tasks, for
# service.journal {enabled: true, sync: normal} and for off.
set -euo pipefail
build=$(realpath "${1:-build}")
tasks=${2:-100000}
hz=$(getconf CLK_TCK)

run() {
  local journal=$1 dir pid p
  dir=$(mktemp -d)
  cat >"$dir/poold.yaml" <<EOT
service:
  socket: {path: $dir/poold.sock, mode: "0600"}
  state_dir: $dir/state
  http: {listen: 127.0.0.1:0}
  log: {level: warn}
  journal: $journal
pools:
  - name: echo
    plugin: $build/plugins/libecho.so
    workers: {min: 2, max: 2, initial: 2}
    concurrency: 256
EOT
  "$build/bin/poold" --config "$dir/poold.yaml" >"$dir/poold.log" 2>&1 &
  pid=$!
  p="$build/bin/poolctl --socket $dir/poold.sock"
  for _ in $(seq 100); do $p status >/dev/null 2>&1 && break; sleep 0.1; done
  $p --json batch echo 20000 --payload-size 64 >/dev/null
  ticks() {
    for t in /proc/$pid/task/*; do
      local s
      s=($(sed 's/.*) //' "$t/stat"))
      echo "$(cat "$t/comm") $((s[11] + s[12]))"
    done | awk '{a[$1] += $2} END {for (k in a) print k, a[k]}' | sort
  }
  local before after t0 t1
  before=$(ticks)
  t0=$(date +%s.%N)
  for _ in 1 2 3; do $p --json batch echo "$tasks" --payload-size 64 >/dev/null; done
  # The journal's writes drained (status journal.pending 0), so its CPU is all counted.
  while :; do
    q=$($p --json status | python3 -c 'import json,sys; print((json.load(sys.stdin).get("journal") or {}).get("pending", 0))')
    [ "$q" = 0 ] && break
    sleep 0.1
  done
  t1=$(date +%s.%N)
  after=$(ticks)
  echo "journal: $journal  wall $(echo "$t1 - $t0" | bc) s for $((3 * tasks)) tasks"
  join <(echo "$before") <(echo "$after") | awk -v n=$((3 * tasks)) -v hz="$hz" \
    '{d = $3 - $2; if (d > 0) printf "  %-16s %6.2f us/task\n", $1, d * 1e6 / hz / n}'
  $p shutdown >/dev/null 2>&1 || true
  wait "$pid" || true
  rm -rf "$dir"
}

run "{enabled: true, sync: normal}"
run off
