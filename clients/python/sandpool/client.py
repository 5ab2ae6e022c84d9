"""The threaded client of poold's control protocol (docs/protocol.md, "Control protocol").

One Unix-socket connection at a time, pipelined: any number of requests may be outstanding
and their replies come back in any order, routed by request id by the connection's reader
thread. A call made after the connection ended opens a new one (Client's `reconnect`).

Thread-safety: every method may be called from any thread. Future callbacks
(`add_done_callback`) and progress callbacks run on the reader thread: they must not call the
client's synchronous methods (they would wait on the very thread that delivers the reply;
the client raises RuntimeError instead) and should return quickly.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import threading
from typing import Callable, Iterable, Iterator, Optional, Union

from . import _operations, _ops, _wire
from ._connection import Connection, HelloFacts, reader_of
from ._ops import DeadLetter, Duration, Event, Job, Payload, Submitted, Task
from .errors import Cancelled, SandpoolError, Timeout, Unavailable

ProgressFn = Callable[[int, bytes], None]
_Reply = tuple  # (body: dict, blob: bytes)


def default_socket_path() -> str:
    """The socket poolctl would use: $SANDPOOL_SOCKET, else ./var/poold.sock when it exists
    (the development config's), else /run/sandpool/poold.sock (docs/poolctl.md)."""
    env = os.environ.get("SANDPOOL_SOCKET")
    if env:
        return env
    if os.path.exists("./var/poold.sock"):
        return "./var/poold.sock"
    return "/run/sandpool/poold.sock"


class TaskFuture(concurrent.futures.Future):
    """A concurrent.futures.Future for a waited submit: its result is the task's Task once the
    task ends (an error of the request is its exception). `task_id` is the task's id once the
    service accepted it, None before. The future cannot be cancelled (the task is already
    submitted); to cancel the task, call Client.cancel(future.task_id)."""

    def __init__(self):
        super().__init__()
        self.task_id: Optional[int] = None
        self.request_id = 0  # the submit's request on its connection
        self._connection: Optional[Connection] = None
        self._accepted: Optional[threading.Event] = None  # made by accepted_id()
        self.set_running_or_notify_cancel()

    def accepted_id(self, timeout: Optional[float] = None) -> Optional[int]:
        """Waits until the service accepted the task (at most `timeout` seconds; None: no
        limit) and returns its id; None when the submit failed or the time ran out."""
        with _accepted_lock:
            if self.task_id is None and self._accepted is None:
                self._accepted = threading.Event()
                self.add_done_callback(lambda _: self._accepted.set())
            accepted = self._accepted
        if self.task_id is None:
            accepted.wait(timeout)
        return self.task_id

    def _set_accepted(self, task_id: int) -> None:
        with _accepted_lock:
            self.task_id = task_id
            accepted = self._accepted
        if accepted is not None:
            accepted.set()


# Guards TaskFuture._accepted, an Event made only for a caller of accepted_id(): one per
# future was an eighth of submit_async's sending time (docs/performance.md). (Not the
# Future's own condition: a notify on it ends a waiting result(timeout) early with
# TimeoutError.)
_accepted_lock = threading.Lock()


def _sync_method(row: _operations.Operation):
    """The method of a row of the table of operations: sends its Request and waits for the
    reply (bounded by call_timeout unless the operation waits for a task)."""

    def method(self: Client, *args, **kwargs):
        request = row.define(*args, **kwargs)
        reply = self._call(row.op, request.args, request.blob,
                           timeout=None if request.waits else "call")
        return request.parse(*reply)

    return method


@_operations.with_operations(_sync_method)
class Client(HelloFacts):
    """A client of poold. `Client(path)` connects and says hello; `rights` is what the
    server granted ("read" or "admin"). Use as a context manager, or call close().

    hello_timeout: seconds to wait for the server's answer to the hello (then Timeout).
    call_timeout: seconds each synchronous call waits for its reply (then Timeout, and the
    request is cancelled on the server); None: no limit. Waits for tasks (submit with wait,
    wait(), events()) are not bounded by it: they take their own timeouts.
    max_outstanding: waited submits (submit with wait, submit_async) open at once on the
    connection, each until its task ends; one past it waits until one ends, so a loop of
    submit_async does not run into poold's limit of requests per connection
    (connections.max_outstanding, 4096), which would refuse the excess `busy`.
    reconnect: a call made after the connection ended (poold's idle timeout, a restart, a
    lost socket) first opens a new one. Requests that were open on the old connection are
    never resent: they fail with Unavailable (a task already accepted goes on)."""

    def __init__(self, path: Optional[str] = None, *, name: str = "sandpool-python",
                 hello_timeout: Optional[float] = 10.0, call_timeout: Optional[float] = None,
                 max_frame: int = _wire.DEFAULT_MAX_FRAME, reconnect: bool = True,
                 max_outstanding: int = 1024):
        self.path = path if path is not None else default_socket_path()
        self.call_timeout = call_timeout
        self.auto_reconnect = reconnect
        self._connect_args = (self.path, name, hello_timeout, max_frame, max_outstanding)
        self._conn_lock = threading.Lock()  # guards _conn, _closed
        self._closed = False
        self._conn = Connection(*self._connect_args)

    def reconnect(self) -> None:
        """Replaces the connection by a new one; requests open on the old one fail with
        Unavailable."""
        with self._conn_lock:
            if self._closed:
                raise Unavailable("the client was closed")
            old, self._conn = self._conn, Connection(*self._connect_args)
        old.close()

    def _connection(self) -> Connection:
        """The connection to send on: a new one when the last has ended and reconnect is on."""
        with self._conn_lock:
            if self._closed:
                raise Unavailable("the client was closed")
            if self._conn.broken is not None and self.auto_reconnect:
                old, self._conn = self._conn, Connection(*self._connect_args)
                old.close()
            return self._conn

    def close(self) -> None:
        """Closes the connection; requests still open fail with Unavailable (the server
        cancels them; tasks already accepted keep running)."""
        with self._conn_lock:
            self._closed = True
            conn = self._conn
        conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- requests -----------------------------------------------------------------------------

    def _start(self, op: str, args: Optional[dict], blob: bytes, on_event, on_done,
               limited: bool = False) -> tuple[Connection, int]:
        conn = self._connection()
        return conn, conn.start(op, args, blob, on_event, on_done, limited)

    def _check_not_reader(self) -> None:
        conn = getattr(reader_of, "connection", None)
        if conn is not None and conn is self._conn:
            raise RuntimeError("a synchronous sandpool call from a callback on the client's "
                               "reader thread would wait on itself; use submit_async")

    def _call(self, op: str, args: Optional[dict] = None, blob: bytes = b"", *,
              timeout: Union[float, None, str] = "call", on_event=None) -> _Reply:
        """Sends a request and waits for its final reply (body, blob). timeout "call": the
        client's call_timeout; None: no limit."""
        self._check_not_reader()
        if timeout == "call":
            timeout = self.call_timeout
        done: concurrent.futures.Future = concurrent.futures.Future()
        conn, request_id = self._start(op, args, blob, on_event, _settle(done))
        if not _finished_within(done, timeout) and conn.forget(request_id):
            conn.cancel(request_id)
            raise Timeout(f"no reply to '{op}' within {timeout} s")
        return done.result()

    def call(self, op: str, args: Optional[dict] = None, blob: bytes = b"") -> _Reply:
        """Any operation of docs/protocol.md by name, with JSON arguments: its JSON reply and
        blob, or the typed exception of its error. (Every operation has a typed method too;
        this is for one a newer poold adds, or arguments the methods do not send.)"""
        return self._call(op, args, _ops.payload_bytes(blob))

    # --- tasks --------------------------------------------------------------------------------

    def submit(self, type: str, payload: Payload = b"", *, pool: Optional[str] = None,
               wait: bool = True, timeout: Optional[Duration] = None,
               retries: Optional[int] = None, key: Optional[str] = None,
               idempotency_key: Optional[str] = None, priority: Optional[int] = None,
               tenant: Optional[str] = None, progress: Optional[ProgressFn] = None,
               wait_timeout: Optional[Duration] = None, delay: Optional[Duration] = None,
               not_before=None, request_token: Optional[str] = None) -> Union[Task, Submitted]:
        """Submits one task of `type` (routed to the pool serving it, or to `pool`).

        wait=True (the default): returns the task's Task once it ends (check `state`, or call
        `.check()` for the result bytes); `progress(task_id, bytes)` gets the task's progress
        reports on the reader thread. `wait_timeout` (seconds) bounds the wait: then the Task
        as it is (`done` False; the task keeps running). wait=False: returns Submitted (its id)
        once the service accepted the task.

        timeout: the task's own timeout (seconds or timedelta; the pool's default when None).
        retries: how many retries after a failed attempt. key: the affinity key (the
        `affinity` strategy sends equal keys to one worker). idempotency_key: a resubmit with
        the same key returns the earlier task (`existing`). priority: higher runs first.
        tenant: whom the task is for (fair queueing between tenants, the pool's
        queue.max_per_tenant). delay (seconds or timedelta) or not_before (a datetime, or
        seconds since the epoch): a scheduled task, `scheduled` until then, then queued.
        request_token: this request's name; after a Timeout whose message says "outcome
        unknown" (a Redis pool's submit whose reply was lost: the task may exist), submit
        again with the same token to get the task the first try made, if it made one,
        instead of a second task.

        If the connection is lost after the task was accepted, the Unavailable raised carries
        `task_id`: wait(task_id) on a new Client."""
        options = dict(pool=pool, priority=priority, timeout=timeout, retries=retries, key=key,
                       idempotency_key=idempotency_key, tenant=tenant, delay=delay,
                       not_before=not_before, request_token=request_token)
        data = _ops.payload_bytes(payload)
        if not wait:
            return _ops.submitted_of(*self._call("submit", _ops.submit_args(type, **options),
                                                 data))
        self._check_not_reader()
        future = self._submit_waited(type, data, options, progress)
        limit = None if wait_timeout is None else _ops.duration_ms(wait_timeout, "wait") / 1000
        if not _finished_within(future, limit):
            future._connection.cancel(future.request_id)  # ends this wait; the task goes on
            if future.task_id is None:
                raise Timeout(f"the submit was not answered within {limit} s")
            return self.wait(future.task_id, 0)
        return future.result()

    def submit_async(self, type: str, payload: Payload = b"", *, pool: Optional[str] = None,
                     timeout: Optional[Duration] = None, retries: Optional[int] = None,
                     key: Optional[str] = None, idempotency_key: Optional[str] = None,
                     priority: Optional[int] = None, tenant: Optional[str] = None,
                     progress: Optional[ProgressFn] = None, delay: Optional[Duration] = None,
                     not_before=None, request_token: Optional[str] = None) -> TaskFuture:
        """Submits a task and returns a TaskFuture whose result is the task's Task once it
        ends. Many may be outstanding on the one connection (pipelined; past max_outstanding,
        this waits until one ends); use concurrent.futures.wait / as_completed on them.
        Options as submit()."""
        options = dict(pool=pool, priority=priority, timeout=timeout, retries=retries, key=key,
                       idempotency_key=idempotency_key, tenant=tenant, delay=delay,
                       not_before=not_before, request_token=request_token)
        return self._submit_waited(type, _ops.payload_bytes(payload), options, progress)

    def _submit_waited(self, type: str, data: bytes, options: dict,
                       progress: Optional[ProgressFn]) -> TaskFuture:
        future = TaskFuture()

        on_event = _ops.waited_submit_events(future._set_accepted, progress)

        def on_done(reply) -> None:
            if isinstance(reply, BaseException):
                if isinstance(reply, Unavailable) and future.task_id is not None:
                    reply = Unavailable(*reply.args)
                    reply.task_id = future.task_id
                future.set_exception(reply)
                return
            try:
                future.set_result(_ops.task_of(*reply))
            except SandpoolError as e:
                future.set_exception(e)

        args = _ops.submit_args(type, **options, wait=True, progress=progress is not None)
        future._connection, future.request_id = self._start("submit", args, data, on_event,
                                                             on_done, limited=True)
        return future

    def submit_many(self, type: Optional[str], payloads: Iterable[Union[Payload, Job]], *,
                    pool: Optional[str] = None, timeout: Optional[Duration] = None,
                    retries: Optional[int] = None, key: Optional[str] = None,
                    priority: Optional[int] = None,
                    tenant: Optional[str] = None,
                    request_token: Optional[str] = None) -> list[Submitted]:
        """Submits many tasks in one request (`submit_batch`; several, in order, when the
        batch is over the server's max_frame): one Submitted per payload, in order, with
        `error` set for a task the service refused (a full queue refuses the rest of the
        batch: resubmit that tail, in order). Items are payloads sharing every option, or Job
        values carrying options of their own (then `type` may be None if each Job names its
        type). Does not wait for the tasks: wait(id) or task(id) for them.

        request_token: this batch's name, as submit's: after a Timeout ("outcome unknown", a
        Redis pool's submit whose reply was lost) or a lost connection, call again with the
        same items and token and each task the first try made comes back (`existing`), the
        others are made (a batch over max_frame goes as several requests, named token@F,
        F the index of each one's first task)."""
        options = dict(pool=pool, priority=priority, timeout=timeout, retries=retries, key=key,
                       tenant=tenant)
        requests = _ops.with_request_token(
            _ops.batch_requests(type, payloads, options, self.server_max_frame), request_token)
        if requests[0][2] == 0:
            return []
        replies = ((self._call("submit_batch", args, blob)[0], count)
                   for args, blob, count in requests)
        return _ops.batch_replies(replies, [count for _, _, count in requests])

    # --- events -------------------------------------------------------------------------------

    def events(self, follow: bool = True, pool: Optional[str] = None) -> "EventStream":
        """The service's task and worker events: the last 256, then (follow) new ones as they
        happen, until the stream is closed. Iterate it; close it (or use `with`) to stop."""
        return EventStream(self, follow, pool)

    # --- dead letters, page after page -------------------------------------------------------

    def dlq_letters(self, **filter) -> Iterator[DeadLetter]:
        """Every dead letter matching the filter (dlq_list's arguments), page after page."""
        cursor = None
        while True:
            page = self.dlq_list(cursor=cursor, **filter)
            yield from page.letters
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    # Every other operation (task, wait, cancel, tasks, status, scale, drain, dlq_list,
    # reload, ...) is a method made from its row of _operations.OPERATIONS by the class's
    # decorator: help(Client.scale) shows its signature and documentation.


class EventStream:
    """An open `events` request: iterate it for Event values. close() cancels the stream on
    the server (and ends the iteration); a stream without follow ends by itself after the
    recent events. Events wait in an unbounded queue until read."""

    _END = object()

    def __init__(self, client: Client, follow: bool, pool: Optional[str]):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._finished = False
        client._check_not_reader()
        self._connection, self._id = client._start("events", _ops.events_args(follow, pool),
                                                   b"", self._on_event, self._on_done)

    def _on_event(self, body: dict, _blob: bytes) -> None:
        self._queue.put(body)

    def _on_done(self, reply) -> None:
        self._queue.put((self._END, reply))

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Event:
        event = self.get()
        if event is None:
            raise StopIteration
        return event

    def get(self, timeout: Optional[float] = None) -> Optional[Event]:
        """The next event; None once the stream ended. With `timeout` (seconds), raises
        Timeout when no event came in that time (the stream stays open)."""
        if self._finished:
            return None
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise Timeout(f"no event within {timeout} s") from None
        if isinstance(item, tuple) and item[0] is self._END:
            self._finished = True
            reply = item[1]
            if isinstance(reply, BaseException):
                if isinstance(reply, Cancelled) and self._closed:
                    return None
                raise reply
            return None
        return _ops.event_of(item)

    def close(self) -> None:
        """Ends the stream (a cancel frame); events not yet read are dropped."""
        if self._closed:
            return
        self._closed = True
        if not self._finished:
            self._connection.cancel(self._id)
            self._finished = True

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _settle(future: concurrent.futures.Future):
    def on_done(reply) -> None:
        if isinstance(reply, BaseException):
            future.set_exception(reply)
        else:
            future.set_result(reply)

    return on_done


def _finished_within(future: concurrent.futures.Future, timeout: Optional[float]) -> bool:
    """Returns true iff the future is done within `timeout` seconds (None: waits for it).
    (Not future.result(timeout): a Timeout error from the server is a TimeoutError too.)"""
    done, _ = concurrent.futures.wait([future], timeout)
    return bool(done)
