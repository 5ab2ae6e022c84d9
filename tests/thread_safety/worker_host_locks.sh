#!/usr/bin/env bash
# The worker host's lock rules (worker_channel.hpp, host_api.hpp: GUARDED_BY, REQUIRES,
# EXCLUDES), checked by clang. The clang trees of make check do not build the worker host
# (its binary cannot run under a sanitizer: they use the normal tree's), so its sources are
# compiled here, -fsyntax-only, with the given compiler and flags.
#
# usage: worker_host_locks.sh SOURCE_DIR CXX FLAG...
set -uo pipefail
src=$1
cxx=$2
shift 2
fail=0
for file in "$src"/worker_host/src/*.cpp; do
  if ! out=$("$cxx" -std=c++20 -fsyntax-only "$@" -I "$src/worker_host/src" \
    -I "$src/worker_host/include" -I "$src/base/include" -I "$src/ipc/include" \
    -I "$src/sandbox/include" "$file" 2>&1); then
    echo "FAIL: ${file#"$src"/}:" >&2
    echo "$out" >&2
    fail=1
  else
    echo "ok: ${file#"$src"/}"
  fi
done
exit $fail
