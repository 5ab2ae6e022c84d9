#!/usr/bin/env python3
"""Redis's cost per task of a Redis pool's scripts, phase by phase, independent of the load.

Runs a redis-server of its own under valgrind's callgrind (a unix socket in a temp dir) and,
for each directory of Lua scripts given (redis/src/redis/lua/ of a tree: lib.lua is prepended
to each script, as task_stream_scripts.cpp does), submits TASKS echo tasks with submit_batch
(512 a call), reads them BATCH a call (with read.lua where the tree has it; else, as a node
reads since session 22, plain XREADGROUPs and take.lua) and ends them with finish_batch (BATCH
a call, one `ok` attempt each): the shape of sandpool-bench's cluster profile
(bench/redis_profile.cpp). Prints, per phase, the server's instructions per task (callgrind's
Ir between a zero and a dump: the event loop, the parsing, the scripts and their commands),
and the commands the phase called per task. A fourth phase, `evict`, is retention's steady
state: TASKS more go through and their ends (measured) run with keep_finished TASKS, so each
evicts one finished task, as on the bench's nodes (--no-retention skips it). Instructions do not count cache misses, but they
do not move with other processes' load either, so two trees compare on a busy machine.

  scripts/redis-script-cost.py [--tasks 2000] [--batch 48] [--rounds 2] [--no-retention]
                              [--keep DIR] DIR [DIR...]

e.g. the scripts of main against the worktree's:
  mkdir /tmp/main-lua && git archive main redis/src/redis/lua | tar -x -C /tmp/main-lua
  scripts/redis-script-cost.py /tmp/main-lua/redis/src/redis/lua redis/src/redis/lua
Needs redis-server, valgrind (callgrind_control) on PATH.
"""
import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

GROUP = 'sandpool'
ATTEMPT = json.dumps({"number": 1, "outcome": "ok", "error": "", "worker_pid": 4242,
                      "started_ms": 1765000000000, "ended_ms": 1765000000001,
                      "backtrace": ""})
COMPACT_ATTEMPT = '1 ok 4242 1765000000000 1'


