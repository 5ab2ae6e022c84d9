"""What the Python client costs, against a real poold of the build (docs/performance.md,
"The Python client"). Not a test: figures, printed one per line.

    PYTHONPATH=clients/python /usr/bin/python3 clients/python/bench.py [--tasks N]

Starts poold on a scratch directory with tests/poold_server.py's config (the echo pool: two
workers) and the journal off, as the figures were measured, and measures, each best of 3 rounds: waited submits one after another (latency),
N submit_async futures pipelined on one connection, N tasks in one submit_many, and N
gathered submits of the asyncio client (throughput, every result checked).
"""

import argparse
import asyncio
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "tests"))

import sandpool  # noqa: E402
import sandpool.aio  # noqa: E402
from poold_server import PooldServer  # noqa: E402


def sequential_us(client, n):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        client.submit("echo", b"x").check()
        times.append((time.perf_counter() - start) * 1e6)
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.99)]


def futures_rate(client, n):
    start = time.perf_counter()
    futures = [client.submit_async("echo", b"%d" % i) for i in range(n)]
    assert all(f.result(300).result == b"%d" % i for i, f in enumerate(futures))
    return n / (time.perf_counter() - start)


def batch_rate(client, n):
    start = time.perf_counter()
    submitted = client.submit_many("echo", [b"b"] * n)
    accepted = time.perf_counter() - start
    assert all(s.accepted for s in submitted)
    for s in submitted:
        client.wait(s.id)
    return n / accepted


def aio_rate(socket, n):
    async def main():
        async with await sandpool.aio.Client.connect(socket) as client:
            start = time.perf_counter()
            tasks = await asyncio.gather(*(client.submit("echo", b"a") for _ in range(n)))
            assert all(t.result == b"a" for t in tasks)
            return n / (time.perf_counter() - start)

    return asyncio.run(main())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=5000)
    n = parser.parse_args().tasks
    # The tests run with the journal; the client's figures leave it out (docs/performance.md).
    with PooldServer(service_extra="  journal: off\n") as server, \
            sandpool.Client(server.socket) as client:
        seq = [sequential_us(client, 1000) for _ in range(3)]
        p50 = min(s[0] for s in seq)
        p99 = min(s[1] for s in seq)
        print(f"waited submit, one at a time: p50 {p50:.0f} us, p99 {p99:.0f} us")
        print(f"submit_async, {n} pipelined: "
              f"{max(futures_rate(client, n) for _ in range(3)):,.0f} tasks/s")
        print(f"submit_many of {n} (until accepted): "
              f"{max(batch_rate(client, n) for _ in range(3)):,.0f} tasks/s")
        print(f"aio gather of {n}: "
              f"{max(aio_rate(server.socket, n) for _ in range(3)):,.0f} tasks/s")


if __name__ == "__main__":
    main()
