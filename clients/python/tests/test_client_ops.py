"""The pool controls, `tasks`, `dlq_import`, `reload` and `shutdown` through the threaded
client against a real poold (the journal on, its default): each reply typed, and each
operation's refusal (a bad argument, an unknown pool, a `read` peer)."""

import os
import subprocess
import sys
import textwrap

import pytest

import sandpool
from ops_material import ADDED_POOL, CONTROLLED_POOL, IMPORTED_TASK_ID, spill_line, until
from poold_server import READ_UID, PooldServer


@pytest.fixture(scope="module")
def ctl_poold():
    with PooldServer(pools_extra=CONTROLLED_POOL) as server:
        yield server


@pytest.fixture
def ctl(ctl_poold):
    with sandpool.Client(ctl_poold.socket) as c:
        yield c


def target_of(c: sandpool.Client, pool: str) -> int:
    (entry,) = c.workers(pool).pools
    assert isinstance(entry, sandpool.PoolTarget) and (entry.min, entry.max) == (1, 3)
    return entry.target_workers


def live_pids(c: sandpool.Client, pool: str) -> set:
    return {w.pid for w in c.workers(pool).workers if w.state in ("idle", "busy")}


def test_scale_sets_the_pools_worker_target_within_its_bounds(ctl):
    assert ctl.scale("ctl", 3) == sandpool.PoolState(pool="ctl", state="running")
    until(lambda: target_of(ctl, "ctl") == 3, "the target of 3 workers taken")
    (pool,) = [p for p in ctl.status().pools if p.name == "ctl"]
    assert (pool.state, pool.target_workers, pool.task_types) == ("running", 3, ["upper"])
    assert ctl.scale("ctl", 1).pool == "ctl"
    until(lambda: target_of(ctl, "ctl") == 1, "the target of 1 worker taken")
    with pytest.raises(sandpool.BadRequest, match=r"outside the pool's workers.min..max \(1..3\)"):
        ctl.scale("ctl", 4)
    with pytest.raises(sandpool.NotFound, match="no pool named 'nope'"):
        ctl.scale("nope", 1)


def test_strategy_changes_how_the_pool_dispatches(ctl):
    assert ctl.strategy("ctl", "least-loaded") == sandpool.PoolState("ctl", "running")
    assert ctl.submit("upper", b"after").result == b"AFTER"
    assert ctl.strategy("ctl", "round-robin").state == "running"
    with pytest.raises(sandpool.BadRequest, match="strategy"):
        ctl.strategy("ctl", "no-such-strategy")


def test_a_drained_pool_refuses_submits_until_it_is_resumed(ctl):
    try:
        assert ctl.drain("ctl") == sandpool.PoolState("ctl", "draining")
        with pytest.raises(sandpool.Closed, match="draining"):
            ctl.submit("upper", b"x")
    finally:
        assert ctl.resume("ctl") == sandpool.PoolState("ctl", "running")
    assert ctl.submit("upper", b"resumed").result == b"RESUMED"
    with pytest.raises(sandpool.NotFound):
        ctl.drain("nope")
    with pytest.raises(sandpool.NotFound):
        ctl.resume("nope")


def test_kill_worker_and_restart_replace_the_pools_workers(ctl):
    (victim,) = until(lambda: live_pids(ctl, "ctl") if len(live_pids(ctl, "ctl")) == 1 else None,
                      "one live worker in pool ctl")
    assert ctl.kill_worker("ctl", victim, signal=9) == sandpool.PoolState("ctl", "running")
    (replacement,) = until(
        lambda: live_pids(ctl, "ctl") if live_pids(ctl, "ctl") - {victim} else None,
        "a replacement for the killed worker")
    with pytest.raises(sandpool.NotFound, match="no live worker with pid 1"):
        ctl.kill_worker("ctl", 1)

    assert ctl.restart("ctl", rolling=True) == sandpool.PoolState("ctl", "running")
    until(lambda: live_pids(ctl, "ctl") and replacement not in live_pids(ctl, "ctl"),
          "the restart replaced the worker")
    assert ctl.restart("ctl").pool == "ctl"
    assert ctl.submit("upper", b"restarted").result == b"RESTARTED"
    with pytest.raises(sandpool.NotFound):
        ctl.restart("nope")


def test_tasks_lists_the_pools_tasks_by_filter(ctl):
    mine = [ctl.submit("upper", b"%d" % i, tenant="lister") for i in range(3)]
    listed = ctl.tasks(pool="ctl", tenant="lister")
    assert isinstance(listed, sandpool.TaskList) and not listed.truncated
    assert [t.id for t in listed.tasks] == sorted((t.id for t in mine), reverse=True)
    first = listed.tasks[-1]
    assert (first.pool, first.type, first.state, first.tenant, first.attempts) == \
        ("ctl", "upper", "completed", "lister", 1)
    assert first.submitted_ms > 0
    one = ctl.tasks(tenant="lister", limit=1)
    assert len(one.tasks) == 1 and one.truncated
    assert ctl.tasks(tenant="lister", state="running").tasks == []
    with pytest.raises(sandpool.BadRequest, match="limit"):
        ctl.tasks(limit=0)
    with pytest.raises(sandpool.NotFound):
        ctl.tasks(pool="nope")


def test_dlq_import_loads_spill_file_lines_once(ctl):
    task_id = IMPORTED_TASK_ID + 1
    lines = spill_line(task_id)
    assert ctl.dlq_import(lines, source="spill.jsonl") == sandpool.ImportResult(1, 0)
    assert ctl.dlq_import(lines.encode()) == sandpool.ImportResult(0, 1)
    (letter,) = ctl.dlq_list(task_id=task_id).letters
    assert ctl.dlq_show(letter.letter_id).payload == b"x"
    with pytest.raises(sandpool.BadRequest, match='spill.jsonl line 8: missing "version"'):
        ctl.dlq_import(lines + "{}\n", source="spill.jsonl", first_line=7)
    assert ctl.dlq_purge(task_id=task_id) == 1


