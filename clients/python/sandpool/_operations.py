"""Every operation of the control protocol (docs/protocol.md, "Operations"; the C++ list is
`ops::AllOps` in <sandpool/control/control_ops.hpp>), defined once for both clients.

OPERATIONS has one row per operation: its wire name, the clients' method for it and the rights
it needs. Most rows also carry the method's definition: a function with the method's
signature and docstring (without `self`) that returns the Request to send, whose `parse`
turns the reply into the method's result. `with_operations` makes each such row a method of
sandpool.Client and of sandpool.aio.Client, so neither writes a request or parses a reply by
hand. The rest (submit, submit_batch, events) keep a method written in each client, because
they stream or send several requests; their arguments and replies are built in _ops.py all
the same. tests/test_operations.py holds both clients against this table, and the table
against the C++ list (ctest runs it with control_op_names).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import _controls, _ops, _reads
from ._ops import Duration, Payload


@dataclass(frozen=True)
class Request:
    """What a method sends: the JSON arguments and blob, how its reply (body, blob) becomes
    the method's result, and whether it waits for a task (then the client's call_timeout does
    not bound it)."""

    args: Optional[dict]
    parse: Callable[[dict, bytes], Any]
    blob: bytes = b""
    waits: bool = False


@dataclass(frozen=True)
class Operation:
    op: str  # the wire name
    method: str  # the name of the method both clients have for it
    rights: str  # "read" or "admin", as the server's table has it
    define: Optional[Callable[..., Request]] = None  # None: written in each client


OPERATIONS: list[Operation] = []


def _operation(op: str, rights: str, method: Optional[str] = None):
    """Registers the decorated function as the definition of `op`'s method."""

    def register(define: Callable[..., Request]) -> Callable[..., Request]:
        OPERATIONS.append(Operation(op, method or define.__name__, rights, define))
        return define

    return register


# --- Reads ------------------------------------------------------------------------------------


@_operation("version", "read")
def version() -> _reads.Version:
    """poold's release and protocol version: a dict {"version": ..., "protocol": 1} with
    both as attributes too."""
    return Request(None, _reads.version_of)


@_operation("status", "read")
def status() -> _reads.Status:
    """The service's state, as the JSON of docs/protocol.md `status` (a dict: the
    dead-letter store, the journal, ... by key), with `pid`, `started_ms`, `stopping` and
    `pools` (one PoolStatus each: state, workers, queued, in flight...) as attributes."""
    return Request(None, _reads.status_of)


@_operation("workers", "read")
def workers(pool: Optional[str] = None) -> _reads.Workers:
    """The workers (of one pool, or all) and each pool's worker target, as the JSON of
    docs/protocol.md `workers` (a dict), with `workers` (one WorkerInfo each) and `pools`
    (one PoolTarget each) as attributes."""
    return Request({"pool": pool} if pool else None, _reads.workers_of)


@_operation("stats", "read")
def stats(pool: Optional[str] = None) -> _reads.Stats:
    """The pools' counters and latencies (of one pool, or all), as the JSON of
    docs/protocol.md `stats` (a dict), with `pools` (one PoolStats each) as an
    attribute."""
    return Request({"pool": pool} if pool else None, _reads.stats_of)


@_operation("tasks", "read")
def tasks(*, pool: Optional[str] = None, type: Optional[str] = None,
          state: Optional[str] = None, key: Optional[str] = None, tenant: Optional[str] = None,
          since_ms: Optional[int] = None, until_ms: Optional[int] = None,
          limit: int = 100) -> _ops.TaskList:
    """The tasks the pools hold (open ones, and ended ones still kept) matching every filter
    given, newest first: at most `limit` (1..1000), `truncated` when more matched. `state`
    is a task state (queued, running, completed, ...); `tenant` "" is the default tenant's;
    since_ms/until_ms bound the submit time (ms since the epoch)."""
    return Request(_ops.task_list_args(pool, type, state, key, tenant, since_ms, until_ms, limit),
                   _ops.task_list_of)


@_operation("task", "read")
def task(task_id: int) -> _ops.Task:
    """The task's account as it is now (the result bytes once completed, for `admin`)."""
    return Request({"id": task_id}, _ops.task_of)


@_operation("wait", "read")
def wait(task_id: int, timeout: Optional[Duration] = None) -> _ops.Task:
    """The task's account once it ends; when `timeout` (seconds) passes first, as it is
    then (`done` False; the task goes on). None: until it ends; 0: at once. NotFound when
    no pool knows the id."""
    args: dict = {"id": task_id}
    if timeout is not None:
        args["timeout_ms"] = _ops.duration_ms(timeout, "timeout")
    return Request(args, _ops.task_of, waits=True)


