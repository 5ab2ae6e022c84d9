"""sandpool.aio: the same operations as coroutines on one asyncio connection."""

import asyncio
import os
import signal

import pytest

import sandpool
import sandpool.aio
from poold_server import PATIENCE, PooldServer, plugin


def run(coro, timeout=60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def test_gathered_submits_complete_on_one_connection(poold):
    async def main():
        async with await sandpool.aio.Client.connect(poold.socket) as c:
            assert c.rights == "admin"
            payloads = [f"a{i}".encode() for i in range(32)]
            tasks = await asyncio.gather(*(c.submit("echo", p) for p in payloads))
            assert [t.result for t in tasks] == payloads
            submitted = await c.submit("echo", b"later", wait=False)
            assert (await c.wait(submitted.id)).result == b"later"
            assert (await c.task(submitted.id)).state == "completed"
            batch = await c.submit_many("echo", [b"x", b"y"])
            assert [(await c.wait(s.id)).result for s in batch] == [b"x", b"y"]

    run(main())


def test_errors_cancel_and_bounded_waits(poold):
    async def main():
        async with await sandpool.aio.Client.connect(poold.socket) as c:
            with pytest.raises(sandpool.NotFound):
                await c.task(10**15)
            with pytest.raises(sandpool.BadRequest, match="retries"):
                await c.submit("echo", b"x", retries=-1)
            sleeping = await c.submit("sleep", b"600000", wait=False)
            assert (await c.wait(sleeping.id, timeout=0)).done is False
            unfinished = await c.submit("sleep", b"600000", wait_timeout=0.5)
            assert unfinished.done is False
            assert (await c.cancel(unfinished.id)).cancelled
            assert (await c.cancel(sleeping.id)).cancelled
            assert (await c.wait(sleeping.id)).state == "cancelled"

    run(main())


def test_progress_reaches_the_callback_on_the_loop(poold):
    async def main():
        async with await sandpool.aio.Client.connect(poold.socket) as c:
            loop = asyncio.get_running_loop()
            seen = []

            def on_progress(task_id, data):
                assert asyncio.get_running_loop() is loop
                seen.append(data)

            task = await c.submit("progress", b"3", progress=on_progress)
            assert task.ok and seen and seen[-1] == b"3/3"

    run(main())


def test_submit_async_futures_carry_the_task_id_and_a_lost_connection_names_it():
    async def main(server):
        async with await sandpool.aio.Client.connect(server.socket) as c:
            echoed = await c.submit_async("echo", b"f")
            sleeping = await c.submit_async("sleep", b"600000")
            assert (await echoed).result == b"f" and echoed.task_id == (await echoed).id
            task_id = await sleeping.accepted_id()
            assert task_id is not None and not sleeping.done()
            server.process.kill()
            with pytest.raises(sandpool.Unavailable) as lost:
                await sleeping
            assert lost.value.task_id == task_id

    with PooldServer() as doomed:
        run(main(doomed))


# One worker that the test stops (SIGSTOP) while it is idle: it misses no heartbeat poold
# acts on, and no task of the pool times out, before the test is done.
HELD_POOL = f"""\
  - name: held
    plugin: {plugin("upper")}
    workers: {{min: 1, max: 1, initial: 1}}
    health: {{missed_heartbeats: 2400}}
    task_defaults: {{timeout: 10m}}
"""


def test_a_wait_open_across_a_restart_of_poold_gets_the_result_after_it():
    # The task journal (on by default) keeps the accepted task over the restart; its pool's
    # one worker is stopped before the submit, so the task cannot end before poold goes down.
    async def main(server):
        async with await sandpool.aio.Client.connect(server.socket) as c:
            while True:
                held = (await c.workers("held"))["workers"]
                if len(held) == 1 and held[0]["state"] == "idle":
                    break
                await asyncio.sleep(0.02)
            os.kill(held[0]["pid"], signal.SIGSTOP)
            submitted = await c.submit("upper", b"across the restart", wait=False)
            waiter = asyncio.ensure_future(c.wait(submitted.id))
            while not c._conn._pending:  # until its request is written
                await asyncio.sleep(0)
            # poold serves reads in arrival order: this one is answered once the wait is open.
            assert (await c.task(submitted.id)).done is False
            assert not waiter.done()

            stopped_log = await asyncio.to_thread(server.restart)
            assert "pool stopped pool=held kept_unfinished=1" in stopped_log
            ended = await waiter  # answered before poold closed the connection
            assert (ended.state, ended.reason) == ("cancelled", "shutdown")
            assert "[held] recovered 1 unfinished tasks from the journal" in server.output()

            task = await c.wait(submitted.id)  # on a new connection to the new poold
            assert (task.state, task.result) == ("completed", b"ACROSS THE RESTART")
            assert task.attempts == 1  # the run poold's stop cut short is not counted

    with PooldServer(pools_extra=HELD_POOL) as server:
        run(main(server), 3 * PATIENCE)  # a stop and a start of poold inside


def test_call_timeout_gives_up_on_the_reply_and_keeps_the_connection(poold):
    async def main():
        async with await sandpool.aio.Client.connect(poold.socket, call_timeout=0.2) as c:
            sleeping = await c.submit("sleep", b"600000", wait=False)
            with pytest.raises(sandpool.Timeout):
                await c.call("wait", {"id": sleeping.id})
            assert (await c.cancel(sleeping.id)).cancelled

    run(main())


def test_cancelling_a_waiting_coroutine_leaves_the_connection_usable(poold):
    async def main():
        async with await sandpool.aio.Client.connect(poold.socket) as c:
            sleeping = await c.submit("sleep", b"600000", wait=False)
            waiter = asyncio.ensure_future(c.wait(sleeping.id))
            # Until its request is written (the write follows the entry with no await between);
            # drain() does not suspend for a request this small, so the waiter then awaits the
            # reply, where the cancel below finds it.
            while not c._conn._pending:
                await asyncio.sleep(0)
            (request_id,) = c._conn._pending
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert request_id not in c._conn._pending  # dropped: a late reply is ignored
            assert (await c.task(sleeping.id)).done is False  # the wait ended, not the task
            assert (await c.cancel(sleeping.id)).cancelled
            assert (await c.submit("echo", b"after")).result == b"after"

    run(main())


def test_async_events_follow_a_task(poold):
    async def main():
        async with await sandpool.aio.Client.connect(poold.socket) as c:
            async with await c.events(pool="echo") as stream:
                task = await c.submit("echo", b"watched")
                async for event in stream:
                    if event.event == "task_ended" and event.task_id == task.id:
                        assert event.state == "completed"
                        break
            recent = [e async for e in await c.events(follow=False)]
            assert recent
            # aclose() ends the stream on poold: six in a row stay within its 4 per connection.
            for _ in range(6):
                stream = await c.events()
                assert isinstance(await stream.__anext__(), sandpool.Event)
                await stream.aclose()
            assert (await c.submit("echo", b"after")).ok

    run(main())


def test_async_dead_letters(poold):
    async def main():
        async with await sandpool.aio.Client.connect(poold.socket) as c:
            task = await c.submit("fail", b"aio letter")
            page = await c.dlq_list(task_id=task.id)
            letter = await c.dlq_show(page.letters[0].letter_id)
            assert letter.payload == b"aio letter"
            assert (await c.dlq_replay(task_id=task.id)).ids == [task.id]
            assert (await c.wait(task.id)).state == "dead_lettered"
            assert await c.dlq_purge(task_id=task.id) == 1

    run(main())


def test_no_service_raises_unavailable(poold):
    with pytest.raises(sandpool.Unavailable):
        run(sandpool.aio.Client.connect(poold.socket + ".missing"))


@pytest.fixture(scope="module")
def tight_poold():
    """A poold that closes idle connections after 300 ms and refuses a ninth open request
    on a connection."""
    extra = "  control: {idle_timeout: 300ms}\n  connections: {max_outstanding: 8}\n"
    with PooldServer(service_extra=extra) as server:
        yield server


def test_a_call_after_poolds_idle_timeout_reconnects(tight_poold):
    async def main(socket):
        async with await sandpool.aio.Client.connect(socket) as c:
            first = c._conn
            await first.read_task  # ends when poold closes the idle connection
            assert isinstance(first.broken, sandpool.Timeout)
            assert (await c.submit("echo", b"again")).result == b"again"
            assert c._conn is not first
        async with await sandpool.aio.Client.connect(socket, reconnect=False) as c:
            await c._conn.read_task
            with pytest.raises(sandpool.Unavailable, match="idle"):
                await c.status()

    run(main(tight_poold.socket))


def test_gathered_submits_wait_for_a_slot_instead_of_running_into_poolds_limit(tight_poold):
    async def within_limit(socket):
        async with await sandpool.aio.Client.connect(socket, max_outstanding=8) as c:
            return await asyncio.gather(*(c.submit("echo", b"%d" % i) for i in range(100)))

    async def past_limit(socket):
        async with await sandpool.aio.Client.connect(socket, max_outstanding=1000) as c:
            sleeping = [asyncio.ensure_future(c.submit("sleep", b"600000")) for _ in range(8)]
            while len(c._conn._pending) < 8:  # until the eight requests are sent
                await asyncio.sleep(0)
            with pytest.raises(sandpool.Busy):
                await c.submit("echo", b"ninth")
            for task in sleeping:
                task.cancel()

    tasks = run(within_limit(tight_poold.socket))
    assert [t.result for t in tasks] == [b"%d" % i for i in range(100)]
    run(past_limit(tight_poold.socket))
