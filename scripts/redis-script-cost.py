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
                              [--keep DIR] [--floor] [--commands] [--batch-layout] [--usec]
                              DIR [DIR...]

--batch-layout adds, for each DIR that has them, the batch-entry layout's scripts
(batch_*.lua, docs/redis-batch-layout.md; scripts/redis_batch_cost.py): the same tasks
submitted 512 an entry, read 4 batches a read, their ends BATCH records a call. --usec runs
redis-server plainly instead of under callgrind: no instructions (printed as 0), but each
phase's INFO commandstats µs per task (EVALSHA's and XREADGROUP's usec) printed instead of
instructions, e.g. with --tasks 100000 --no-retention.

--floor adds three layouts run with plain pipelined commands, no Lua and no fence, the same
tasks and phases: `bare-task` (what the scripts write per task: an XADD and a hash at submit,
the hash marked at the take, XACK and the hash's end, one XTRIM and one ZADD per batch), and one
stream entry and one hash per submitted batch of 512, taken whole, whose ends go into that
hash's fields (`bare-hash`) or are appended to one string per batch (`bare-append`): the
layouts a redesign would choose between. Their totals are floors: what Redis's own commands
cost per task in each layout, before any script, fence or bookkeeping. --commands prints
what single commands cost (pipelined, instructions each): the units the scripts are made of.

e.g. the scripts of main against the worktree's:
  mkdir /tmp/main-lua && git archive main redis/src/redis/lua | tar -x -C /tmp/main-lua
  scripts/redis-script-cost.py /tmp/main-lua/redis/src/redis/lua redis/src/redis/lua
Needs redis-server, valgrind (callgrind_control) on PATH.
"""
import argparse
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import redis_batch_cost  # scripts/redis_batch_cost.py

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

    @staticmethod
    def encode(args):
        out = [b'*%d\r\n' % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b'$%d\r\n%s\r\n' % (len(a), a))
        return b''.join(out)

    def send(self, args):
        self.s.sendall(self.encode(args))

    def pipeline(self, commands):
        """Sends `commands` in one write (the server reads them at once), then reads the
        replies."""
        self.s.sendall(b''.join(self.encode(c) for c in commands))
        return [self.read() for _ in commands]

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
    """{command: (calls, usec)} from INFO commandstats."""
    out = {}
    for line in r.cmd('INFO', 'commandstats').splitlines():
        if line.startswith('cmdstat_'):
            name, rest = line[8:].split(':', 1)
            f = dict(kv.split('=') for kv in rest.split(','))
            out[name] = (int(f['calls']), int(f['usec']))
    return out


class NoMeter:
    """A meter for a server not under callgrind (--usec): no instructions."""
    name = ''

    def zero(self):
        pass

    def dump(self):
        return 0.0


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


def measure_phase(r, meter, name, tasks, work):
    """(instructions per task, {command: calls per task}, commandstats µs per task) of the
    server while work() runs; `name` names the dump (--keep). The µs are INFO commandstats'
    `usec` (the time Redis spent in the commands, scripts included: the script's own commands
    count both in it and in EVALSHA's, so only `evalsha` and the commands sent plainly are
    summed), meaningful only on a server not under callgrind (--usec)."""
    before = command_stats(r)
    meter.name = name
    meter.zero()
    work()
    ir = meter.dump()
    after = command_stats(r)
    skip = ('info', 'script')
    calls = {k: (v[0] - before.get(k, (0, 0))[0]) / tasks for k, v in after.items()
             if v[0] - before.get(k, (0, 0))[0] > 0 and k not in skip}
    # Commands a script called are counted in its EVALSHA's usec too; what was sent plainly
    # (XREADGROUP, the floors' commands) is not. Scripts call no XREADGROUP, and the phases
    # with scripts send nothing else plainly; the floors' phases run no script.
    plain = ('evalsha', 'xreadgroup') if 'evalsha' in calls else tuple(calls)
    usec = sum(v[1] - before.get(k, (0, 0))[1] for k, v in after.items() if k in plain)
    return ir / tasks, calls, usec / tasks


def phases(r, meter, lua_dir, tasks, batch, retention):
    """{phase: (instructions per task, {command: calls per task})}."""
    # Since session 22 a node reads with plain XREADGROUPs, then takes with take.lua (no
    # read.lua): the read phase does what the tree's scripts do.
    direct = not os.path.exists(os.path.join(lua_dir, 'read.lua'))
    # Since session 25 take.lua takes its entries as runs sharing band and type.
    take_runs = direct and 'run_head' in open(os.path.join(lua_dir, 'take.lua')).read()
    shas = {k: r.cmd('SCRIPT', 'LOAD', script(lua_dir, k))
            for k in ('submit_batch', 'take' if direct else 'read', 'finish_batch')}
    prefix = 'cost:'
    streams = [prefix + 'echo:q:1', prefix + 'echo:q:0', prefix + 'echo:q:-1']
    for s in streams:
        r.cmd('XGROUP', 'CREATE', s, GROUP, '0', 'MKSTREAM')
    r.cmd('SET', prefix + 'ids', '4503599627370495', 'NX')
    out = {}

    tree = os.path.basename(os.path.dirname(os.path.normpath(lua_dir))) or 'lua'

    def measure(name, work):
        out[name] = measure_phase(r, meter, '%s.%s' % (tree, name), tasks, work)

    # Since session 25 submit_batch.lua takes runs of tasks sharing all but the payload.
    with open(os.path.join(lua_dir, 'submit_batch.lua')) as f:
        submit_runs = "ARGV[i] == 'c'" in f.read()

    def submit():
        for at in range(0, tasks, 512):
            k = min(512, tasks - at)
            keys = [prefix + 'ids', prefix + 'echo:later'] + streams
            argv = [prefix, 'echo', 1]
            if submit_runs:
                argv += ['c', k, 'echo', 0, 0, 4, 4, 'type', 'echo', 'payload', '']
                argv += ['p' * 16] * k
            else:
                keys += [''] * k
            for _ in range(0 if submit_runs else k):
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
            for n, (band, entry_id, fields) in enumerate(got):
                f = dict(zip(fields[::2], fields[1::2]))
                if not take_runs:
                    argv += [f['id'], entry_id, band, f['type']]
                else:
                    if n == 0 or got[n - 1][0] != band:  # a run of one band (one type here)
                        argv += [sum(1 for g in got[n:] if g[0] == band), band, f['type']]
                    argv += [f['id'], entry_id]
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
        # (`first_end, end_head = 11, 10`: the test of 'end_head = 10' alone never matched it,
        # and sent ends in the older layout, misread as ends of no attempt.)
        before = re.search(r'end_head = (11, )?10\b', text) is not None
        # Since session 25 the ends go as runs: a compact run's ends share band, state and
        # attempt number, sent once.
        runs = 'compact_run' in text

    def finish(keep_finished):
        keys = [prefix + 'echo:done', prefix + 'echo:dlq'] + streams
        for at in range(0, tasks, batch):
            argv = ['profiler', prefix, keep_finished, 10000]
            if ranges:
                for b in (1, 0, -1):
                    ids = [e for _, e, band, _ in held[at:at + batch] if band == b]
                    argv += [min(ids, key=entry_number), max(ids, key=entry_number)] if ids \
                        else ['', '']
            part = held[at:at + batch]
            while runs and part:
                k = next((j for j, h in enumerate(part) if h[2] != part[0][2]), len(part))
                argv += ['c', k, part[0][2], 'completed', 1]
                for task_id, entry_id, _, payload in part[:k]:
                    argv += [task_id, entry_id, payload, 2, COMPACT_ATTEMPT]
                part = part[k:]
            for task_id, entry_id, band, payload in part:
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


def print_phases(got, usec_mode=False):
    """Each phase's instructions (or, usec_mode, µs) per task, and its commands' calls per
    task: µs under callgrind, instructions without it, mean nothing and are not printed."""
    for name, (ir, calls, usec) in got.items():
        figure = '%6.2f us' % usec if usec_mode else '%6.1f k' % (ir / 1e3)
        print('  %-6s %s  %s' % (name, figure, ' '.join(
            '%s=%.3f' % kv for kv in sorted(calls.items(), key=lambda kv: -kv[1]))))
    sys.stdout.flush()


def layout_phases(r, meter, lua_dir, tasks, batch):
    """The batch-entry layout's phases (redis_batch_cost.py) over `lua_dir`'s scripts."""
    out = {}
    tree = os.path.basename(os.path.dirname(os.path.normpath(lua_dir))) or 'lua'

    def measure(name, work):
        out[name] = measure_phase(r, meter, '%s.batch-%s' % (tree, name), tasks, work)

    redis_batch_cost.batch_phases(r, measure, script, lua_dir, tasks, batch,
                                  COMPACT_ATTEMPT.encode())
    return out


def entry_order(e):
    ms, seq = e.split('-')
    return int(ms), int(seq)


def bare_phases(r, meter, tasks, batch, per_batch):
    """The floor of a layout: `phases`' tasks through plain pipelined commands, no Lua.

    per_batch '': per task an XADD and a hash (submit), the hash marked running (read), XACK
    and the hash's end, one XTRIM MINID and one ZADD a batch (finish). 'hash' or 'append': one entry and one
    hash per submitted chunk of 512 (its payloads one field of the entry), taken whole, each
    task's end two fields of the chunk's hash ('hash': past 128 fields a hash leaves listpack
    encoding, and each field costs ~10k instructions) or a record appended to one string per
    chunk ('append'); the entry acknowledged once its chunk's last task ends."""
    prefix = 'bare:'
    stream = prefix + 'q'
    r.cmd('XGROUP', 'CREATE', stream, GROUP, '0', 'MKSTREAM')
    out = {}
    now = 1765000000000

    pipeline = r.pipeline

    def measure(name, work):
        out[name] = measure_phase(r, meter, 'bare-%s.%s' % (per_batch or 'task', name), tasks,
                                  work)

    def submit():
        for at in range(0, tasks, 512):
            k = min(512, tasks - at)
            first = r.cmd('INCRBY', prefix + 'ids', k) - k + 1
            if per_batch:
                # The chunk's payloads in one field (length-prefixed): a field per task would
                # grow the entry's listpack one insert at a time.
                blob = ''.join('%d:%s' % (16, 'p' * 16) for _ in range(k))
                entry = r.cmd('XADD', stream, '*', 'first', first, 'count', k, 'type', 'echo',
                              'payloads', blob)
                r.cmd('HSET', prefix + 'batch:%d' % first, 'state', 'queued', 'entry', entry,
                      'count', k, 'submitted_ms', now)
            else:
                cmds = []
                for i in range(k):
                    tid = first + i
                    cmds.append(['XADD', stream, '*', 'id', tid, 'type', 'echo',
                                 'payload', 'p' * 16])
                    cmds.append(['HSET', prefix + 'task:%d' % tid, 'state', 'queued', 'pool',
                                 'echo', 'type', 'echo', 'submitted_ms', now, 'entry', '0-0'])
                pipeline(cmds)

    held = []

    def read():
        if per_batch:
            while True:
                got = r.cmd('XREADGROUP', 'GROUP', GROUP, 'profiler', 'COUNT', 1,
                            'STREAMS', stream, '>')
                if not got:
                    break
                for entry_id, fields in got[0][1]:
                    f = dict(zip(fields[::2], fields[1::2]))
                    first, k = int(f['first']), int(f['count'])
                    # Taken whole: the chunk's tasks share its state until each ends.
                    r.cmd('HSET', prefix + 'batch:%d' % first, 'state', 'running',
                          'node', 'profiler', 'attempts', 1)
                    held.append((first, k, entry_id))
            return
        while len(held) < tasks:
            got = r.cmd('XREADGROUP', 'GROUP', GROUP, 'profiler', 'COUNT', batch,
                        'STREAMS', stream, '>')
            if not got:
                raise RuntimeError('read: nothing')
            cmds = []
            for entry_id, fields in got[0][1]:
                f = dict(zip(fields[::2], fields[1::2]))
                cmds.append(['HSET', prefix + 'task:' + f['id'], 'state', 'running',
                             'attempts', 1, 'node', 'profiler'])
                held.append((f['id'], entry_id))
            pipeline(cmds)

    def finish():
        if per_batch:
            # Ends come back in batches of `batch`, as the node writes them: each writes its
            # tasks' fields; the chunk's entry is acknowledged with the chunk's last end.
            for first, k, entry_id in held:
                for at in range(0, k, batch):
                    n = min(batch, k - at)
                    if per_batch == 'append':
                        # The ends as records appended to one string a chunk.
                        cmds = [['APPEND', prefix + 'ends:%d' % first, ''.join(
                            '%d completed %d:%s %s\n' % (first + i, 16, 'p' * 16,
                                                        COMPACT_ATTEMPT)
                            for i in range(at, at + n))]]
                    else:
                        h = ['HSET', prefix + 'batch:%d' % first]
                        for i in range(at, at + n):
                            h += ['s:%d' % (first + i), 'c 1 ' + COMPACT_ATTEMPT,
                                  'r:%d' % (first + i), 'p' * 16]
                        cmds = [h]
                    if at + n == k:
                        cmds.append(['XACK', stream, GROUP, entry_id])
                        cmds.append(['XTRIM', stream, 'MINID', entry_id])
                        cmds.append(['ZADD', prefix + 'done', now, first])
                    pipeline(cmds)
            return
        for at in range(0, len(held), batch):
            part = held[at:at + batch]
            entries = [e for _, e in part]
            # XTRIM MINID, as finish_batch.lua does: an XDEL costs ~40k instructions an entry.
            cmds = [['XACK', stream, GROUP] + entries,
                    ['XTRIM', stream, 'MINID', max(entries, key=entry_order)]]
            z = ['ZADD', prefix + 'done']
            for tid, _ in part:
                cmds.append(['HSET', prefix + 'task:' + tid, 'state', 'completed',
                             'result', 'p' * 16, 'finished_ms', now, 'attempt:1', COMPACT_ATTEMPT])
                z += [now, tid]
            cmds.append(z)
            pipeline(cmds)

    measure('submit', submit)
    measure('read', read)
    measure('finish', finish)
    return out


def command_costs(r, meter, n=4000, batch=48):
    """What single commands cost the server, in instructions each (or each task of a batch
    command), pipelined: the unit costs the scripts are made of."""
    r.cmd('FLUSHALL')
    out = []

    def run(label, cmds, per):
        meter.name = 'command'
        meter.zero()
        r.pipeline(cmds)
        out.append((label, meter.dump() / per))

    run('PING', [['PING']] * n, n)
    run('SET, a new key', [['SET', 's:%d' % i, 'v'] for i in range(n)], n)
    run('HSET, a new hash of 5 fields', [['HSET', 't:%d' % i, 'state', 'queued', 'pool', 'echo',
                                          'type', 'echo', 'submitted_ms', 1765000000000,
                                          'entry', '0-0'] for i in range(n)], n)
    run('HSET, 1 field of that hash', [['HSET', 't:%d' % i, 'x', '1'] for i in range(n)], n)
    run('HSET, 4 fields of that hash (an end)',
        [['HSET', 't:%d' % i, 'state', 'completed', 'result', 'p' * 16, 'finished_ms',
          1765000000000, 'attempt:1', COMPACT_ATTEMPT] for i in range(n)], n)
    run('HSET, 48 fields of one hash of %d (hashtable)' % n,
        [['HSET', 'big'] + [x for j in range(batch) for x in ('f%d' % (i * batch + j), 'v' * 16)]
         for i in range(n // batch)], (n // batch) * batch)
    r.cmd('XGROUP', 'CREATE', 'q', GROUP, '0', 'MKSTREAM')
    ids = []
    meter.name = 'command'
    meter.zero()
    ids = r.pipeline([['XADD', 'q', '*', 'id', i, 'type', 'echo', 'payload', 'p' * 16]
                      for i in range(n)])
    out.append(('XADD, 3 fields', meter.dump() / n))
    run('XREADGROUP, an entry of %d read at once' % n,
        [['XREADGROUP', 'GROUP', GROUP, 'c', 'COUNT', n, 'STREAMS', 'q', '>']], n)
    chunks = [ids[i:i + batch] for i in range(0, n, batch)]
    run('XPENDING over a batch\'s range, a task', [['XPENDING', 'q', GROUP, c[0], c[-1], batch]
                                                  for c in chunks], n)
    run('XACK of %d ids, an id' % batch, [['XACK', 'q', GROUP] + c for c in chunks], n)
    half = len(chunks) // 2
    run('XDEL of %d ids, an id' % batch, [['XDEL', 'q'] + c for c in chunks[:half]],
        sum(len(c) for c in chunks[:half]))
    run('XTRIM MINID a batch, an id', [['XTRIM', 'q', 'MINID', c[-1]] for c in chunks[half:]],
        sum(len(c) for c in chunks[half:]))
    run('ZADD of %d members, a member' % batch,
        [['ZADD', 'done'] + [x for i in range(k, k + batch)
                             for x in (1765000000000 + i, str(4503599627370495 + i))]
         for k in range(0, n, batch)], n)
    run('SMISMEMBER of %d, a member' % batch,
        [['SMISMEMBER', 'aw'] + [str(i) for i in range(k, k + batch)]
         for k in range(0, n, batch)], n)
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
    ap.add_argument('--commands', action='store_true',
                    help='also single commands\' costs (HSET, XADD, XACK, XDEL, ...)')
    ap.add_argument('--batch-layout', action='store_true',
                    help='also the batch-entry layout\'s scripts (batch_*.lua of each DIR '
                    'that has them; docs/redis-batch-layout.md)')
    ap.add_argument('--usec', action='store_true',
                    help='run redis-server plainly, not under callgrind: no instructions, '
                    'but INFO commandstats\' µs per task per phase (e.g. --tasks 100000)')
    ap.add_argument('--floor', action='store_true',
                    help='also the floors of three layouts with plain commands (bare-task, '
                    'bare-hash, bare-append)')
    o = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix='redis-script-cost.')
    sock = os.path.join(tmp, 'redis.sock')
    under = [] if o.usec else ['valgrind', '--tool=callgrind',
                               '--callgrind-out-file=' + os.path.join(tmp, 'cg.%p')]
    server = subprocess.Popen(
        under + ['redis-server', '--port', '0', '--unixsocket', sock, '--save', '', '--appendonly', 'no',
         '--dir', tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if os.path.exists(sock):
                break
            time.sleep(0.1)
        r = Resp(sock)
        meter = NoMeter() if o.usec else Callgrind(server.pid, tmp, o.keep)
        for rnd in range(o.rounds):
            for d in o.dirs:
                r.cmd('FLUSHALL')
                got = phases(r, meter, d, o.tasks, o.batch, not o.no_retention)
                total = sum(ir for name, (ir, _, _) in got.items() if name != 'evict')
                steady = ''
                if 'evict' in got:
                    steady = ', with retention\'s evictions %.1f k' % (
                        (total - got['finish'][0] + got['evict'][0]) / 1e3)
                usec = sum(u for name, (_, _, u) in got.items() if name != 'evict')
                figure = '%.3f us/task' % usec if o.usec else '%.1f k instructions/task%s' % (
                    total / 1e3, steady)
                print('round %d %s: total %s' % (rnd + 1, d, figure))
                print_phases(got, o.usec)
            for d in o.dirs if o.batch_layout else ():
                if not os.path.exists(os.path.join(d, 'batch_end.lua')):
                    continue
                r.cmd('FLUSHALL')
                got = layout_phases(r, meter, d, o.tasks, o.batch)
                figure = '%.3f us/task' % sum(v[2] for v in got.values()) if o.usec else \
                    '%.2f k instructions/task' % (sum(v[0] for v in got.values()) / 1e3)
                print('round %d %s batch layout: total %s' % (rnd + 1, d, figure))
                print_phases(got, o.usec)
            if o.floor:
                for per_batch in ('', 'hash', 'append'):
                    r.cmd('FLUSHALL')
                    got = bare_phases(r, meter, o.tasks, o.batch, per_batch)
                    total = sum(ir for ir, _, _ in got.values())
                    figure = '%.3f us/task' % sum(u for _, _, u in got.values()) if o.usec \
                        else '%.1f k instructions/task' % (total / 1e3)
                    print('round %d floor bare-%s: total %s' % (rnd + 1, per_batch or 'task',
                                                               figure))
                    print_phases(got, o.usec)
        if o.commands:
            for label, ir in command_costs(r, meter):
                print('command %-46s %6.1f k' % (label, ir / 1e3))
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
