#!/usr/bin/env bash
# .ci/check-skips against a real ctest run, so a change of ctest's output or of the log it
# reads cannot make it pass while it finds nothing. A scratch project of three tests: one
# passes, one skips as tests/host_probe.hpp makes a test skip ("SKIPPED: <why>" on stderr,
# exit 77), and one is a pytest run, with the Python client's own conftest.py and the -rs of
# clients/python/CMakeLists.txt, that skipped one of its two tests. Then:
#   - no skip expected: check-skips fails, naming both skipped tests with their reasons and
#     not the one that passed;
#   - one of them expected: it fails, naming only the other;
#   - both expected: it passes;
#   - no ctest output to read: it fails.
#
# usage: check_skips_test.sh SOURCE_DIR PYTHON CMAKE CTEST
set -uo pipefail  # no -e: each check below reports its own failure
src=$1 python=$2 cmake=$3 ctest=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() {  # check OK WHAT
  if [ "$1" = 0 ]; then echo "ok   $2"; else echo "FAIL $2"; failures=$((failures + 1)); fi
}

project=$work/project
mkdir -p "$project/py"
cp "$src/clients/python/tests/conftest.py" "$project/py/"
cat >"$project/py/test_skips.py" <<'PY'
import pytest


def test_that_passes():
    pass


def test_that_needs_a_widget():
    pytest.skip("no widget on this machine")
PY
cat >"$project/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(check_skips_self_test NONE)
enable_testing()
add_test(NAME "passes: always" COMMAND sh -c "exit 0")
add_test(NAME "probe: needs a gadget"
         COMMAND sh -c "echo 'SKIPPED: no gadget on this machine' >&2; exit 77")
add_test(NAME "python: skips" COMMAND "$python" -m pytest -q -rs -p no:cacheprovider
                                      "$project/py/test_skips.py")
set_tests_properties("passes: always" "probe: needs a gadget" "python: skips"
                     PROPERTIES SKIP_RETURN_CODE 77)
set(env PYTHONPATH=$src/clients/python:$src/clients/python/tests PYTHONDONTWRITEBYTECODE=1
        SANDPOOL_SKIP_EXIT=77)
set_tests_properties("python: skips" PROPERTIES ENVIRONMENT "\${env}")
CMAKE
"$cmake" -S "$project" -B "$project/build" >"$work/cmake.log" 2>&1 || {
  cat "$work/cmake.log"
  exit 1
}
"$ctest" --test-dir "$project/build" >"$work/ctest.log" 2>&1 || true
cat "$work/ctest.log"
grep -q 'probe: needs a gadget .*Skipped' "$work/ctest.log"
check $? "ctest reports the probe's test skipped"
grep -q 'python: skips .*Skipped' "$work/ctest.log"
check $? "ctest reports the pytest run that skipped a test skipped"

# run NAME EXPECTED_SKIPS_TEXT: check-skips on that run; its exit code in $code, its output in
# $work/NAME.out
run() {
  printf '%s' "$2" >"$work/$1.expected"
  code=0
  SANDPOOL_EXPECTED_SKIPS=$work/$1.expected "$src/.ci/check-skips" "$work/ctest.log" \
    "$project/build" >"$work/$1.out" 2>&1 || code=$?
  echo "--- check-skips, expecting: ${2:-nothing}"
  cat "$work/$1.out"
}

run none "# nothing may skip here
"
[ "$code" = 1 ]
check $? "with no skip expected, check-skips fails (exit $code)"
grep -qx '  probe: needs a gadget: SKIPPED: no gadget on this machine' "$work/none.out"
check $? "it names the probe's test and prints its reason"
grep -q '^  python: skips: SKIPPED \[1\] .*test_skips.py:[0-9]*: no widget on this machine$' \
  "$work/none.out"
check $? "it names the pytest run and prints pytest's reason"
! grep -q 'passes: always' "$work/none.out"
check $? "it does not name the test that passed"

run one "probe: needs a gadget
"
[ "$code" = 1 ] && grep -q '^  python: skips' "$work/one.out" &&
  ! grep -q '^  probe: needs a gadget' "$work/one.out"
check $? "with one skip expected, it fails naming only the other (exit $code)"

run both "# both expected
probe: needs a gadget

python: skips
"
[ "$code" = 0 ] && grep -q '2 skipped tests, all expected' "$work/both.out"
check $? "with both skips expected, it passes (exit $code)"

code=0
"$src/.ci/check-skips" "$work/no-such-output.log" >"$work/missing.out" 2>&1 || code=$?
[ "$code" != 0 ]
check $? "without ctest output to read, it fails (exit $code)"

echo "$failures check(s) failed"
[ "$failures" = 0 ]
