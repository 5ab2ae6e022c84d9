"""The operations' arguments and replies (docs/protocol.md, "Operations"), defined once for
the threaded and the asyncio client: functions that build an op's JSON arguments, and the
typed values its reply decodes into. No I/O here.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Iterable, Optional, Union

from ._checked import bool_member, int_member, list_member, member, str_member
from .errors import ProtocolError, ServiceError, error_for

Payload = Union[bytes, bytearray, memoryview, str]
Duration = Union[int, float, datetime.timedelta]

TERMINAL_STATES = frozenset({"completed", "dead_lettered", "cancelled"})


def payload_bytes(payload: Payload) -> bytes:
    """A payload as bytes: str is encoded as UTF-8, bytes-likes are copied."""
    if isinstance(payload, str):
        return payload.encode()
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    raise TypeError(f"payload must be bytes or str, not {type(payload).__name__}")


def duration_ms(value: Duration, what: str) -> int:
    """Seconds (int, float) or a timedelta as the protocol's integer milliseconds, rounded up
    so that a positive duration never becomes 0."""
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(f"{what} must be seconds (int or float) or a timedelta")
    if seconds < 0 or math.isnan(seconds):
        raise ValueError(f"{what} must not be negative")
    return math.ceil(seconds * 1000)


# --- Submit -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One task of Client.submit_many() with options of its own; a field left None takes the
    batch's. (Plain bytes or str items of a batch take every option from the batch.) The
    options are submit_args()'s (`delay` or `not_before`: a scheduled task); test_operations.py
    holds them against the arguments a batch's task has in C++."""

    payload: Payload = b""
    type: Optional[str] = None
    pool: Optional[str] = None
    priority: Optional[int] = None
    timeout: Optional[Duration] = None
    retries: Optional[int] = None
    key: Optional[str] = None
    idempotency_key: Optional[str] = None
    tenant: Optional[str] = None
    delay: Optional[Duration] = None
    not_before: Optional[Union[datetime.datetime, int, float]] = None


# The Job fields that are submit_args() options (all but the payload and the type).
JOB_OPTIONS = tuple(f.name for f in fields(Job) if f.name not in ("payload", "type"))


def submit_args(type: Optional[str], *, pool=None, priority=None, timeout=None, retries=None,
                key=None, idempotency_key=None, tenant=None, delay=None, not_before=None,
                wait=False, progress=False, request_token=None) -> dict:
    """The JSON arguments of `submit` (and of one task of `submit_batch`). Only what is given
    is sent: the server's defaults (the pool's task_defaults) apply to the rest.

    `tenant`: fair queueing between tenants within a priority level (the pool's `tenants`,
    `queue.max_per_tenant`). `delay` (a duration) or `not_before` (a datetime, or seconds
    since the epoch): a scheduled task, queued only from then (docs/protocol.md, submit).
    `request_token` (submit only): the request's name, sent again unchanged on a retry."""
    args: dict[str, Any] = {}
    if type is not None:
        args["type"] = type
    if pool is not None:
        args["pool"] = pool
    if priority is not None:
        args["priority"] = priority
    if timeout is not None:
        args["timeout_ms"] = duration_ms(timeout, "timeout")
    if retries is not None:
        args["retries"] = retries
    if key is not None:
        args["key"] = key
    if idempotency_key is not None:
        args["idempotency_key"] = idempotency_key
    if tenant is not None:
        args["tenant"] = tenant
    if delay is not None:
        args["delay_ms"] = duration_ms(delay, "delay")
    if not_before is not None:
        seconds = not_before.timestamp() if hasattr(not_before, "timestamp") else not_before
        args["not_before_ms"] = int(seconds * 1000)
    if wait:
        args["wait"] = True
    if progress:
        args["progress"] = True
    if request_token is not None:
        args["request_token"] = request_token
    return args


