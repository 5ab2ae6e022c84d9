"""submit_async: concurrent.futures futures over one pipelined connection."""

import concurrent.futures
import threading

import pytest

import sandpool
from poold_server import PooldServer


def test_many_async_submits_complete_on_one_connection(client):
    payloads = [f"task {i}".encode() for i in range(64)]
    futures = {client.submit_async("echo", p): p for p in payloads}
    for future in concurrent.futures.as_completed(futures, timeout=60):
        task = future.result()
        assert task.result == futures[future]
        assert future.task_id == task.id
    assert len({f.result().id for f in futures}) == len(payloads)


def test_an_async_submit_carries_the_requests_error(client):
    future = client.submit_async("no-such-type", b"x")
    assert isinstance(future.exception(60), sandpool.NotFound)
    assert future.task_id is None  # never accepted


def test_an_async_submit_of_a_failing_task_resolves_to_its_account(client):
    task = client.submit_async("fail", b"x").result(60)
    assert task.state == "dead_lettered"
    with pytest.raises(sandpool.TaskFailed):
        task.check()


def test_callbacks_run_on_the_reader_thread_and_may_not_call_synchronously(client):
    outcome = concurrent.futures.Future()

    def on_done(future):
        try:
            client.status()
        except RuntimeError as e:
            outcome.set_result((threading.current_thread().name, str(e)))
        else:
            outcome.set_result((threading.current_thread().name, "no error"))

    # A callback added to a future already done runs at once on this thread: the task sleeps
    # until the cancel below, so its future cannot be done when the callback is added.
    future = client.submit_async("sleep", b"600000")
    task_id = future.accepted_id(60)
    assert task_id is not None and not future.done()
    future.add_done_callback(on_done)
    assert client.cancel(task_id).cancelled
    thread, error = outcome.result(60)
    assert thread == "sandpool-client" and "reader thread" in error
    assert future.result(60).state == "cancelled"


def test_the_future_of_a_running_task_cannot_be_cancelled_but_the_task_can(client):
    future = client.submit_async("sleep", b"600000")
    assert future.cancel() is False
    task_id = future.accepted_id(60)
    assert task_id is not None and not future.done()
    client.cancel(task_id)
    assert future.result(60).state == "cancelled"


def test_submit_async_waits_for_a_slot_instead_of_running_into_poolds_limit():
    # poold refuses a request past connections.max_outstanding with `busy`; the client's own
    # max_outstanding, at or under it, makes submit_async wait for a slot instead.
    with PooldServer(service_extra="  connections: {max_outstanding: 8}\n") as tight:
        with sandpool.Client(tight.socket, max_outstanding=8) as c:
            futures = [c.submit_async("echo", b"%d" % i) for i in range(200)]
            assert [f.result(60).result for f in futures] == [b"%d" % i for i in range(200)]
        with sandpool.Client(tight.socket, max_outstanding=1000) as c:
            futures = [c.submit_async("sleep", b"600000") for _ in range(9)]
            assert isinstance(futures[-1].exception(60), sandpool.Busy)
            assert all(f.accepted_id(60) is not None for f in futures[:8])
