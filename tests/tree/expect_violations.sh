#!/bin/sh
# expect_violations.sh PYTHON CHECK FIXTURE EXPECTED: the include check run on FIXTURE must
# exit 1 and print exactly the lines of EXPECTED (tests/tree/CMakeLists.txt).
set -u
out=$("$1" "$2" "$3")
rc=$?
if [ "$rc" -ne 1 ]; then
  echo "expected exit 1 from $2 on $3, got $rc; it printed:"
  echo "$out"
  exit 1
fi
if ! printf '%s\n' "$out" | diff -u "$4" -; then
  echo "the check's lines differ from $4 (above: - expected, + printed)"
  exit 1
fi
echo "the check failed on $3 with the $(wc -l < "$4") expected lines"