@dataclass(frozen=True)
class Submitted:
    """A task the service accepted (a submit without wait, one entry of submit_many).
    In submit_many, `error` is the exception for a task that was refused (then `id` is 0)."""

    id: int
    existing: bool = False  # the idempotency key named an earlier task
    error: Optional[ServiceError] = None

    @property
    def accepted(self) -> bool:
        return self.error is None


def submitted_of(body: dict, _blob: bytes = b"") -> Submitted:
    """The reply of a submit without wait."""
    return Submitted(id=int_member(body, "id", required=True),
                     existing=bool_member(body, "existing"))


def waited_submit_events(on_accepted: Callable[[int], None],
                         progress: Optional[Callable[[int, bytes], None]]):
    """The event handler of a waited submit: its `accepted` event's id to on_accepted, its
    progress reports (task id, bytes) to `progress` when given. An event whose id is not an
    integer is dropped (the final reply still settles the request)."""

    def on_event(body: dict, blob: bytes) -> None:
        task_id = body.get("id")
        if not isinstance(task_id, int) or isinstance(task_id, bool):
            return
        if body.get("event") == "accepted":
            on_accepted(task_id)
        elif body.get("event") == "progress" and progress is not None:
            progress(task_id, blob)

    return on_event


def batch_request(type: Optional[str], payloads: Iterable[Union[Payload, Job]],
                  options: dict) -> tuple[dict, bytes, int]:
    """The arguments and blob of `submit_batch`, and the number of tasks. Shared options
    travel once (`defaults`); if any item is a Job with options of its own, every task gets
    its own object (`tasks`), as the protocol asks."""
    items = list(payloads)
    blobs: list[bytes] = []
    per_task: list[dict] = []
    shared = all(not isinstance(item, Job) for item in items)
    for item in items:
        if isinstance(item, Job):
            merged = dict(options)
            for name in JOB_OPTIONS:
                value = getattr(item, name)
                if value is not None:
                    merged[name] = value
            per_task.append(submit_args(item.type if item.type is not None else type, **merged))
            blobs.append(payload_bytes(item.payload))
        else:
            blobs.append(payload_bytes(item))
            if not shared:
                per_task.append(submit_args(type, **options))
    args: dict[str, Any] = {"payload_lens": [len(b) for b in blobs]}
    if shared:
        args["defaults"] = submit_args(type, **options)
    else:
        args["tasks"] = per_task
    return args, b"".join(blobs), len(items)


def batch_requests(type: Optional[str], payloads: Iterable[Union[Payload, Job]],
                   options: dict, max_body: int) -> list[tuple[dict, bytes, int]]:
    """The batch as submit_batch requests that each fit the server's max_frame (halved until
    they do; a single task too large for it stays alone, for the too_large refusal), in
    order: (arguments, blob, number of tasks) each."""
    from ._wire import body_len

    items = list(payloads)
    args, blob, count = batch_request(type, items, options)
    if count <= 1 or body_len("submit_batch", args, len(blob)) <= max_body:
        return [(args, blob, count)]
    half = count // 2
    return (batch_requests(type, items[:half], options, max_body) +
            batch_requests(type, items[half:], options, max_body))


def with_request_token(requests: list[tuple[dict, bytes, int]],
                       token: Optional[str]) -> list[tuple[dict, bytes, int]]:
    """Names each submit_batch request of a batch (batch_requests) for a safe retry: the one
    request `token`; when the batch was split, the request whose first task is the batch's
    task F `token@F` (so a retry of the same items, split the same way by the same
    max_frame, sends the same names)."""
    if token is None:
        return requests
    first = 0
    for args, _, count in requests:
        args["request_token"] = token if len(requests) == 1 else f"{token}@{first}"
        first += count
    return requests


