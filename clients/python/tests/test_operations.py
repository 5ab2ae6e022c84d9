"""Every operation of the protocol has a typed, documented method in both clients: the table
of operations (sandpool/_operations.py) against the C++ list `ops::AllOps`, as the
control_op_names program of this build prints it ("NAME RIGHTS" a line), and both client
classes against the table. An operation added to poold without a Python method fails here.
"""

import dataclasses
import inspect
import os
import pathlib
import subprocess

import pytest

import sandpool
import sandpool.aio
from sandpool import _operations, _ops, _reads

REPO = pathlib.Path(__file__).resolve().parents[3]


def control_op_names(*args: str) -> str:
    """What this build's control_op_names prints."""
    program = os.environ.get("SANDPOOL_CONTROL_OP_NAMES",
                             str(REPO / "build" / "bin" / "control_op_names"))
    return subprocess.run([program, *args], check=True, capture_output=True, text=True).stdout


def cpp_operations() -> dict[str, str]:
    """The operations of ops::AllOps and the rights each needs, from control_op_names."""
    out = control_op_names()
    ops = dict(line.split() for line in out.splitlines() if line.strip())
    assert len(ops) >= 20, f"control_op_names printed too few operations: {out!r}"
    return ops


def test_the_table_has_every_operation_of_the_cpp_list_with_its_rights():
    table = {row.op: row.rights for row in _operations.OPERATIONS}
    assert len(table) == len(_operations.OPERATIONS), "an operation is in the table twice"
    assert table == cpp_operations()


# A value for each parameter of _ops.submit_args() that makes it send its field.
SUBMIT_ARG_VALUES = {
    "type": "echo", "pool": "p", "priority": 3, "timeout": 1.5, "retries": 2, "key": "k",
    "idempotency_key": "i", "tenant": "acme", "delay": 2, "not_before": 1790000000,
    "wait": True, "progress": True, "request_token": "t",
}


def test_submit_sends_the_fields_the_cpp_arguments_have_and_only_those():
    # One definition of a task's options in C++ (TaskOptions, read by submit's JSON mapping
    # through one list of fields); the Python client restates it: held here against that list.
    params = list(inspect.signature(_ops.submit_args).parameters)
    assert sorted(params) == sorted(SUBMIT_ARG_VALUES), \
        "a parameter of submit_args() has no value in SUBMIT_ARG_VALUES (or one went)"
    sent = _ops.submit_args(**SUBMIT_ARG_VALUES)
    cpp = control_op_names("--submit-args").split()
    assert len(cpp) == len(set(cpp)) >= 10, f"control_op_names --submit-args printed {cpp!r}"
    assert sorted(sent) == sorted(cpp)


def test_a_job_carries_the_fields_a_batch_task_has_in_cpp_and_only_those():
    # A batch's task (submit_batch's `tasks`) reads submit's arguments but the request's own
    # (wait, progress, request_token): control_op_names --batch-task-args prints that list.
    # Every option of a Job set, the task object it becomes must have exactly those members.
    names = [f.name for f in dataclasses.fields(_ops.Job)]
    missing = set(names) - {"payload"} - set(SUBMIT_ARG_VALUES)
    assert not missing, f"fields of Job with no value in SUBMIT_ARG_VALUES: {missing}"
    options = {name: SUBMIT_ARG_VALUES[name] for name in names if name != "payload"}
    jobs = [_ops.Job(b"x", **{k: v for k, v in options.items() if k != "delay"}),
            _ops.Job(b"y", **{k: v for k, v in options.items() if k != "not_before"})]
    args, blob, count = _ops.batch_request(None, jobs, {})
    assert (blob, count) == (b"xy", 2)
    sent = set(args["tasks"][0]) | set(args["tasks"][1])  # delay_ms and not_before_ms exclude
    cpp = control_op_names("--batch-task-args").split()   # each other on one task
    assert len(cpp) == len(set(cpp)) >= 8, f"control_op_names --batch-task-args printed {cpp!r}"
    assert sorted(sent) == sorted(cpp)


@pytest.mark.parametrize("row", _operations.OPERATIONS, ids=lambda row: row.op)
def test_both_clients_have_a_documented_method_of_one_signature(row):
    sync = getattr(sandpool.Client, row.method, None)
    aio = getattr(sandpool.aio.Client, row.method, None)
    assert callable(sync), f"sandpool.Client has no method {row.method} for `{row.op}`"
    assert callable(aio), f"sandpool.aio.Client has no method {row.method} for `{row.op}`"
    assert not inspect.iscoroutinefunction(sync)
    assert inspect.iscoroutinefunction(aio), f"aio.Client.{row.method} is not a coroutine"
    assert (sync.__doc__ or "").strip(), f"Client.{row.method} has no documentation"
    sync_params = list(inspect.signature(sync).parameters.values())
    aio_params = list(inspect.signature(aio).parameters.values())
    assert [(p.name, p.kind, p.default) for p in sync_params] == \
        [(p.name, p.kind, p.default) for p in aio_params]
    if row.define is not None:  # made from the table: its definition's signature and doc
        assert sync.__doc__ == aio.__doc__ == row.define.__doc__
        assert [p.name for p in sync_params] == \
            ["self", *inspect.signature(row.define).parameters]


def test_the_methods_names_are_the_operations_names_but_submit_batchs():
    renamed = {row.op: row.method for row in _operations.OPERATIONS if row.op != row.method}
    assert renamed == {"submit_batch": "submit_many"}


def test_a_read_reply_is_typed_and_stays_the_json_it_was():
    body = {"pid": 7, "started_ms": 1, "stopping": False, "journal": None,
            "pools": [{"name": "echo", "state": "running", "task_types": ["echo"],
                       "workers": 2, "queued": 3, "future_member": "ignored"}]}
    status = _reads.status_of(body)
    assert status == body and status["journal"] is None  # the dict it always was
    assert (status.pid, status.stopping) == (7, False)
    assert status.pools == [sandpool.PoolStatus(name="echo", state="running",
                                                task_types=["echo"], workers=2, queued=3)]
    workers = _reads.workers_of({"workers": [{"pool": "echo", "pid": 9, "state": "idle",
                                              "last_beat_ms": None}]})
    assert workers.workers[0].last_beat_ms is None and workers.pools == []
    stats = _reads.stats_of({"pools": [{"name": "echo", "state": "running",
                                        "latency_ms": {"p50": 1.5, "p90": None}}]})
    assert stats.pools[0].latency_ms["p50"] == 1.5


@pytest.mark.parametrize("body", [
    {"pid": "7"}, {"stopping": 1}, {"pools": {"name": "echo"}}, {"pools": ["echo"]},
    {"pools": [{"name": 3}]}, {"pools": [{"name": "e", "queued": True}]},
    {"pools": [{"name": "e", "task_types": "echo"}]}, {"pools": [{"name": "e", "workers": 1.5}]},
])
def test_a_read_reply_that_breaks_its_types_is_a_protocol_error(body):
    with pytest.raises(sandpool.ProtocolError, match="the reply's"):
        _reads.status_of(body)
