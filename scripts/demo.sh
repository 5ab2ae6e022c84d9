#!/usr/bin/env bash
# The 5-minute tour, run for real: poold (the service) on configs/poold.yaml with its state
# under ./var, driven by poolctl through its control socket.
set -euo pipefail
build=${1:-build}
poold="$build/bin/poold"
ctl="$build/bin/poolctl"
export SANDPOOL_SOCKET=./var/poold.sock
log=./var/poold.log

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; }
run() { show "poolctl $*"; "$ctl" "$@"; }

mkdir -p var
poold_pid=""
redis_pid=""
node_pids=()
cleanup() {
  for pid in "${node_pids[@]}" $redis_pid; do kill -TERM "$pid" 2>/dev/null || true; done
  if [ -n "$poold_pid" ] && kill -0 "$poold_pid" 2>/dev/null; then
    kill -TERM "$poold_pid" 2>/dev/null || true
    wait "$poold_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

# Starts poold in the background (its log appended to $log) and waits until it answers.
start_poold() {
  show "poold --config configs/poold.yaml &"
  "$poold" --config configs/poold.yaml >>"$log" 2>&1 &
  poold_pid=$!
  for _ in $(seq 1 200); do
    "$ctl" status >/dev/null 2>&1 && return 0
    kill -0 "$poold_pid" 2>/dev/null || { echo "poold exited; its log:"; cat "$log"; exit 1; }
    sleep 0.05
  done
}

say "1. Start poold on configs/poold.yaml (log: $log)"
show "poold --check --config configs/poold.yaml"
"$poold" --check --config configs/poold.yaml
: >"$log"
start_poold
run status

say "2. Submit one task and wait for its result"
run submit upper 'hello sandpool' --wait

say "3. A batch of 10,000 no-op tasks through the socket"
run batch echo 10000

say "4. Kill a worker: the pool replaces it at once"
run workers echo
pid=$("$ctl" workers echo --json | grep -o '"pid": *[0-9]*' | head -1 | grep -o '[0-9]*$')
run kill-worker echo "$pid" --signal KILL
for _ in $(seq 1 100); do
  n=$("$ctl" workers echo --json | grep -o '"pid": *[0-9]*' | grep -vc ": *$pid\$" || true)
  [ "$n" -ge 2 ] && break
  sleep 0.05
done
run workers echo

say "5. Retries: 'flaky' asks for a retry on attempt 1 and succeeds on attempt 2"
id=$("$ctl" submit flaky 'try me' --wait --json | grep -o '"id": *[0-9]*' | head -1 | grep -o '[0-9]*$')
run task "$id"

say "6. Dead letters: 'fail' fails permanently; the task lands in the dead-letter store"
run submit fail 'nope' --wait || true
run dlq list
letter=$("$ctl" dlq list --json | grep -o '"letter_id": *[0-9]*' | tail -1 | grep -o '[0-9]*$')
run dlq show "$letter"
run dlq replay "$letter" || true

say "7. A crash: 'crash' segfaults its worker on every attempt; retried, then dead-lettered"
run submit crash 'boom' --wait || true

say "8. Autoscaling: 40 tasks of 200 ms wait on the sleep pool (1 worker); it grows to 4"
show "for i in \$(seq 40); do poolctl submit sleep 200; done >/dev/null"
for _ in $(seq 40); do "$ctl" submit sleep 200 >/dev/null; done
for _ in $(seq 1 200); do
  "$ctl" workers sleep --json | grep -q '"target_workers": *4' && break
  sleep 0.05
done
run workers sleep
show "grep 'workers target' $log    # every step is a log line (and a 'scaled' event) with its reason"
grep -h "workers target" "$log" | tail -3
for _ in $(seq 1 200); do  # until the 40 are done: no worker has one in flight
  "$ctl" workers sleep --json | grep -q '"in_flight": *1' || break
  sleep 0.05
done

say "9. The journal: kill -9 poold while a waited task runs; the restart runs it again"
show "poolctl submit sleep 1500 --wait --json &    # a client waiting on its own connection"
"$ctl" submit sleep 1500 --wait --json >var/waited.json 2>&1 &
waiter=$!
for _ in $(seq 1 200); do
  "$ctl" workers sleep --json | grep -q '"in_flight": *1' && break
  sleep 0.05
done
show "kill -9 $poold_pid    # accepted tasks are in ./var/dead_letters.db"
kill -9 "$poold_pid"
wait "$poold_pid" 2>/dev/null || true
start_poold
grep -h "recovered" "$log" | tail -1
show "wait    # the waiting poolctl reconnected and waited on the task's id"
wait "$waiter" && echo "the waiting client got its result:"
id=$(grep -o '"id": *[0-9]*' var/waited.json | head -1 | grep -o '[0-9]*$')
run task "$id"

say "10. Real plugins: a Lua script, a regex replace, a script stopped at its instruction limit, a thumbnail, a Python function"
# The payload is the script (or the regex command and pattern), NUL bytes between the fields,
# read from stdin (-); configs/poold.yaml sets the limits (docs/plugin-guide.md, "lua", "regex",
# "thumbnail").
show "printf 'return input:reverse()\\0hello sandpool' | poolctl submit lua - --wait"
printf 'return input:reverse()\0hello sandpool' | "$ctl" submit lua - --wait
show "printf 'replace-all\\0(\\\\w+)@(\\\\w+)\\0\$2 at \$1\\0mail bob@example or ann@host' | poolctl submit regex - --wait"
printf 'replace-all\0(\\w+)@(\\w+)\0$2 at $1\0mail bob@example or ann@host' | "$ctl" submit regex - --wait
show "printf 'while true do end' | poolctl submit lua - --wait    # max_instructions: 100000000"
printf 'while true do end' | "$ctl" submit lua - --wait 2>&1 | tee var/limit.txt || true
id=$(grep -o 'task [0-9]*' var/limit.txt | head -1 | grep -o '[0-9]*$')
run task "$id"    # outcome resource_limit: the plugin stopped the script, its worker lives on
# A thumbnail: options text, a NUL, then the image (docs/plugin-guide.md, "thumbnail"); here a
# 640x480 PNG that python3 draws, made 128 pixels wide.
python3 -c 'import struct, sys, zlib
rows = b"".join(b"\0" + bytes(v for x in range(640) for v in (x * 255 // 639, y * 255 // 479, 96))
                for y in range(480))
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
sys.stdout.buffer.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 640, 480, 8, 2, 0, 0, 0))
                        + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))' >var/gradient.png
