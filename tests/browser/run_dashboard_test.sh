#!/bin/sh
# Runs dashboard_test.mjs with the node found now, at test time (node or Debian's nodejs on
# PATH), so the test is registered whether or not configure saw one. Without one it skips:
# "SKIPPED: <why>" and exit 77, which .ci/check-skips fails CI on unless expected.
# usage: run_dashboard_test.sh BIN_DIR PLUGIN_DIR OUT_DIR
node=$(command -v node || command -v nodejs) || {
  echo "SKIPPED: no node or nodejs on PATH (scripts/deps.sh installs Debian's nodejs)"
  exit 77
}
exec "$node" "$(dirname "$0")/dashboard_test.mjs" "$@"
