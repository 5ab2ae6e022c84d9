"""The threaded client against a real poold: each test names what it checks and fails when
that breaks."""

import os
import subprocess
import sys
import textwrap

import pytest

import sandpool
from poold_server import READ_UID, STRANGER_UID, PooldServer


def test_a_waited_submit_returns_the_completed_task_with_its_result(client):
    task = client.submit("echo", b"hello \x00 bytes")
    assert isinstance(task, sandpool.Task)
    assert (task.state, task.done, task.ok) == ("completed", True, True)
    assert task.result == b"hello \x00 bytes"
    assert task.check() == b"hello \x00 bytes"
    assert task.attempts == 1 and task.history[0].outcome == "ok"
    assert client.rights == "admin"


def test_a_submit_without_wait_returns_the_id_that_wait_and_task_then_answer(client):
    submitted = client.submit("echo", "text payload", wait=False)
    assert isinstance(submitted, sandpool.Submitted) and submitted.id > 0
    waited = client.wait(submitted.id)
    assert waited.id == submitted.id and waited.result == b"text payload"
    assert client.task(submitted.id).state == "completed"


def test_options_reach_the_service(client):
    # retries=0 on a task whose first attempt asks for a retry: it dead-letters at once,
    # where the pool's default (3) would retry it.
    task = client.submit("flaky", b"x", retries=0, timeout=5, key="k", priority=3)
    assert task.state == "dead_lettered" and task.reason == "retries_exhausted"
    with pytest.raises(sandpool.TaskFailed) as failed:
        task.check()
    assert failed.value.task is task
    assert client.submit("flaky", b"x", retries=2).state == "completed"


def test_an_idempotency_key_returns_the_existing_task(client):
    first = client.submit("echo", b"once", wait=False, idempotency_key="py-key-1")
    again = client.submit("echo", b"once", wait=False, idempotency_key="py-key-1")
    assert (again.id, again.existing, first.existing) == (first.id, True, False)


def test_a_tenant_and_a_schedule_reach_poold(client):
    assert client.submit("echo", b"t", tenant="acme").result == b"t"
    later = client.submit("echo", b"later", wait=False, tenant="acme", delay=3600)
    task = client.task(later.id)
    assert task.state == "scheduled"
    client.cancel(later.id)
    assert client.wait(later.id).state == "cancelled"


def test_submit_many_shares_options_and_reports_refusals_per_task(client):
    accepted = client.submit_many("echo", [b"a", b"bb", "ccc"])
    assert [s.accepted for s in accepted] == [True, True, True]
    assert [client.wait(s.id).result for s in accepted] == [b"a", b"bb", b"ccc"]

    mixed = client.submit_many(None, [sandpool.Job(b"ok", type="echo"),
                                      sandpool.Job(b"no", type="no-such-type"),
                                      sandpool.Job(b"f", type="fail")])
    assert mixed[0].accepted and mixed[2].accepted
    assert isinstance(mixed[1].error, sandpool.NotFound) and mixed[1].id == 0
    assert client.wait(mixed[2].id).state == "dead_lettered"

    refused = client.submit_many("no-such-type", [b"1", b"2"])
    assert all(isinstance(s.error, sandpool.NotFound) for s in refused)


def test_submit_many_sent_again_with_its_request_token_gets_the_first_tries_tasks(client):
    first = client.submit_many("echo", [b"t1", b"t2"], request_token="py-batch-token-1")
    again = client.submit_many("echo", [b"t1", b"t2"], request_token="py-batch-token-1")
    assert [s.id for s in again] == [s.id for s in first]
    assert [s.existing for s in first] == [False, False]
    assert [s.existing for s in again] == [True, True]
    other = client.submit_many("echo", [b"t1"], request_token="py-batch-token-2")
    assert other[0].id not in {s.id for s in first} and not other[0].existing