def batch_replies(replies: Iterable[tuple[dict, int]], counts: list[int]) -> list[Submitted]:
    """Joins the replies of a batch's requests (batch_requests) into one Submitted per task.
    `replies` yields (reply body, tasks in that request), and is not read past a request
    whose tail was refused (`refused_from`): the tasks of the requests after it are refused
    for the same reason without being sent, so none overtakes a refused one."""
    out: list[Submitted] = []
    for body, count in replies:
        part = batch_reply(body, count)
        out.extend(part)
        if body.get("refused_from") is not None:
            out.extend(Submitted(id=0, error=part[-1].error)
                       for _ in range(sum(counts) - len(out)))
            break
    return out


def batch_reply(body: dict, count: int) -> list[Submitted]:
    """One Submitted per task of a submit_batch reply: `ids` for the tasks tried, `errors`
    for single refusals, `refused_from` for a tail refused without being tried."""
    ids = body.get("ids")
    if not isinstance(ids, list):
        raise ProtocolError("submit_batch reply: no ids")
    tried = count
    tail_error = None
    refused_from = body.get("refused_from")
    if refused_from is not None:
        tried = int(refused_from.get("index", 0))
        if tried > count:
            raise ProtocolError("submit_batch reply: refused_from beyond the batch")
        tail_error = refused_from
    if len(ids) != tried:
        raise ProtocolError("submit_batch reply does not list one id per task tried")
    existing = set(body.get("existing", []))
    errors = {e["index"]: e for e in body.get("errors", [])}
    out = []
    for i in range(count):
        refusal = errors.get(i) if i < tried else tail_error
        error = error_for(refusal["code"], refusal.get("message", "")) if refusal else None
        out.append(Submitted(id=ids[i] if i < tried and error is None else 0,
                             existing=i in existing, error=error))
    return out


# --- Task accounts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    number: int
    outcome: str  # ok, error, failed, timed_out, lost, sandbox_violation, ...
    error: str = ""
    worker_pid: int = 0
    started_ms: int = 0
    ended_ms: int = 0
    backtrace: str = ""


@dataclass(frozen=True)
class Task:
    """A task's account (reply of `task`, `wait`, a waited `submit`). `result` holds the result
    bytes of a completed task (b"" when none or when the peer may not read them:
    `result_withheld`). `raw` keeps the whole JSON, fields this client does not know
    included."""

    id: int
    type: str
    state: str  # queued, dispatched, running, retry_wait; completed, dead_lettered, cancelled
    reason: str = ""  # dead-letter or cancel reason
    error: str = ""
    attempts: int = 0
    history: tuple[Attempt, ...] = ()
    result: bytes = b""
    result_withheld: bool = False
    result_dropped: bool = False
    dead_letter_pending: bool = False
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def done(self) -> bool:
        """True iff the task is in a terminal state."""
        return self.state in TERMINAL_STATES

    @property
    def ok(self) -> bool:
        return self.state == "completed"

    def check(self) -> bytes:
        """Returns the result of a completed task; raises TaskFailed for any other state."""
        from .errors import TaskFailed

        if self.state != "completed":
            raise TaskFailed(self)
        return self.result


def task_of(body: dict, blob: bytes) -> Task:
    if "id" not in body or "state" not in body:
        raise ProtocolError("a task account needs id and state")
    history = tuple(
        Attempt(number=h.get("number", 0), outcome=h.get("outcome", ""),
                error=h.get("error", ""), worker_pid=h.get("worker_pid", 0),
                started_ms=h.get("started_ms", 0), ended_ms=h.get("ended_ms", 0),
                backtrace=h.get("backtrace", ""))
        for h in body.get("history", []))
    return Task(id=body["id"], type=body.get("type", ""), state=body["state"],
                reason=body.get("reason") or "", error=body.get("error", ""),
                attempts=body.get("attempts", 0), history=history, result=blob,
                result_withheld=bool(body.get("result_withheld")),
                result_dropped=bool(body.get("result_dropped")),
                dead_letter_pending=bool(body.get("dead_letter_pending")), raw=body)


