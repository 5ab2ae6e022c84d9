"""The pool controls, `tasks`, `dlq_import`, `reload` and `shutdown` through sandpool.aio
against a real poold (the journal on, its default): the coroutines of the same table as the
threaded client's, each reply typed, and each operation's refusal."""

import asyncio
import os
import sys
import textwrap

import pytest

import sandpool
import sandpool.aio
from ops_material import ADDED_POOL, CONTROLLED_POOL, IMPORTED_TASK_ID, spill_line
from poold_server import PATIENCE, READ_UID, PooldServer


def run(coro, timeout=3 * PATIENCE):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def until(predicate, what: str):
    """predicate() (a coroutine function)'s first true value, asked again until PATIENCE
    seconds pass (then fails naming `what`)."""
    try:
        async with asyncio.timeout(PATIENCE):
            while True:
                value = await predicate()
                if value:
                    return value
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"not within {PATIENCE} s: {what}") from None


async def live_pids(c: sandpool.aio.Client, pool: str) -> set:
    return {w.pid for w in (await c.workers(pool)).workers if w.state in ("idle", "busy")}


@pytest.fixture(scope="module")
def ctl_poold():
    with PooldServer(pools_extra=CONTROLLED_POOL) as server:
        yield server


def test_pool_controls_as_coroutines(ctl_poold):
    async def main():
        async with await sandpool.aio.Client.connect(ctl_poold.socket) as c:
            assert await c.scale("ctl", 2) == sandpool.PoolState("ctl", "running")

            async def target_is_2():
                return (await c.workers("ctl")).pools[0].target_workers == 2
            await until(target_is_2, "the target of 2 workers taken")
            with pytest.raises(sandpool.BadRequest, match="workers.min..max"):
                await c.scale("ctl", 9)

            assert (await c.strategy("ctl", "random")).state == "running"
            with pytest.raises(sandpool.BadRequest, match="strategy"):
                await c.strategy("ctl", "no-such-strategy")

            assert await c.drain("ctl") == sandpool.PoolState("ctl", "draining")
            with pytest.raises(sandpool.Closed):
                await c.submit("upper", b"x")
            assert await c.resume("ctl") == sandpool.PoolState("ctl", "running")
            assert (await c.submit("upper", b"back")).result == b"BACK"
            with pytest.raises(sandpool.NotFound):
                await c.drain("nope")

            async def some_live():
                return await live_pids(c, "ctl")
            victim = min(await until(some_live, "a live worker"))
            assert (await c.kill_worker("ctl", victim)).pool == "ctl"

            async def victim_gone():
                pids = await live_pids(c, "ctl")
                return pids and victim not in pids
            await until(victim_gone, "the killed worker replaced")
            with pytest.raises(sandpool.NotFound, match="no live worker"):
                await c.kill_worker("ctl", 1)

            assert await c.restart("ctl", rolling=True) == sandpool.PoolState("ctl", "running")
            assert (await c.submit("upper", b"after restart")).result == b"AFTER RESTART"
            with pytest.raises(sandpool.NotFound):
                await c.restart("nope")

    run(main())


def test_tasks_and_dlq_import_as_coroutines(ctl_poold):
    async def main():
        async with await sandpool.aio.Client.connect(ctl_poold.socket) as c:
            mine = await asyncio.gather(*(c.submit("upper", b"t", tenant="aio-lister")
                                          for _ in range(2)))
            listed = await c.tasks(tenant="aio-lister")
            assert sorted(t.id for t in listed.tasks) == sorted(t.id for t in mine)
            assert {(t.pool, t.state, t.tenant) for t in listed.tasks} == \
                {("ctl", "completed", "aio-lister")}
            with pytest.raises(sandpool.BadRequest, match="limit"):
                await c.tasks(limit=1001)

            task_id = IMPORTED_TASK_ID + 2
            line = spill_line(task_id, payload_base64="YWlv")
            assert await c.dlq_import(line) == sandpool.ImportResult(1, 0)
            assert await c.dlq_import(line) == sandpool.ImportResult(0, 1)
            (letter,) = (await c.dlq_list(task_id=task_id)).letters
            assert (await c.dlq_show(letter.letter_id)).payload == b"aio"
            with pytest.raises(sandpool.BadRequest, match="request line 1"):
                await c.dlq_import("not json\n")
            assert await c.dlq_purge(task_id=task_id) == 1

    run(main())


def test_reload_and_shutdown_as_coroutines():
    async def main(server):
        async with await sandpool.aio.Client.connect(server.socket, reconnect=False) as c:
            assert (await c.reload()).added == []
            server.write_config(server.config + ADDED_POOL)
            assert (await c.reload()).added == ["added"]
            server.write_config("pools: [")
            with pytest.raises(sandpool.BadRequest, match="YAML"):
                await c.reload()
            assert (await c.submit("upper", b"still")).result == b"STILL"
            assert await c.shutdown() is True
            assert await asyncio.to_thread(server.process.wait, PATIENCE) == 0

    with PooldServer() as server:
        run(main(server))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as other uids")
def test_a_read_peer_is_refused_the_admin_coroutines(ctl_poold):
    code = textwrap.dedent("""
        import asyncio, os, sandpool, sandpool.aio
        async def main():
            async with await sandpool.aio.Client.connect(os.environ["SOCKET"]) as c:
                assert c.rights == "read"
                assert isinstance(await c.tasks(), sandpool.TaskList)
                for name, args in [("scale", ("ctl", 2)), ("drain", ("ctl",)),
                                   ("kill_worker", ("ctl", 1)), ("dlq_import", (b"",)),
                                   ("reload", ()), ("shutdown", ())]:
                    try:
                        await getattr(c, name)(*args)
                        raise SystemExit(name + " not refused")
                    except sandpool.Forbidden:
                        print("forbidden")
        asyncio.run(main())
    """)

    async def child():
        env = dict(os.environ, SOCKET=ctl_poold.socket, PYTHONPATH=os.pathsep.join(sys.path))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", code, user=READ_UID, group=READ_UID, extra_groups=[],
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        return proc.returncode, out.decode(), err.decode()

    code_, out, err = run(child())
    assert code_ == 0, err + out
    assert out.split() == ["forbidden"] * 6
    assert ctl_poold.process.poll() is None


def test_wait_is_bounded_by_its_own_timeout_not_by_call_timeout(ctl_poold):
    async def main():
        async with await sandpool.aio.Client.connect(ctl_poold.socket) as c, \
                await sandpool.aio.Client.connect(ctl_poold.socket, call_timeout=0.2) as bounded:
            sleeping = await c.submit("sleep", b"600000", wait=False)
            try:
                assert (await bounded.wait(sleeping.id, timeout=2)).done is False
            finally:
                await c.cancel(sleeping.id)
            assert (await c.wait(sleeping.id)).state == "cancelled"

    run(main())