def test_submit_many_splits_a_batch_over_the_servers_frame_limit(client):
    payloads = [bytes([i % 251]) * 60000 for i in range(300)]  # 18 MB: two requests
    submitted = client.submit_many("echo", payloads)
    assert all(s.accepted for s in submitted) and len({s.id for s in submitted}) == 300
    # Sent again with a token, each of its two requests gets the first try's tasks.
    first = client.submit_many("echo", payloads, request_token="py-split-token")
    again = client.submit_many("echo", payloads, request_token="py-split-token")
    assert [s.id for s in again] == [s.id for s in first] and all(s.existing for s in again)
    for i in (0, 150, 299):
        assert client.wait(submitted[i].id).result == payloads[i]


def test_cancel_ends_a_running_task(client):
    submitted = client.submit("sleep", b"600000", wait=False)
    result = client.cancel(submitted.id)
    assert result.id == submitted.id and result.cancelled
    assert client.wait(submitted.id).state == "cancelled"
    assert client.cancel(submitted.id).cancelled is False  # already terminal


def test_a_bounded_wait_returns_the_task_unfinished(client):
    submitted = client.submit("sleep", b"600000", wait=False)
    try:
        assert client.wait(submitted.id, timeout=0).done is False
        unfinished = client.submit("sleep", b"600000", wait_timeout=0.5)
        assert unfinished.done is False
        client.cancel(unfinished.id)
    finally:
        client.cancel(submitted.id)


def test_progress_reports_reach_the_callback(client):
    seen = []
    task = client.submit("progress", b"3", progress=lambda tid, data: seen.append((tid, data)))
    assert task.state == "completed"
    assert seen and all(tid == task.id for tid, _ in seen)
    assert seen[-1][1] == b"3/3"


def test_events_stream_follows_a_task_until_closed(client):
    with client.events(pool="echo") as stream:
        task = client.submit("echo", b"watched")
        for event in stream:
            assert event.pool == "echo"
            if event.event == "task_ended" and event.task_id == task.id:
                assert event.state == "completed"
                break
    assert stream.get() is None  # closed: the iteration is over
    assert client.submit("echo", b"still usable").ok


def test_closing_a_stream_cancels_it_on_the_service(client):
    # poold allows 4 open streams per connection (control.streams_per_connection): a fifth
    # opened after closing the others is refused `busy` unless close() ended them there.
    for _ in range(6):
        stream = client.events()
        assert isinstance(next(stream), sandpool.Event)  # open: the recent events arrive
        stream.close()
    with client.events() as a, client.events() as b, client.events() as c, client.events() as d:
        with pytest.raises(sandpool.Busy):
            next(client.events())
        assert {next(s).event for s in (a, b, c, d)}


def test_events_without_follow_end_after_the_recent_ones(client):
    client.submit("echo", b"recent")
    events = list(client.events(follow=False))
    assert events and all(isinstance(e, sandpool.Event) for e in events)


def test_dead_letters_list_show_replay_and_purge(client):
    task = client.submit("fail", b"letter payload")
    assert task.state == "dead_lettered"
    page = client.dlq_list(task_id=task.id)
    assert [letter.task_id for letter in page.letters] == [task.id]
    letter = page.letters[0]
    assert letter.pool == "fail" and letter.payload_bytes == len(b"letter payload")
    shown = client.dlq_show(letter.letter_id)
    assert shown.payload == b"letter payload" and shown.task.history

    replayed = client.dlq_replay(letter.letter_id)
    assert (replayed.ids, replayed.failed) == ([task.id], 0)
    assert client.wait(task.id).state == "dead_lettered"  # the fail plugin fails it again
    assert [le.task_id for le in client.dlq_letters(pool="fail", task_id=task.id)] == [task.id]
    assert client.dlq_purge(task_id=task.id) == 1
    assert client.dlq_list(task_id=task.id).letters == []
    with pytest.raises(sandpool.NotFound):
        client.dlq_show(letter.letter_id)
    with pytest.raises(ValueError):
        client.dlq_replay()  # no selector


