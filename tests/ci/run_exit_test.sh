#!/usr/bin/env bash
# .ci/run's control flow with a `make` that does nothing: the phases in order, the background
# build chain, and the exit status CI reads. A green run must exit 0 (its EXIT trap once ended
# every green run with status 1: its kill of the finished chain failed under set -e), and a
# failure in a foreground phase or in a background build must fail the run with that status,
# naming the phase.
#
# usage: run_exit_test.sh SOURCE_DIR
set -uo pipefail  # no -e: each check below reports its own failure
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() {  # check OK WHAT
  if [ "$1" = 0 ]; then echo "ok   $2"; else echo "FAIL $2"; failures=$((failures + 1)); fi
}

# The fake make: prints its arguments; fails with status 7 for the target in $FAKE_FAIL.
mkdir -p "$work/bin"
cat >"$work/bin/make" <<'SH'
#!/bin/sh
echo "fake make $*"
[ "${FAKE_FAIL:-}" = "$1" ] && exit 7
exit 0
SH
chmod +x "$work/bin/make"

run() {  # run FAIL_TARGET: .ci/run with the fake make; sets out and rc
  out=$(FAKE_FAIL=$1 PATH="$work/bin:$PATH" "$src/.ci/run" 2>&1)
  rc=$?
}

run ""
[ "$rc" = 0 ]; check $? "a green run exits 0 (got $rc)"
grep -q '^ci: total [0-9]* s$' <<<"$out"; check $? "a green run prints its total"
phases=$(sed -n 's/^ci phase \([a-z-]*\) .*/\1/p' <<<"$out" | head -7 | tr '\n' ' ')
[ "$phases" = "build ctest asan-build asan-tests tsan-build tsan-tests fuzz " ]
check $? "the phases in order (got: $phases)"

run test
[ "$rc" = 7 ]; check $? "a failed ctest phase exits with make's status 7 (got $rc)"
grep -q '^ci: FAILED in phase ctest after' <<<"$out"; check $? "and names the phase ctest"

run tsan-build
[ "$rc" = 7 ]; check $? "a failed background build exits with its status 7 (got $rc)"
grep -q '^ci: FAILED in phase tsan-build after' <<<"$out"; check $? "and names tsan-build"

[ "$failures" = 0 ] || { echo "$failures checks failed"; echo "$out"; exit 1; }
