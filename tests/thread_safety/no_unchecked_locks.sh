#!/usr/bin/env bash
# Every lock of the product is one clang can check (<sandpool/base/thread_annotations.hpp>'s
# Mutex, MutexLock, CondVar): fails, naming file and line, where product code (every library
# and app; not tests/, bench/, fuzz/) uses a std mutex, lock or condition variable directly.
# The header that wraps them is the one place that may.
#
# usage: no_unchecked_locks.sh SOURCE_DIR
set -uo pipefail
cd "$1" || exit 2
pattern='std::(mutex|recursive_mutex|timed_mutex|shared_mutex|shared_timed_mutex|condition_variable(_any)?|lock_guard|unique_lock|scoped_lock|shared_lock)\b'
found=$(grep -rnE "$pattern" --include='*.cpp' --include='*.hpp' --include='*.h' \
  --exclude-dir=tests --exclude-dir=bench --exclude-dir=fuzz --exclude-dir='build*' \
  --exclude-dir=clients --exclude-dir=.git . |
  grep -v '^\./base/include/sandpool/base/thread_annotations\.hpp:')
if [ -n "$found" ]; then
  echo "FAIL: a lock the thread-safety analysis cannot see (use Mutex, MutexLock, CondVar and" >&2
  echo "GUARDED_BY: docs/development.md, \"Thread-safety annotations\"):" >&2
  echo "$found" >&2
  exit 1
fi
echo "ok: every lock of the product is an annotated Mutex"
