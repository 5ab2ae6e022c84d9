#!/bin/sh
# Runs the piscina peer (piscina.mjs): installs piscina 5.x from the npm registry into
# bench/peers/node_modules first if it is missing. Needs node >= 20 and npm; never run in CI.
# Usage: bench/peers/run-piscina.sh [w1_tasks (200000)] [w2_rounds (20000)]
# Environment: PISCINA_CTPW (16), PISCINA_WORKERS (2), PISCINA_PAYLOAD (64 bytes).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -f "$here/node_modules/piscina/package.json" ]; then
  echo "run-piscina: installing piscina into $here/node_modules" >&2
  (cd "$here" && npm install --no-audit --no-fund --no-save --silent >&2)
fi
PISCINA_CTPW=${PISCINA_CTPW:-16} exec node "$here/piscina.mjs" "${1:-200000}" "${2:-20000}"
