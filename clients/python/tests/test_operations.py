"""Every operation of the protocol has a typed, documented method in both clients: the table
of operations (sandpool/_operations.py) against the C++ list `ops::AllOps`, as the
control_op_names program of this build prints it ("NAME RIGHTS" a line), and both client
classes against the table. An operation added to poold without a Python method fails here.
"""

import inspect
import os
import pathlib
import subprocess

import pytest

import sandpool
import sandpool.aio
from sandpool import _operations

REPO = pathlib.Path(__file__).resolve().parents[3]


def cpp_operations() -> dict[str, str]:
    """The operations of ops::AllOps and the rights each needs, from control_op_names."""
    program = os.environ.get("SANDPOOL_CONTROL_OP_NAMES",
                             str(REPO / "build" / "bin" / "control_op_names"))
    out = subprocess.run([program], check=True, capture_output=True, text=True).stdout
    ops = dict(line.split() for line in out.splitlines() if line.strip())
    assert len(ops) >= 20, f"control_op_names printed too few operations: {out!r}"
    return ops


def test_the_table_has_every_operation_of_the_cpp_list_with_its_rights():
    table = {row.op: row.rights for row in _operations.OPERATIONS}
    assert len(table) == len(_operations.OPERATIONS), "an operation is in the table twice"
    assert table == cpp_operations()


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