# Streams and batches: a method written in each client (client.py, aio.py).
OPERATIONS.append(Operation("events", "events", "read"))
OPERATIONS.append(Operation("submit", "submit", "admin"))
OPERATIONS.append(Operation("submit_batch", "submit_many", "admin"))

# --- Tasks ------------------------------------------------------------------------------------


@_operation("cancel", "admin")
def cancel(task_id: int) -> _ops.CancelResult:
    """Cancels a task (queued, waiting for a retry, or running: its worker is told)."""
    return Request({"id": task_id}, _ops.cancel_of)


# --- Pool controls ----------------------------------------------------------------------------


@_operation("scale", "admin")
def scale(pool: str, workers: int) -> _controls.PoolState:
    """Sets the pool's worker target (within its workers.min..max, else BadRequest)."""
    return Request({"pool": pool, "workers": workers}, _controls.pool_state_of)


@_operation("strategy", "admin")
def strategy(pool: str, strategy: str) -> _controls.PoolState:
    """Sets the pool's dispatch strategy: round-robin, least-loaded, random or affinity."""
    return Request({"pool": pool, "strategy": strategy},
                   _controls.pool_state_of)


@_operation("drain", "admin")
def drain(pool: str) -> _controls.PoolState:
    """Stops the pool taking new tasks (submits get Closed); queued ones still run."""
    return Request({"pool": pool}, _controls.pool_state_of)


@_operation("resume", "admin")
def resume(pool: str) -> _controls.PoolState:
    """Lets a drained pool take tasks again."""
    return Request({"pool": pool}, _controls.pool_state_of)


@_operation("restart", "admin")
def restart(pool: str, *, rolling: bool = False) -> _controls.PoolState:
    """Replaces the pool's workers: all at once, or one by one (`rolling`)."""
    return Request({"pool": pool, "rolling": bool(rolling)},
                   _controls.pool_state_of)


@_operation("kill_worker", "admin")
def kill_worker(pool: str, pid: int, signal: Optional[int] = None) -> _controls.PoolState:
    """Sends `signal` (a number; SIGKILL when None) to one of the pool's workers; the pool
    replaces it. NotFound when the pool has no worker of that pid."""
    args: dict = {"pool": pool, "pid": pid}
    if signal is not None:
        args["signal"] = int(signal)
    return Request(args, _controls.pool_state_of)


# --- Dead letters -----------------------------------------------------------------------------


@_operation("dlq_list", "admin")
def dlq_list(*, pool: Optional[str] = None, type: Optional[str] = None,
             reason: Optional[str] = None, task_id: Optional[int] = None,
             since_ms: Optional[int] = None, until_ms: Optional[int] = None, limit: int = 100,
             cursor: Optional[str] = None) -> _ops.DeadLetterPage:
    """One page of dead letters, oldest first; pass `next_cursor` back for the next."""
    filter = _ops.dlq_filter(pool, type, reason, task_id, since_ms, until_ms)
    return Request(_ops.dlq_list_args(filter, limit, cursor),
                   _ops.dlq_page_of)


@_operation("dlq_show", "admin")
def dlq_show(letter_id: int) -> _ops.DeadLetter:
    """One letter with every attempt, its payload and its task's submit options."""
    return Request({"id": letter_id}, _ops.letter_of)


@_operation("dlq_replay", "admin")
def dlq_replay(letter_id: Optional[int] = None, *, all: bool = False,
               **filter) -> _ops.ReplayResult:
    """Submits dead-lettered tasks again, each to the pool named in its letter: one letter
    by id, the letters matching filter fields (pool, type, reason, task_id, since_ms,
    until_ms), or all=True."""
    return Request(_ops.dlq_selector(letter_id, _ops.dlq_filter(**filter), all),
                   _ops.replay_of)


@_operation("dlq_purge", "admin")
def dlq_purge(letter_id: Optional[int] = None, *, older_than: Optional[Duration] = None,
              all: bool = False, **filter) -> int:
    """Deletes dead letters (one, by filter, older than a duration, or all); returns how
    many."""
    return Request(_ops.dlq_selector(letter_id, _ops.dlq_filter(**filter), all, older_than),
                   _ops.purged_of)


@_operation("dlq_import", "admin")
def dlq_import(lines: Payload, *, source: Optional[str] = None,
               first_line: Optional[int] = None) -> _ops.ImportResult:
    """Loads dead letters from whole lines of a spill file (docs/dead-letters.md, "Spill
    files"), in one request: every line is checked before any is written, and a malformed
    one raises BadRequest naming `source` (default "request") and its line number
    (`first_line`, default 1, is the first line's). Letters the store holds already are
    skipped (`already_present`)."""
    return Request(_ops.dlq_import_args(source, first_line),
                   _ops.import_of, _ops.payload_bytes(lines))