def test_server_errors_raise_their_typed_exceptions(client):
    with pytest.raises(sandpool.NotFound) as nf:
        client.task(10**15)
    assert nf.value.code == "not_found" and isinstance(nf.value, LookupError)
    with pytest.raises(sandpool.BadRequest, match="retries"):
        client.submit("echo", b"x", retries=-1)
    with pytest.raises(sandpool.BadRequest, match="timeout_ms"):
        client.submit("echo", b"x", timeout=0)
    with pytest.raises(sandpool.NotFound, match="no pool serves"):
        client.submit("no-such-type", b"x")
    with pytest.raises(sandpool.TooLarge):
        client.submit("echo", b"x" * (65 * 1024))  # over the echo pool's max_payload
    with pytest.raises(sandpool.UnknownOp):
        client.call("no_such_op")
    assert client.submit("echo", b"the connection carries on").ok


def test_a_request_over_the_servers_frame_limit_is_refused_before_sending(client):
    with pytest.raises(sandpool.TooLarge, match="over the server's limit"):
        client.submit("echo", bytes(client.server_max_frame + 1), wait=False)


def test_call_timeout_gives_up_on_the_reply_and_keeps_the_connection(poold):
    with sandpool.Client(poold.socket, call_timeout=0.2) as c:
        submitted = c.submit("sleep", b"600000", wait=False)
        with pytest.raises(sandpool.Timeout):
            c.call("wait", {"id": submitted.id})
        assert c.cancel(submitted.id).cancelled


def test_a_closed_client_raises_unavailable(poold):
    c = sandpool.Client(poold.socket)
    pending = c.submit_async("sleep", b"600000")
    c.close()
    with pytest.raises(sandpool.Unavailable):
        pending.result(60)
    with pytest.raises(sandpool.Unavailable):
        c.status()


def test_no_service_at_the_path_raises_unavailable(poold):
    with pytest.raises(sandpool.Unavailable, match="cannot connect"):
        sandpool.Client(poold.socket + ".missing")


def _as_uid(uid, poold, code):
    """Runs `code` in a child that became `uid` (the tests run as root)."""
    env = dict(os.environ, SOCKET=poold.socket, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], user=uid, group=uid, extra_groups=[], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as other uids")
def test_a_read_peer_is_refused_admin_operations_and_results(client, poold):
    done = client.submit("echo", b"secret")
    child = _as_uid(READ_UID, poold, f"""
        import os, sandpool
        c = sandpool.Client(os.environ["SOCKET"])
        assert c.rights == "read", c.rights
        t = c.task({done.id})
        assert t.state == "completed" and t.result_withheld and t.result == b"", t
        try:
            c.submit("echo", b"x")
        except sandpool.Forbidden as e:
            assert isinstance(e, PermissionError)
            print("forbidden:", e)
    """)
    assert child.returncode == 0, child.stderr
    assert "forbidden:" in child.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as other uids")
def test_a_peer_without_rights_is_refused_at_connect(poold):
    child = _as_uid(STRANGER_UID, poold, """
        import os, sandpool
        try:
            sandpool.Client(os.environ["SOCKET"])
        except sandpool.Forbidden as e:
            print("forbidden:", e)
    """)
    assert child.returncode == 0, child.stderr
    assert "forbidden:" in child.stdout


def test_a_call_after_poolds_idle_timeout_reconnects_unless_told_not_to():
    with PooldServer(service_extra="  control: {idle_timeout: 300ms}\n") as idle:
        with sandpool.Client(idle.socket) as c, \
                sandpool.Client(idle.socket, reconnect=False) as stays:
            first = c._conn
            assert first.ended.wait(60) and stays._conn.ended.wait(60)  # poold closed both
            assert isinstance(first.broken, sandpool.Timeout)
            assert c.submit("echo", b"again").result == b"again"
            assert c._conn is not first
            with pytest.raises(sandpool.Unavailable, match="idle"):
                stays.status()


def test_a_lost_connection_fails_a_waited_submit_naming_the_accepted_task():
    with PooldServer() as doomed, sandpool.Client(doomed.socket) as c:
        future = c.submit_async("sleep", b"600000")
        task_id = future.accepted_id(60)
        assert task_id is not None
        doomed.process.kill()
        error = future.exception(60)
        assert isinstance(error, sandpool.Unavailable) and error.task_id == task_id