def test_reload_applies_a_changed_config_and_refuses_a_broken_one():
    with PooldServer() as server, sandpool.Client(server.socket) as c:
        unchanged = c.reload()
        assert isinstance(unchanged, sandpool.ReloadResult) and unchanged.ok
        assert (unchanged.added, unchanged.removed, unchanged.failed) == ([], [], [])

        server.write_config(server.config + ADDED_POOL)
        added = c.reload()
        assert added.added == ["added"] and added.ok
        assert c.submit("upper", b"new pool").result == b"NEW POOL"

        server.write_config("pools: [")
        with pytest.raises(sandpool.BadRequest, match="YAML"):
            c.reload()
        assert c.submit("upper", b"old config stays").ok


def test_shutdown_stops_poold():
    with PooldServer() as server, sandpool.Client(server.socket, reconnect=False) as c:
        with pytest.raises(sandpool.BadRequest, match="timeout_ms"):
            c.call("shutdown", {"timeout_ms": "soon"})
        assert c.shutdown(timeout=5) is True
        assert server.process.wait(60) == 0
        with pytest.raises(sandpool.Unavailable):
            c.status()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as other uids")
def test_a_read_peer_may_list_tasks_but_is_refused_every_admin_operation(ctl_poold):
    code = textwrap.dedent("""
        import os, sandpool
        c = sandpool.Client(os.environ["SOCKET"])
        assert c.rights == "read"
        assert isinstance(c.tasks(pool="ctl"), sandpool.TaskList)
        calls = [lambda: c.scale("ctl", 2), lambda: c.strategy("ctl", "random"),
                 lambda: c.drain("ctl"), lambda: c.resume("ctl"), lambda: c.restart("ctl"),
                 lambda: c.kill_worker("ctl", 1), lambda: c.dlq_import(b""),
                 lambda: c.reload(), lambda: c.shutdown()]
        for call in calls:
            try:
                call()
                raise SystemExit("not refused")
            except sandpool.Forbidden:
                print("forbidden")
    """)
    env = dict(os.environ, SOCKET=ctl_poold.socket, PYTHONPATH=os.pathsep.join(sys.path))
    child = subprocess.run([sys.executable, "-c", code], user=READ_UID, group=READ_UID,
                           extra_groups=[], env=env, capture_output=True, text=True,
                           timeout=60)
    assert child.returncode == 0, child.stderr + child.stdout
    assert child.stdout.split() == ["forbidden"] * 9
    assert ctl_poold.process.poll() is None  # the refused shutdown did not stop it


def test_wait_is_bounded_by_its_own_timeout_not_by_call_timeout(ctl, ctl_poold):
    # call_timeout bounds every call but the waits; the wait made from the table keeps that.
    # (The submit and the cancel go through `ctl`, unbounded: a journal commit may be slow.)
    sleeping = ctl.submit("sleep", b"600000", wait=False)
    try:
        with sandpool.Client(ctl_poold.socket, call_timeout=0.2) as bounded:
            assert bounded.wait(sleeping.id, timeout=2).done is False  # 10 call_timeouts
    finally:
        ctl.cancel(sleeping.id)
    assert ctl.wait(sleeping.id).state == "cancelled"


def test_schedules_are_listed_shown_paused_resumed_and_run_now():
    schedules = CONTROLLED_POOL + textwrap.dedent("""\
        schedules:
          - {name: hourly, cron: "0 * * * *", type: upper, payload: up}
        """)
    with PooldServer(pools_extra=schedules) as server, sandpool.Client(server.socket) as c:
        (s,) = c.schedule_list()
        assert (s["name"], s["expression"], s["zone"], s["paused"]) == \
            ("hourly", "0 * * * *", "UTC", False)
        assert s["next_s"] % 3600 == 0
        assert c.schedule_pause("hourly")["paused"] is True
        assert "next_s" not in c.schedule_show("hourly")
        assert c.schedule_resume("hourly")["paused"] is False
        task_id = c.schedule_run_now("hourly")
        assert c.wait(task_id).result == b"UP"
        with pytest.raises(sandpool.NotFound, match="no schedule nope"):
            c.schedule_show("nope")


def test_schedules_are_added_and_removed_at_run_time_and_the_yaml_names_are_the_yamls():
    schedules = CONTROLLED_POOL + textwrap.dedent("""\
        schedules:
          - {name: hourly, cron: "0 * * * *", type: upper, payload: up}
        """)
    with PooldServer(pools_extra=schedules) as server, sandpool.Client(server.socket) as c:
        added = c.schedule_add("daily", "upper", cron="@daily", payload="day", timeout=30,
                               overlap="skip")
        assert (added["name"], added["expression"], added["overlap"]) == \
            ("daily", "@daily", "skip")
        assert added["next_s"] % 86400 == 0
        assert [s["name"] for s in c.schedule_list()] == ["daily", "hourly"]
        assert c.wait(c.schedule_run_now("daily")).result == b"DAY"
        with pytest.raises(sandpool.BadRequest, match="declared in the YAML"):
            c.schedule_add("hourly", "upper", every="2s")
        with pytest.raises(sandpool.BadRequest, match="declared in the YAML"):
            c.schedule_remove("hourly")
        with pytest.raises(sandpool.BadRequest, match="give cron or every"):
            c.schedule_add("neither", "upper")
        assert c.schedule_remove("daily") is None
        with pytest.raises(sandpool.NotFound, match="no schedule daily"):
            c.schedule_remove("daily")
