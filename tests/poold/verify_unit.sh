#!/bin/sh
# Usage: verify_unit.sh UNIT_FILE
# Runs `systemd-analyze verify` on a rendered unit file. Any diagnostic fails the test, not
# only errors: verify exits 0 after warning about an unknown or misspelt key. Needs no
# running systemd (it works as root in a container). Exits 77, which ctest reports as
# skipped, when systemd-analyze is not installed.
set -u
unit=$1
if ! analyze=$(command -v systemd-analyze); then
  echo "SKIPPED: systemd-analyze is not installed (Debian: apt-get install systemd)"
  exit 77
fi
# --man=no: do not look up the man pages named in Documentation= (none are installed here).
out=$("$analyze" verify --man=no "$unit" 2>&1)
rc=$?
if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
  echo "systemd-analyze verify $unit: exit $rc"
  echo "$out"
  exit 1
fi
echo "systemd-analyze verify $unit: clean"