show "{ printf 'width=128\\0'; cat var/gradient.png; } | poolctl submit thumbnail - --wait >var/thumb.png"
{ printf 'width=128\0'; cat var/gradient.png; } | "$ctl" submit thumbnail - --wait >var/thumb.png
python3 -c 'import struct, sys; d = open(sys.argv[1], "rb").read(16 + 8)
print("%s: a PNG of %dx%d pixels" % (sys.argv[1], *struct.unpack(">II", d[16:24])))' var/thumb.png

# A Python task function (docs/plugin-guide.md, "python"): configs/poold.yaml's python pool
# runs orders:handle, a Celery-style task body in its plugin_config: a JSON order in, its
# total out; a bad order raises, and the exception, with its line, is the task's error.
show "echo '{\"id\": \"A17\", \"items\": [{\"price\": 2.5, \"qty\": 2}, {\"price\": 0.1, \"qty\": 3}]}' | poolctl submit python - --wait"
echo '{"id": "A17", "items": [{"price": 2.5, "qty": 2}, {"price": 0.1, "qty": 3}]}' |
  "$ctl" submit python - --wait
show "echo '{\"id\": \"B2\"}' | poolctl submit python - --wait    # raises ValueError"
echo '{"id": "B2"}' | "$ctl" submit python - --wait 2>&1 || true

say "11. The Python client (clients/python, standard library only): futures over one connection"
py_demo='import sandpool
with sandpool.Client() as client:         # finds ./var/poold.sock as poolctl does
    futures = [client.submit_async("upper", w) for w in ("from", "python", "too")]
    print([f.result().check().decode() for f in futures])
    task = client.submit("fail", b"bad input")   # waits; dead-lettered is not an exception
    print(task.id, task.state, task.reason, repr(task.error))'
show "PYTHONPATH=clients/python /usr/bin/python3 -c \"\$py_demo\"    # py_demo:"
printf '%s\n' "$py_demo" | sed 's/^/    /'
PYTHONPATH=clients/python /usr/bin/python3 -c "$py_demo"

