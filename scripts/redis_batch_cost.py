"""The batch-entry layout's phases for scripts/redis-script-cost.py (docs/redis-batch-layout.md):
the same tasks as the present scripts' phases, through batch_submit.lua (one entry per 512),
one XREADGROUP + batch_take.lua per read, and batch_end.lua (BATCH end records a call, as
the node ends them), each script with lib.lua before it as task_stream_scripts.cpp does."""
import struct

GROUP = 'sandpool'


def pack_tasks(k, payload):
    """batch::pack_tasks of `k` echo tasks, no options."""
    body = struct.pack('<BiqI', 0, 0, 0, 0) + struct.pack('<H', 4) + b'echo' + \
        struct.pack('<H', 0) + struct.pack('<B', 0) + struct.pack('<I', len(payload)) + payload
    return struct.pack('<BH', 1, k) + (struct.pack('<I', len(body)) + body) * k


def pack_end(index, result, attempt, now):
    """batch::pack_end of a `completed` end with one attempt."""
    body = struct.pack('<BHBqI', 1, index, 1, now, 1) + struct.pack('<B', 9) + b'completed' + \
        struct.pack('<B', 0) + struct.pack('<I', 0) + struct.pack('<I', len(result)) + result + \
        struct.pack('<H', 1) + struct.pack('<I', len(attempt)) + attempt
    return struct.pack('<I', len(body)) + body


def batch_phases(r, measure, script, lua_dir, tasks, batch, attempt):
    """Runs the three phases through `measure(name, work)`; `script(lua_dir, name)` is a
    script's text with lib.lua before it."""
    shas = {k: r.cmd('SCRIPT', 'LOAD', script(lua_dir, k))
            for k in ('batch_submit', 'batch_take', 'batch_end')}
    prefix, pool = 'cost:', 'echo'
    streams = [prefix + pool + ':b:1', prefix + pool + ':b:0', prefix + pool + ':b:-1']
    for s in streams:
        r.cmd('XGROUP', 'CREATE', s, GROUP, '0', 'MKSTREAM')
    r.cmd('SET', prefix + 'ids', '4503599627370495', 'NX')
    now = 1765000000000
    payload = b'p' * 16
    held = []

    def submit():
        for at in range(0, tasks, 512):
            k = min(512, tasks - at)
            r.cmd('EVALSHA', shas['batch_submit'], 3, prefix + 'ids', streams[1],
                  prefix + 'batches', prefix, pool, 0, now, k, pack_tasks(k, payload))

    def read():
        # A node's window of batches: 4 a read (2,048 tasks), as many reads as it takes.
        while True:
            got = r.cmd('XREADGROUP', 'GROUP', GROUP, 'profiler', 'COUNT', 4, 'STREAMS',
                        *streams, '>', '>', '>')
            if not got:
                return
            argv = [prefix, pool, 'profiler']
            entries = []
            for stream, items in got:
                band = {streams[0]: 1, streams[1]: 0, streams[2]: -1}[stream]
                for entry_id, fields in items:
                    f = dict(zip(fields[::2], fields[1::2]))
                    argv += [band, entry_id, f['batch']]
                    entries.append((band, entry_id, f['batch'], int(f['n'])))
            taken = r.cmd('EVALSHA', shas['batch_take'], 3, *streams, *argv)
            if any(t == 0 for t in taken):
                raise RuntimeError('batch_take refused a batch')
            held.extend(entries)

    def finish():
        for band, entry_id, first, n in held:
            stream = streams[1 - band]
            h = prefix + pool + ':batch:' + first
            for at in range(0, n, batch):
                records = b''.join(pack_end(i, payload, attempt, now)
                                   for i in range(at, min(n, at + batch)))
                out = r.cmd('EVALSHA', shas['batch_end'], 4, stream, h, h + ':ends',
                            prefix + pool + ':bdone', 'profiler', entry_id, first, now, records)
                if out[0] != 1 or any(w != 1 for w in out[2:]):
                    raise RuntimeError('batch_end refused an end')
                if (at + batch >= n) != (out[1] == 1):
                    raise RuntimeError('batch_end acked a batch not whole, or not one whole')
        del held[:]

    measure('submit', submit)
    measure('read', read)
    measure('finish', finish)
