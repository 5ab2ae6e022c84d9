"""The replies of the reads (`version`, `status`, `workers`, `stats`; docs/protocol.md) as
typed values that stay the JSON they were: each reply is a dict (as these methods always
returned, so `status()["pools"]` and json.dumps(status()) keep working) with attributes for
its members, the lists of pools and workers as dataclasses. Every member read is checked
against its type first: a reply that breaks it raises ProtocolError at the call.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass, field
from typing import Optional

from .errors import ProtocolError


@dataclass(frozen=True)
class PoolStatus:
    """One pool in `status`."""

    name: str
    state: str
    dispatch: str = ""
    task_types: list[str] = field(default_factory=list)
    workers: int = 0
    target_workers: int = 0
    queued: int = 0
    in_flight: int = 0
    scheduled: int = 0
    throttled: int = 0


@dataclass(frozen=True)
class WorkerInfo:
    """One worker in `workers`. `slot`: 0..workers-1 (a replacement takes the slot of the
    worker it replaces); `restarts`: how many workers ran in that slot before this one;
    `last_beat_ms` None before its first heartbeat."""

    pool: str
    pid: int
    state: str
    slot: int = 0
    in_flight: int = 0
    tasks_done: int = 0
    uptime_ms: int = 0
    rss_bytes: int = 0
    cpu_ms: int = 0
    last_beat_ms: Optional[int] = None
    restarts: int = 0
    isolation: str = ""


@dataclass(frozen=True)
class PoolTarget:
    """A pool's worker target in `workers`, its bounds, and why it is what it is."""

    pool: str
    target_workers: int = 0
    min: int = 0
    max: int = 0
    autoscale: bool = False
    reason: str = ""


@dataclass(frozen=True)
class PoolStats:
    """One pool's counters in `stats`. `latency_ms` (p50, p90, p99, end to end) and
    `queue_wait_ms` (p50, p99, submit to first dispatch) hold None where no task was
    measured; `tenants` the tenants with the most tasks waiting ({tenant, waiting})."""

    name: str
    state: str
    submitted: int = 0
    completed: int = 0
    dead_lettered: int = 0
    cancelled: int = 0
    retried: int = 0
    lost: int = 0
    restarts: int = 0
    recycled: int = 0
    expired: int = 0
    heartbeat_kills: int = 0
    output_dropped: int = 0
    letters_pending: int = 0
    crash_loop: bool = False
    queued: int = 0
    in_flight: int = 0
    retry_wait: int = 0
    scheduled: int = 0
    throttled: int = 0
    workers: int = 0
    target_workers: int = 0
    latency_ms: dict = field(default_factory=dict)
    queue_wait_ms: dict = field(default_factory=dict)
    tenants: list[dict] = field(default_factory=list)


class Version(dict):
    """The reply of `version`: `version` (poold's release) and `protocol`."""

    version: str
    protocol: int


class Status(dict):
    """The reply of `status`, as its JSON, with `pid`, `started_ms`, `stopping` and `pools`
    (one PoolStatus each) as attributes; the rest (dead_letter_store, journal, ...) by key."""

    pid: int
    started_ms: int
    stopping: bool
    pools: list[PoolStatus]


class Workers(dict):
    """The reply of `workers`, as its JSON, with `workers` (one WorkerInfo each) and `pools`
    (one PoolTarget per pool asked about) as attributes."""

    workers: list[WorkerInfo]
    pools: list[PoolTarget]


class Stats(dict):
    """The reply of `stats`, as its JSON, with `pools` (one PoolStats each) as an
    attribute."""

    pools: list[PoolStats]


def version_of(body: dict, _blob: bytes = b"") -> Version:
    return _typed(Version, body)


def status_of(body: dict, _blob: bytes = b"") -> Status:
    return _typed(Status, body)


def workers_of(body: dict, _blob: bytes = b"") -> Workers:
    return _typed(Workers, body)


def stats_of(body: dict, _blob: bytes = b"") -> Stats:
    return _typed(Stats, body)


def _typed(cls, body: dict):
    """The reply as a `cls` (a dict of the same members) with each member `cls` annotates
    set as an attribute, checked against its type (absent: its type's empty value)."""
    reply = cls(body)
    for name, hint in typing.get_type_hints(cls).items():
        setattr(reply, name, _value(hint, body.get(name), cls.__name__ + "." + name))
    return reply


def _record(cls, body, where: str):
    if not isinstance(body, dict):
        raise ProtocolError(f"the reply's {where} is not an object")
    values = {}
    for f in dataclasses.fields(cls):
        value = body.get(f.name)
        if value is None and f.default is not dataclasses.MISSING:
            values[f.name] = f.default
        elif value is None and f.default_factory is not dataclasses.MISSING:
            values[f.name] = f.default_factory()
        else:
            values[f.name] = _value(_hints(cls)[f.name], value, f"{where}.{f.name}")
    return cls(**values)


@functools.cache
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _value(hint, value, where: str):
    """`value` checked against the type `hint` (int, float, str, bool, dict, Optional[X],
    list[X], a dataclass); None where the reply lacks it becomes the type's empty value."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:  # Optional[X]
        return None if value is None else _value(args[0], value, where)
    if origin is list:
        if value is None:
            return []
        if not isinstance(value, list):
            raise ProtocolError(f"the reply's {where} is not a list")
        return [_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if dataclasses.is_dataclass(hint):
        return _record(hint, value, where)
    empty = {int: 0, float: 0.0, str: "", bool: False, dict: {}}
    if value is None:
        if hint not in empty:
            raise ProtocolError(f"the reply lacks {where}")
        return type(empty[hint])() if hint is dict else empty[hint]
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ProtocolError(f"the reply's {where} is not {hint.__name__}")
    return value