# --- The service ------------------------------------------------------------------------------


@_operation("reload", "admin")
def reload() -> _controls.ReloadResult:
    """Reads poold's config file again and applies it (docs/operations.md, "Reload"): what
    changed, per pool. A config that does not load raises BadRequest naming the error; the
    old config stays."""
    return Request(None, _controls.reload_of)


@_operation("shutdown", "admin")
def shutdown(timeout: Optional[Duration] = None) -> bool:
    """Stops poold, giving its pools `timeout` (seconds; the configured shutdown_timeout
    when None) to finish their tasks. Returns True once the shutdown has begun; poold then
    closes every connection."""
    args = None if timeout is None else {"timeout_ms": _ops.duration_ms(timeout, "timeout")}
    return Request(args, _controls.stopping_of)


# --- Schedules (docs/schedules.md) -------------------------------------------------------------


def _body(body: dict, blob: bytes) -> dict:
    return body


@_operation("schedule_list", "read")
def schedule_list() -> list:
    """Every periodic schedule poold runs, by name: a list of dicts as schedule_show gives."""
    return Request(None, lambda body, blob: list(body.get("schedules", [])))


@_operation("schedule_show", "read")
def schedule_show(name: str) -> dict:
    """One schedule: its expression, zone, task template, next and last slot (Unix seconds),
    last task, last outcome, and the slots fired and skipped since poold started. NotFound
    for an unknown name."""
    return Request({"name": name}, _body)


@_operation("schedule_pause", "admin")
def schedule_pause(name: str) -> dict:
    """Stops the schedule firing its slots (until resumed, a restart of poold, or a reload
    that changes its `paused` key); returns it as schedule_show does."""
    return Request({"name": name}, _body)


@_operation("schedule_resume", "admin")
def schedule_resume(name: str) -> dict:
    """Fires the schedule's slots again, from the next one; returns it as schedule_show
    does."""
    return Request({"name": name}, _body)


@_operation("schedule_run_now", "admin")
def schedule_run_now(name: str) -> int:
    """Submits the schedule's task now, outside its slots; returns the task's id."""
    return Request({"name": name}, lambda body, blob: int(body["id"]))


@_operation("schedule_add", "admin")
def schedule_add(name: str, type: str, *, cron: Optional[str] = None,
                 every: Optional[str] = None, pool: Optional[str] = None, payload: str = "",
                 zone: Optional[str] = None, priority: Optional[int] = None,
                 timeout: Optional[Duration] = None, retries: Optional[int] = None,
                 key: Optional[str] = None, tenant: Optional[str] = None,
                 start_s: Optional[int] = None, end_s: Optional[int] = None,
                 catch_up: Optional[str] = None, overlap: Optional[str] = None,
                 paused: bool = False) -> dict:
    """Adds a schedule at run time, as one entry of the YAML's `schedules:` declares one
    (`cron` or `every`, one of them; `timeout` in seconds): kept in poold's state dir, so it
    survives a restart. BadRequest for a name the YAML declares or one that exists; returns
    it as schedule_show does."""
    args: dict = {"name": name, "type": type}
    for k, v in (("cron", cron), ("every", every), ("pool", pool), ("zone", zone),
                 ("priority", priority), ("retries", retries), ("key", key),
                 ("tenant", tenant), ("start_s", start_s), ("end_s", end_s),
                 ("catch_up", catch_up), ("overlap", overlap)):
        if v is not None:
            args[k] = v
    if payload:
        args["payload"] = payload
    if timeout is not None:
        args["timeout_ms"] = _ops.duration_ms(timeout, "timeout")
    if paused:
        args["paused"] = True
    return Request(args, _body)


@_operation("schedule_remove", "admin")
def schedule_remove(name: str) -> None:
    """Removes a schedule added at run time (one the YAML declares: BadRequest; edit the
    YAML and reload). NotFound for an unknown name."""
    return Request({"name": name}, lambda body, blob: None)


# --- Methods from the table -------------------------------------------------------------------


def with_operations(make_method: Callable[[Operation], Callable]):
    """A class decorator: adds make_method(row) as the method of every row with a
    definition, named, documented and with the signature of that definition."""

    def add(cls):
        for row in OPERATIONS:
            if row.define is None:
                continue
            method = make_method(row)
            method.__name__ = row.method
            method.__qualname__ = f"{cls.__name__}.{row.method}"
            method.__doc__ = row.define.__doc__
            method.__module__ = cls.__module__
            signature = inspect.signature(row.define)
            self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
            method.__signature__ = signature.replace(
                parameters=[self_param, *signature.parameters.values()])
            setattr(cls, row.method, method)
        return cls

    return add
