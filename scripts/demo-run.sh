#!/usr/bin/env bash
# The 5-minute tour, run for real: sandpool-run drives real sandboxed worker processes.
# `make demo` tells the story through the service instead: poold and poolctl (scripts/demo.sh).
set -euo pipefail
build=${1:-build}
run="$build/bin/sandpool-run"
plugins="$build/plugins"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; }

say "1. Submit: one task through the 'upper' plugin, in a sandboxed worker process"
show "echo 'hello sandpool' | sandpool-run --plugin $plugins/libupper.so"
echo 'hello sandpool' | "$run" --plugin "$plugins/libupper.so"

say "2. Batch: 100,000 payloads through 'echo' on 2 workers (one line per task, in order)"
show "seq 100000 | sandpool-run --plugin $plugins/libecho.so | tail -3"
start=$(date +%s.%N)
seq 100000 | "$run" --plugin "$plugins/libecho.so" --concurrency 64 | tail -3
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" 'BEGIN { printf "100000 tasks in %.2f s (%.0f tasks/s, process start-up included)\n", e-s, 100000/(e-s) }'

say "3. A worker crash: the 'crash' plugin segfaults its worker; the pool replaces it and retries"
show "echo boom | sandpool-run --plugin $plugins/libcrash.so --retries 2 --json"
echo boom | "$run" --plugin "$plugins/libcrash.so" --retries 2 --json || true

say "4. Retries: 'flaky' asks for a retry on attempt 1 and succeeds on attempt 2"
show "echo again | sandpool-run --plugin $plugins/libflaky.so --json"
echo again | "$run" --plugin "$plugins/libflaky.so" --json

say "5. Dead letters: 'fail' returns SP_FAIL, a permanent failure: no retry, dead-lettered"
show "echo nope | sandpool-run --plugin $plugins/libfail.so --json"
echo nope | "$run" --plugin "$plugins/libfail.so" --json || true

say "6. Timeouts: a task that sleeps 60 s against a 300 ms timeout; its worker is killed"
show "echo 60000 | sandpool-run --plugin $plugins/libsleep.so --timeout 300ms --retries 1 --json"
echo 60000 | "$run" --plugin "$plugins/libsleep.so" --timeout 300ms --retries 1 --json || true

say "7. The sandbox: a plugin that calls socket() inside handle is stopped by seccomp"
forbidden="$build/tests/worker_host/plugins/libforbidden_syscall.so"
show "echo x | sandpool-run --plugin .../libforbidden_syscall.so --json"
echo x | "$run" --plugin "$forbidden" --json || true

say "8. Bad input: a plugin that cannot be loaded is refused with a clear error (exit 2)"
show "sandpool-run --plugin /nonexistent/libx.so --payload x"
"$run" --plugin /nonexistent/libx.so --payload x || echo "(exit $?)"

say "Done. Next: README.md (writing a plugin, embedding a Pool) and docs/."