say "12. Scheduling: a task for later is 'scheduled' until then; tenants share a pool fairly; periodic schedules"
id=$("$ctl" submit upper 'later' --delay 2s --tenant acme --json | grep -o '"id": *[0-9]*' | grep -o '[0-9]*$')
run task "$id"
run tasks --state scheduled    # with its tenant and due time (not_before_ms)
run wait "$id"
run strategy upper by_key      # consistent hashing of a task's key over the workers
# Periodic schedules: configs/poold.yaml's uppercase-report fires every 5 minutes, one task
# per slot; run-now submits its task outside the slots.
run schedule list
id=$("$ctl" schedule run-now uppercase-report --json | grep -o '"id": *[0-9]*' | grep -o '[0-9]*$')
run wait "$id"

say "13. The dashboard: poold's HTTP listener serves it beside /metrics and the JSON API"
http=$("$ctl" status --json | sed -n 's/.*"http": *"\([^"]*\)".*/\1/p')
show "poolctl status --json | jq -r .http    # the listener's address (port 0: a free one)"
echo "$http"
show "curl -s http://$http/api/v1/pools/echo/stats    # the API without a token: states, counts"
python3 -c 'import json, sys, urllib.request
p = json.load(urllib.request.urlopen("http://" + sys.argv[1] + "/api/v1/pools/echo/stats"))["pools"][0]
print({k: p[k] for k in ("name", "state", "workers", "completed", "queued")})' "$http"
printf '\n    Open \033[1mhttp://%s/\033[0m in a browser (read-only: configs/poold.yaml sets no admin token).\n' "$http"
if [ -t 0 ] && [ -t 1 ]; then
  # Keep the pools moving while the page is open: a batch every second until Enter.
  ( while :; do "$ctl" batch echo 2000 >/dev/null 2>&1 || exit 0; "$ctl" submit flaky again >/dev/null 2>&1 || true; sleep 1; done ) &
  load=$!
  read -r -p "    poold keeps running (a batch of 2,000 tasks a second) until you press Enter... " _
  kill "$load" 2>/dev/null || true
  wait "$load" 2>/dev/null || true
fi

say "14. Redis pools: two poold nodes share one pool through Redis; kill -9 one mid-batch, lose nothing; the cluster's dead letters replayed and purged from any node; rate limits for the cluster"
# docs/redis-pools.md. A redis-server of the demo's own, on a unix socket under ./var/cluster,
# append-only with an fsync per write (what docs/operations.md recommends).
mkdir -p var/cluster
rm -f var/cluster/redis.sock var/cluster/appendonly.aof* 2>/dev/null || true
rm -rf var/cluster/appendonlydir var/cluster/a var/cluster/b
show "redis-server --unixsocket var/cluster/redis.sock --appendonly yes --appendfsync always &"
redis-server --port 0 --unixsocket "$PWD/var/cluster/redis.sock" --unixsocketperm 700 \
  --dir "$PWD/var/cluster" --save '' --appendonly yes --appendfsync always \
  --logfile "$PWD/var/cluster/redis.log" >/dev/null 2>&1 &
redis_pid=$!
for _ in $(seq 1 100); do [ -S var/cluster/redis.sock ] && break; sleep 0.05; done
for n in a b; do
  cat >"var/cluster/$n.yaml" <<YAML
service:
  socket: {path: ./var/cluster/$n.sock}
  state_dir: ./var/cluster/$n
  http: {listen: 127.0.0.1:0}
  node: node-$n
  redis: {address: "unix:$PWD/var/cluster/redis.sock", heartbeat: 200ms}
pools:
  - name: shared
    backend: redis
    plugin: build/plugins/libecho.so
    task_types: [echo]
    workers: {initial: 2}
  - name: paced                    # rate_limits of a redis pool are the cluster's
    backend: redis
    plugin: build/plugins/libupper.so
    task_types: [upper]
    workers: {initial: 2}
    rate_limits: {pool: {tasks: 20, per: 1s, burst: 5}}
  - name: shared-fail
    backend: redis
    plugin: build/plugins/libfail.so
    workers: {initial: 1}
YAML
done
show "cat var/cluster/a.yaml    # node b's differs only in its name, socket and state dir"
cat var/cluster/a.yaml
for n in a b; do
  show "poold --config var/cluster/$n.yaml &"
  "$poold" --config "var/cluster/$n.yaml" >>"var/cluster/$n.log" 2>&1 &
  node_pids+=($!)
  for _ in $(seq 1 200); do
    "$ctl" --socket "var/cluster/$n.sock" status >/dev/null 2>&1 && break
    sleep 0.05
  done
