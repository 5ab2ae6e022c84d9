#!/usr/bin/env bash
# Proves the thread-safety check bites: guarded_counter.cpp, compiled with the given compiler
# and flags (-fsyntax-only), must compile as written and fail, naming the broken rule, for each
# way SP_BREAK breaks it. So removing -Wthread-safety (or -Werror) from the flags, or the
# annotations from <sandpool/base/thread_annotations.hpp>, fails this test.
#
# usage: thread_safety_bites.sh SOURCE_DIR CXX FLAG...
set -uo pipefail
src=$1
cxx=$2
shift 2
file=$src/tests/thread_safety/guarded_counter.cpp
compile() {
  "$cxx" -std=c++20 -fsyntax-only "$@" -I "$src/base/include" "$file" 2>&1
}

fail=0
if ! out=$(compile "$@"); then
  echo "FAIL: the version that keeps the lock rule does not compile:" >&2
  echo "$out" >&2
  fail=1
fi
# Each case, and a piece of the message clang gives for it.
cases=(
  "unlocked_read|reading variable 'n_' requires holding mutex 'mu_'"
  "requires_unheld|calling function 'add_locked' requires holding mutex 'mu_'"
  "excludes_held|cannot call function 'add' while mutex 'mu_' is held"
  "wait_unheld|calling function 'wait' requires holding mutex 'mu_'"
  "read_after_unlock|reading variable 'n_' requires holding mutex 'mu_'"
)
for c in "${cases[@]}"; do
  name=${c%%|*}
  want=${c#*|}
  if out=$(compile "$@" -DSP_BREAK_$name); then
    echo "FAIL: $name compiled: the thread-safety analysis is off (flags: $*)" >&2
    fail=1
  elif ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: $name failed without \"$want\":" >&2
    echo "$out" >&2
    fail=1
  else
    echo "ok: $name refused: $want"
  fi
done
exit $fail