class Resp:
    """A minimal RESP2 client: commands out, replies in (strings decoded as latin-1)."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.buf = b''

    def send(self, args):
        out = [b'*%d\r\n' % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b'$%d\r\n%s\r\n' % (len(a), a))
        self.s.sendall(b''.join(out))

    def _line(self):
        while b'\r\n' not in self.buf:
            self.buf += self.s.recv(1 << 20)
        line, self.buf = self.buf.split(b'\r\n', 1)
        return line

    def _bytes(self, n):
        while len(self.buf) < n + 2:
            self.buf += self.s.recv(1 << 20)
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b'+':
            return rest.decode()
        if kind == b'-':
            raise RuntimeError(rest.decode())
        if kind == b':':
            return int(rest)
        if kind == b'$':
            n = int(rest)
            return None if n < 0 else self._bytes(n).decode('latin-1')
        n = int(rest)
        return None if n < 0 else [self.read() for _ in range(n)]

    def cmd(self, *args):
        self.send(args)
        return self.read()


def script(lua_dir, name):
    with open(os.path.join(lua_dir, 'lib.lua')) as lib, \
            open(os.path.join(lua_dir, name + '.lua')) as own:
        return "local GROUP = '%s'\n%s\n%s" % (GROUP, lib.read(), own.read())


def command_stats(r):
    out = {}
    for line in r.cmd('INFO', 'commandstats').splitlines():
        if line.startswith('cmdstat_'):
            name, rest = line[8:].split(':', 1)
            out[name] = int(dict(kv.split('=') for kv in rest.split(','))['calls'])
    return out


class Callgrind:
    """Instructions of the server between zero() and dump()."""

    def __init__(self, pid, out_dir, keep=None):
        self.pid, self.out_dir, self.keep, self.name = str(pid), out_dir, keep, 'dump'

    def zero(self):
        subprocess.run(['callgrind_control', '-z', self.pid], capture_output=True, check=True)

    def dump(self):
        pattern = os.path.join(self.out_dir, 'cg.%s.*' % self.pid)
        before = set(glob.glob(pattern))
        subprocess.run(['callgrind_control', '-d', self.pid], capture_output=True, check=True)
        for _ in range(200):
            new = set(glob.glob(pattern)) - before
            if new:
                break
            time.sleep(0.05)
        path = sorted(new)[-1]
        for _ in range(100):
            with open(path) as f:
                for line in f:
                    if line.startswith(('totals:', 'summary:')):
                        if self.keep:
                            shutil.copy(path, os.path.join(self.keep, 'callgrind.' + self.name))
                        return float(line.split()[1])
            time.sleep(0.05)
        raise RuntimeError('no totals in ' + path)


def phases(r, meter, lua_dir, tasks, batch, retention):
    """{phase: (instructions per task, {command: calls per task})}."""
    # Since session 22 a node reads with plain XREADGROUPs, then takes with take.lua (no
    # read.lua): the read phase does what the tree's scripts do.
    direct = not os.path.exists(os.path.join(lua_dir, 'read.lua'))
    shas = {k: r.cmd('SCRIPT', 'LOAD', script(lua_dir, k))
            for k in ('submit_batch', 'take' if direct else 'read', 'finish_batch')}
    prefix = 'cost:'
    streams = [prefix + 'echo:q:1', prefix + 'echo:q:0', prefix + 'echo:q:-1']
    for s in streams:
        r.cmd('XGROUP', 'CREATE', s, GROUP, '0', 'MKSTREAM')
    r.cmd('SET', prefix + 'ids', '4503599627370495', 'NX')
    out = {}

    def measure(name, work):
        before = command_stats(r)
        meter.name = '%s.%s' % (os.path.basename(os.path.dirname(os.path.normpath(lua_dir)))
                                or 'lua', name)
        meter.zero()
        work()
        ir = meter.dump()
        after = command_stats(r)
        calls = {k: (v - before.get(k, 0)) / tasks for k, v in after.items()
                 if v - before.get(k, 0) > 0 and k not in ('info', 'script')}
        out[name] = (ir / tasks, calls)

    def submit():
        for at in range(0, tasks, 512):
            k = min(512, tasks - at)
            keys = [prefix + 'ids', prefix + 'echo:later'] + streams + [''] * k
            argv = [prefix, 'echo', 1]
            for _ in range(k):
                argv += ['echo', 0, 0, 4, 'type', 'echo', 'payload', 'p' * 16]
            r.cmd('EVALSHA', shas['submit_batch'], len(keys), *keys, *argv)

    held = []

    def entry_number(e):
        ms, seq = e.split('-')
        return int(ms), int(seq)

    def read_direct():
        # As TaskConsumer::read: each band by a plain XREADGROUP (higher first, BATCH in all),
        # then take.lua with its fence ranges.
        while len(held) < tasks:
            got = []
            for index, stream in enumerate(streams):
                if len(got) >= batch:
                    break
                reply = r.cmd('XREADGROUP', 'GROUP', GROUP, 'profiler', 'COUNT',
                              batch - len(got), 'STREAMS', stream, '>')
                if reply:
                    got += [(1 - index, entry_id, fields) for entry_id, fields in reply[0][1]]
            if not got:
                raise RuntimeError('read: nothing')
            argv = [prefix, 'echo', 'profiler']
            for b in (1, 0, -1):
                ids = [e for band, e, _ in got if band == b]
                argv += [min(ids, key=entry_number), max(ids, key=entry_number)] if ids \
                    else ['', '']
            argv += ['0', '0', '0']  # nothing handed back: each read asked for what it takes
            for band, entry_id, fields in got:
                f = dict(zip(fields[::2], fields[1::2]))
                argv += [f['id'], entry_id, band, f['type']]
                held.append((f['id'], entry_id, band, f['payload']))
            taken = r.cmd('EVALSHA', shas['take'], 3, *streams, *argv)
            if any(t != 0 for t in taken):
                raise RuntimeError('take refused an entry')

    def read():
        if direct:
            return read_direct()
        while len(held) < tasks:
            got = r.cmd('EVALSHA', shas['read'], 3, *streams, prefix, 'echo', 'profiler', batch)
            if not got:
                raise RuntimeError('read: nothing')
            for index, entries, _ in got:
                for entry_id, fields in entries:
                    f = dict(zip(fields[::2], fields[1::2]))
                    held.append((f['id'], entry_id, 2 - index, f['payload']))

    # finish_batch.lua since session 22 takes per band the range of its ends' entry ids;
    # since session 24 per end the attempts before it (take.lua answered them: 0 here).
    with open(os.path.join(lua_dir, 'finish_batch.lua')) as f:
        text = f.read()
        ranges = 'first_range' in text
        before = 'end_head = 10' in text

    def finish(keep_finished):
        keys = [prefix + 'echo:done', prefix + 'echo:dlq'] + streams
        for at in range(0, tasks, batch):
            argv = ['profiler', prefix, keep_finished, 10000]
            if ranges:
                for b in (1, 0, -1):
                    ids = [e for _, e, band, _ in held[at:at + batch] if band == b]
                    argv += [min(ids, key=entry_number), max(ids, key=entry_number)] if ids \
                        else ['', '']
            for task_id, entry_id, band, payload in held[at:at + batch]:
                argv += [task_id, entry_id, band, 'completed', payload, '', '', 2]
                # Since session 24 a node stores an attempt with no error compact
                # (feeder::encode_stored), so that the task's hash stays a listpack.
                argv += [0, 1, COMPACT_ATTEMPT] if before else [1, ATTEMPT]
            answers = r.cmd('EVALSHA', shas['finish_batch'], len(keys), *keys, *argv)
            if any(a != 1 for a in answers):
                raise RuntimeError('finish_batch refused an end')
        del held[:]

    measure('submit', submit)
    measure('read', read)
    measure('finish', lambda: finish(100000))
    if retention:
        # Retention's steady state (keep_finished exceeded, as on the bench's nodes): a second
        # TASKS go through, unmeasured but for their ends, each of which evicts one of the
        # first TASKS (ZPOPMIN, its hash's idem_key and bytes, one DEL).
        submit()
        read()
        measure('evict', lambda: finish(tasks))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('dirs', nargs='+')
    ap.add_argument('--tasks', type=int, default=2000)
    ap.add_argument('--batch', type=int, default=48)
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--no-retention', action='store_true',
                    help='skip the `evict` phase: ends past keep_finished, each evicting one')
    ap.add_argument('--keep', metavar='DIR',
                    help='copy each phase\'s callgrind dump to DIR/callgrind.TREE.PHASE '
                    '(for callgrind_annotate)')
    o = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix='redis-script-cost.')
    sock = os.path.join(tmp, 'redis.sock')
    server = subprocess.Popen(
        ['valgrind', '--tool=callgrind', '--callgrind-out-file=' + os.path.join(tmp, 'cg.%p'),
         'redis-server', '--port', '0', '--unixsocket', sock, '--save', '', '--appendonly', 'no',
         '--dir', tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if os.path.exists(sock):
                break
            time.sleep(0.1)
        r = Resp(sock)
        meter = Callgrind(server.pid, tmp, o.keep)
        for rnd in range(o.rounds):
            for d in o.dirs:
                r.cmd('FLUSHALL')
                got = phases(r, meter, d, o.tasks, o.batch, not o.no_retention)
                total = sum(ir for name, (ir, _) in got.items() if name != 'evict')
                steady = ''
                if 'evict' in got:
                    steady = ', with retention\'s evictions %.1f k' % (
                        (total - got['finish'][0] + got['evict'][0]) / 1e3)
                print('round %d %s: total %.1f k instructions/task%s' % (rnd + 1, d, total / 1e3,
                                                                         steady))
                for name, (ir, calls) in got.items():
                    print('  %-6s %6.1f k  %s' % (name, ir / 1e3, ' '.join(
                        '%s=%.2f' % kv for kv in sorted(calls.items(), key=lambda kv: -kv[1]))))
                sys.stdout.flush()
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
