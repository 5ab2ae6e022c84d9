#!/bin/sh
# BullMQ beside `sandpool-bench --only cluster` (docs/performance.md): W1 (jobs/s through two
# in-process workers, concurrency 64 each, as the bench's nodes) and W2 (one job at a time,
# added then awaited with waitUntilFinished: the round trip's p50), on a redis-server of its
# own on a unix socket in a temporary directory, as the bench's. Never run by CI. Installs
# bullmq from the npm registry into bench/bullmq/node_modules (no browser, nothing global).
# Usage: bench/bullmq/run.sh [jobs (20000)]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
jobs=${1:-20000}
cd "$here"
if [ ! -d node_modules/bullmq ]; then
  npm install --no-audit --no-fund --no-save --silent bullmq@5.34.0
fi
dir=$(mktemp -d)
redis-server --port 0 --unixsocket "$dir/redis.sock" --unixsocketperm 700 --dir "$dir" \
  --save "" --appendonly no --daemonize no --logfile "$dir/redis.log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
until redis-cli -s "$dir/redis.sock" ping >/dev/null 2>&1; do sleep 0.05; done
node bench.mjs "$dir/redis.sock" "$jobs"