done
show "poolctl --socket var/cluster/a.sock batch echo 20000 &    # submitted through node a"
"$ctl" --socket var/cluster/a.sock batch echo 20000 &
batch=$!
sleep 0.4
show "kill -9 ${node_pids[1]}    # node b dies holding entries; node a claims them after 3 beats"
kill -9 "${node_pids[1]}"
wait "${node_pids[1]}" 2>/dev/null || true
wait "$batch"
for _ in $(seq 1 200); do
  "$ctl" --socket var/cluster/a.sock status --json | tr -d ' \n' |
    grep -q '"finished":20000,' && break
  sleep 0.1
done
show "poolctl --socket var/cluster/a.sock status    # the redis part: the cluster seen from node a"
"$ctl" --socket var/cluster/a.sock status --json | python3 -c 'import json, sys
r = json.load(sys.stdin)["redis"]; p = [p for p in r["pools"] if p["name"] == "shared"][0]
print("node %s, redis up: %s" % (r["node"], r["up"]))
print("pool %s: %d finished, %d waiting, %d pending; node a claimed %d from the dead node" %
      (p["name"], p["finished"], p["stream_length"], p["pending"], p["claimed"]))
for c in p["consumers"]:
    print("  consumer %-7s alive: %-5s pending: %d" % (c["name"], c["alive"], c["pending"]))'
# The cluster's dead letters: made on node a, replayed and purged from node b (started again).
show "poolctl --socket var/cluster/a.sock submit fail 'nope' --wait    # dead-lettered in Redis"
"$ctl" --socket var/cluster/a.sock submit fail 'nope' --wait || true
show "poold --config var/cluster/b.yaml &    # node b again, under its name"
"$poold" --config var/cluster/b.yaml >>var/cluster/b.log 2>&1 &
node_pids[1]=$!
for _ in $(seq 1 200); do
  "$ctl" --socket var/cluster/b.sock status >/dev/null 2>&1 && break
  sleep 0.05
done
run --socket var/cluster/b.sock dlq list --pool shared-fail
letter=$("$ctl" --socket var/cluster/b.sock dlq list --pool shared-fail --json |
  grep -o '"letter_id": *[0-9]*' | head -1 | grep -o '[0-9]*$')
run --socket var/cluster/b.sock dlq replay "$letter" || true
show "poolctl --socket var/cluster/b.sock wait $letter    # it ran again, on a or b, and failed again"
"$ctl" --socket var/cluster/b.sock wait "$letter" || true
run --socket var/cluster/b.sock dlq purge --pool shared-fail
# Rate limits hold across the nodes: pool 'paced' starts 20 tasks a second (after a burst of
# 5) on both nodes together, not on each (docs/redis-pools.md, "Rate limits").
paced() { # what node $1 shows of pool paced: FIELD...
  "$ctl" --socket "var/cluster/$1.sock" status --json | python3 -c 'import json, sys
p = [p for p in json.load(sys.stdin)["redis"]["pools"] if p["name"] == "paced"][0]
print(" ".join(str(p[f]) for f in sys.argv[1:]))' "${@:2}"
}
show "poolctl --socket var/cluster/a.sock batch upper 60    # pool paced: {tasks: 20, per: 1s, burst: 5}"
began=$(date +%s%N)
"$ctl" --socket var/cluster/a.sock batch upper 60 >/dev/null
for _ in $(seq 1 300); do
  [ "$(paced a finished)" -ge 60 ] && break
  sleep 0.05
done
echo "60 tasks ran in $(( ($(date +%s%N) - began) / 1000000 )) ms on two nodes: (60 - 5) / 20 s = 2.75 s at" \
  "least, for the cluster (per node, it would be half that)"
echo "node a read $(paced a read) and waited for the rate $(paced a throttle_waits) times;" \
  "node b read $(paced b read) and waited $(paced b throttle_waits) times"
"$ctl" --socket var/cluster/b.sock shutdown >/dev/null
wait "${node_pids[1]}" 2>/dev/null || true
"$ctl" --socket var/cluster/a.sock shutdown >/dev/null
wait "${node_pids[0]}" 2>/dev/null || true
kill -TERM "$redis_pid" 2>/dev/null || true
wait "$redis_pid" 2>/dev/null || true

say "15. Stats, then a clean shutdown"
run stats
run shutdown
wait "$poold_pid" && echo "poold exited 0"
poold_pid=""

say "Done. poold's log: $log. Next: README.md (configuration, poolctl, writing a plugin) and docs/."