@dataclass(frozen=True)
class CancelResult:
    id: int
    cancelled: bool  # False: the task was already terminal
    state: str


def cancel_of(body: dict, _blob: bytes = b"") -> CancelResult:
    return CancelResult(id=int_member(body, "id", required=True),
                        cancelled=member(body, "cancelled", bool, "a boolean", False, True),
                        state=str_member(body, "state", required=True))


# --- Events -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One event of the `events` stream. `event` is worker_started, worker_ready,
    worker_exited, attempt_ended or task_ended; fields that do not apply are None. `dropped`:
    how many events (of any pool) this stream lost just before this one."""

    event: str
    pool: str
    time_ms: int
    pid: Optional[int] = None
    task_id: Optional[int] = None
    attempt: Optional[int] = None
    attempts: Optional[int] = None
    outcome: Optional[str] = None
    state: Optional[str] = None
    reason: Optional[str] = None
    detail: Optional[str] = None
    dropped: Optional[int] = None
    raw: dict = field(default_factory=dict, repr=False, compare=False)


def event_of(body: dict) -> Event:
    if "event" not in body:
        raise ProtocolError("an event record needs `event`")
    return Event(event=body["event"], pool=body.get("pool", ""), time_ms=body.get("time_ms", 0),
                 pid=body.get("pid"), task_id=body.get("task_id"), attempt=body.get("attempt"),
                 attempts=body.get("attempts"), outcome=body.get("outcome"),
                 state=body.get("state"), reason=body.get("reason"), detail=body.get("detail"),
                 dropped=body.get("dropped"), raw=body)


def events_args(follow: bool, pool: Optional[str]) -> dict:
    args: dict[str, Any] = {"follow": bool(follow)}
    if pool is not None:
        args["pool"] = pool
    return args


# --- Dead letters -----------------------------------------------------------------------------


@dataclass(frozen=True)
class DeadLetter:
    """A dead letter: its task's account (`task`) and the letter's own fields. From dlq_show,
    also `payload` and the submit `options` the task had; from dlq_list, payload is None."""

    letter_id: int
    pool: str
    task: Task
    dead_lettered_ms: int = 0
    payload_bytes: int = 0
    payload: Optional[bytes] = None
    options: Optional[dict] = None

    @property
    def task_id(self) -> int:
        return self.task.id


@dataclass(frozen=True)
class DeadLetterPage:
    letters: list[DeadLetter]
    next_cursor: Optional[str]  # None on the last page


@dataclass(frozen=True)
class ReplayResult:
    ids: list[int]  # the replayed tasks (each keeps its task id)
    failed: int
    first_error: str = ""

    @property
    def replayed(self) -> int:
        return len(self.ids)


def letter_of(body: dict, payload: Optional[bytes] = None) -> DeadLetter:
    if "letter_id" not in body:
        raise ProtocolError("a dead letter needs letter_id")
    return DeadLetter(letter_id=body["letter_id"], pool=body.get("pool", ""),
                      task=task_of(body, b""), dead_lettered_ms=body.get("dead_lettered_ms", 0),
                      payload_bytes=body.get("payload_bytes", 0), payload=payload,
                      options=body.get("options"))


def dlq_filter(pool=None, type=None, reason=None, task_id=None, since_ms=None,
               until_ms=None) -> dict:
    given = {"pool": pool, "type": type, "reason": reason, "task_id": task_id,
             "since_ms": since_ms, "until_ms": until_ms}
    return {k: v for k, v in given.items() if v is not None}


def dlq_list_args(filter: dict, limit: int, cursor: Optional[str]) -> dict:
    args = dict(filter)
    args["limit"] = limit
    if cursor is not None:
        args["cursor"] = cursor
    return args


def dlq_page_of(body: dict, _blob: bytes = b"") -> DeadLetterPage:
    entries = list_member(body, "entries")
    if not all(isinstance(e, dict) for e in entries):
        raise ProtocolError("dlq_list reply: an entry is not an object")
    cursor = body.get("next_cursor")
    return DeadLetterPage(letters=[letter_of(e) for e in entries],
                          next_cursor=None if cursor is None else str_member(body, "next_cursor"))


def dlq_selector(letter_id: Optional[int], filter: dict, all: bool,
                 older_than: Optional[Duration] = None) -> dict:
    """The selector of dlq_replay / dlq_purge: exactly one of a letter id, a filter, an age
    (purge only) or all."""
    chosen = [letter_id is not None, bool(filter), older_than is not None, bool(all)]
    if sum(chosen) != 1:
        raise ValueError("give exactly one of a letter id, filter fields, older_than or all=True")
    if letter_id is not None:
        return {"id": letter_id}
    if filter:
        return {"filter": filter}
    if older_than is not None:
        return {"older_than_ms": duration_ms(older_than, "older_than")}
    return {"all": True}


def replay_of(body: dict, _blob: bytes = b"") -> ReplayResult:
    ids = list_member(body, "ids")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ProtocolError("dlq_replay reply: an id is not an integer")
    return ReplayResult(ids=ids, failed=int_member(body, "failed"),
                        first_error=str_member(body, "first_error"))


def purged_of(body: dict, _blob: bytes = b"") -> int:
    return int_member(body, "purged", required=True)


@dataclass(frozen=True)
class ImportResult:
    """The reply of `dlq_import`: letters written, and letters the store already held
    (skipped)."""

    imported: int
    already_present: int = 0


def dlq_import_args(source: Optional[str], first_line: Optional[int]) -> dict:
    args: dict[str, Any] = {}
    if source is not None:
        args["source"] = source
    if first_line is not None:
        args["first_line"] = first_line
    return args


def import_of(body: dict, _blob: bytes = b"") -> ImportResult:
    return ImportResult(imported=int_member(body, "imported"),
                        already_present=int_member(body, "already_present"))


# --- Task lists ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskSummary:
    """One task of a `tasks` listing: its state and attempts, without history or result.
    `tenant` is "" for the default tenant; `not_before_ms` is set for a scheduled task."""

    id: int
    pool: str
    type: str
    state: str
    reason: str = ""
    error: str = ""
    attempts: int = 0
    key: str = ""
    submitted_ms: int = 0
    tenant: str = ""
    not_before_ms: Optional[int] = None
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class TaskList:
    """The reply of `tasks`: the tasks found, newest first; `truncated` when more matched
    than the limit."""

    tasks: list[TaskSummary]
    truncated: bool = False


def task_list_args(pool=None, type=None, state=None, key=None, tenant=None, since_ms=None,
                   until_ms=None, limit=100) -> dict:
    given = {"pool": pool, "type": type, "state": state, "key": key, "tenant": tenant,
             "since_ms": since_ms, "until_ms": until_ms, "limit": limit}
    return {k: v for k, v in given.items() if v is not None}


def task_list_of(body: dict, _blob: bytes = b"") -> TaskList:
    tasks = []
    for entry in list_member(body, "tasks"):
        if not isinstance(entry, dict):
            raise ProtocolError("tasks reply: an entry is not an object")
        not_before = entry.get("not_before_ms")
        tasks.append(TaskSummary(
            id=int_member(entry, "id", required=True), pool=str_member(entry, "pool"),
            type=str_member(entry, "type"), state=str_member(entry, "state", required=True),
            reason=str_member(entry, "reason"), error=str_member(entry, "error"),
            attempts=int_member(entry, "attempts"), key=str_member(entry, "key"),
            submitted_ms=int_member(entry, "submitted_ms"), tenant=str_member(entry, "tenant"),
            not_before_ms=None if not_before is None else int_member(entry, "not_before_ms"),
            raw=entry))
    return TaskList(tasks=tasks, truncated=bool_member(body, "truncated"))
