"""The asyncio client of poold's control protocol: the same operations as sandpool.Client,
as coroutines over one pipelined connection (asyncio.open_unix_connection).

    async with await sandpool.aio.Client.connect(path) as client:
        tasks = await asyncio.gather(*(client.submit("echo", p) for p in payloads))

A reader task routes replies to the awaiting coroutines by request id, so any number of
requests may be outstanding. Use one Client from one event loop. Cancelling a coroutine that
awaits a reply cancels its request on the server (a waited submit: the wait ends, the task
goes on; cancel(task_id) cancels the task).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import AsyncIterator, Callable, Iterable, Optional, Union

from . import _operations, _ops, _wire
from ._ops import DeadLetter, Duration, Event, Job, Payload, Submitted, Task
from ._connection import HelloFacts, guarded, unusable
from .client import default_socket_path
from .errors import (Cancelled, ProtocolError, SandpoolError, Timeout, TooLarge, Unavailable,
                     error_for)

ProgressFn = Callable[[int, bytes], None]


class _Pending:
    __slots__ = ("future", "on_event", "holds_slot")

    def __init__(self, future: asyncio.Future, on_event, holds_slot: bool):
        self.future = future  # result: (body, blob); exception: the request's error
        self.on_event = on_event  # (body, blob) -> None, on the loop; or None
        self.holds_slot = holds_slot  # took one of the connection's max_outstanding


class _Connection:
    """One socket to poold after its hello, with the reader task that routes replies and
    events to the open requests by id. Once it ends (`broken` set) it stays ended; requests
    still open get the reason."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 hello: dict, decoder: _wire.Decoder, max_outstanding: int):
        self.hello = hello
        self.server_max_frame: int = hello.get("max_frame", _wire.DEFAULT_MAX_FRAME)
        self._reader = reader
        self._writer = writer
        self._decoder = decoder
        self._pending: dict[int, _Pending] = {}
        self._slots = asyncio.Semaphore(max_outstanding)  # waited submits open at once
        self._ids = itertools.count(2)
        self.broken: Optional[SandpoolError] = None
        self.read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(cls, path: str, name: str, hello_timeout: Optional[float],
                   max_frame: int, max_outstanding: int) -> "_Connection":
        try:
            reader, writer = await asyncio.open_unix_connection(path)
        except OSError as e:
            raise Unavailable(f"cannot connect to {path}: {e.strerror or e}") from None
        decoder = _wire.Decoder(max_frame)
        try:
            hello = await _handshake(reader, writer, decoder, name, hello_timeout)
        except BaseException:
            writer.close()
            raise
        return cls(reader, writer, hello, decoder, max_outstanding)

    async def close(self) -> None:
        if self.broken is None:
            self.broken = Unavailable("the client was closed")
        self._writer.close()
        self.read_task.cancel()
        try:
            await self.read_task
        except asyncio.CancelledError:
            pass
        try:
            await self._writer.wait_closed()
        except OSError:
            pass
        self._fail_all(Unavailable("the client was closed"))

    async def _read_loop(self) -> None:
        try:
            while True:
                frame = await _read_frame(self._reader, self._decoder)
                if frame.kind == _wire.ERROR and frame.id == 0:
                    return self._fail_all(error_for(frame.name, frame.json.get("message", "")))
                pending = self._pending.get(frame.id)
                if pending is None:
                    continue  # a request we gave up on
                if frame.kind == _wire.EVENT:
                    if pending.on_event is not None:
                        guarded(pending.on_event, frame.json, frame.blob)
                    continue
                del self._pending[frame.id]
                self._release(pending)
                if pending.future.done():
                    continue
                if frame.kind == _wire.ERROR:
                    pending.future.set_exception(
                        error_for(frame.name, frame.json.get("message", "")))
                else:
                    pending.future.set_result((frame.json, frame.blob))
        except SandpoolError as e:
            self._fail_all(e)

    def _fail_all(self, why: SandpoolError) -> None:
        if self.broken is None:
            self.broken = why
        pending, self._pending = self._pending, {}
        for p in pending.values():
            self._release(p)
            if not p.future.done():
                p.future.set_exception(why)

    def _release(self, pending: _Pending) -> None:
        if pending.holds_slot:
            self._slots.release()

    async def start(self, op: str, args: Optional[dict], blob: bytes, on_event=None,
                    limited: bool = False) -> tuple[int, asyncio.Future]:
        """Sends one request; returns its id and the future of its final reply. limited: it
        takes one of the max_outstanding slots, waiting for one."""
        request_id = next(self._ids)
        data = _wire.encode(_wire.REQUEST, request_id, op, args, blob)
        if len(data) - _wire.LENGTH_BYTES > self.server_max_frame:
            raise TooLarge(f"request of {len(data) - _wire.LENGTH_BYTES} bytes is over the "
                           f"server's limit of {self.server_max_frame}")
        if limited:
            await self._slots.acquire()
        if self.broken is not None:
            if limited:
                self._slots.release()
            raise unusable(self.broken)
        future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = _Pending(future, on_event, limited)
        try:
            self._writer.write(data)
            await self._writer.drain()
        except OSError as e:
            if self.forget(request_id):
                raise Unavailable(f"connection to the service lost: {e}") from None
        return request_id, future

    def forget(self, request_id: int) -> bool:
        """Drops an open request (a late reply is ignored); true iff it was still open."""
        pending = self._pending.pop(request_id, None)
        if pending is None:
            return False
        self._release(pending)
        return True

    def cancel(self, request_id: int) -> None:
        """Drops an open request and sends its cancel frame (the server answers `cancelled`,
        which nobody reads)."""
        self.forget(request_id)
        try:
            self._writer.write(_wire.encode(_wire.CANCEL, request_id))
        except (OSError, RuntimeError):
            pass  # a lost connection ends the request anyway


def _async_method(row: _operations.Operation):
    """The coroutine method of a row of the table of operations: sends its Request and awaits
    the reply (bounded by call_timeout unless the operation waits for a task)."""

    async def method(self: "Client", *args, **kwargs):
        request = row.define(*args, **kwargs)
        reply = await self._call(row.op, request.args, request.blob,
                                 timeout=None if request.waits else "call")
        return request.parse(*reply)

    return method


@_operations.with_operations(_async_method)
class Client(HelloFacts):
    """A client of poold for asyncio. Make one with `await Client.connect(path)`; close it
    with `await client.close()` or `async with`. Options as sandpool.Client, `reconnect`
    included: a call made after the connection ended opens a new one first."""

    def __init__(self, conn: _Connection, connect_args: tuple, call_timeout: Optional[float],
                 reconnect: bool):
        self.path = connect_args[0]
        self.call_timeout = call_timeout
        self.auto_reconnect = reconnect
        self._connect_args = connect_args
        self._conn = conn
        self._closed = False
        self._reconnecting = asyncio.Lock()

    @classmethod
    async def connect(cls, path: Optional[str] = None, *, name: str = "sandpool-python",
                      hello_timeout: Optional[float] = 10.0,
                      call_timeout: Optional[float] = None,
                      max_frame: int = _wire.DEFAULT_MAX_FRAME, reconnect: bool = True,
                      max_outstanding: int = 1024) -> "Client":
        path = path if path is not None else default_socket_path()
        connect_args = (path, name, hello_timeout, max_frame, max_outstanding)
        return cls(await _Connection.open(*connect_args), connect_args, call_timeout,
                   reconnect)

    async def reconnect(self) -> None:
        """Replaces the connection by a new one; requests open on the old one fail with
        Unavailable."""
        async with self._reconnecting:
            if self._closed:
                raise Unavailable("the client was closed")
            old, self._conn = self._conn, await _Connection.open(*self._connect_args)
        await old.close()

    async def _connection(self) -> _Connection:
        if self._closed:
            raise Unavailable("the client was closed")
        if self._conn.broken is not None and self.auto_reconnect:
            async with self._reconnecting:
                if self._conn.broken is not None and not self._closed:
                    old, self._conn = self._conn, await _Connection.open(*self._connect_args)
                    await old.close()
        return self._conn

    async def close(self) -> None:
        """Closes the connection; requests still open fail with Unavailable."""
        self._closed = True
        await self._conn.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- requests -----------------------------------------------------------------------------

    async def _start(self, op: str, args: Optional[dict], blob: bytes, on_event=None,
                     limited: bool = False) -> tuple[_Connection, int, asyncio.Future]:
        conn = await self._connection()
        request_id, future = await conn.start(op, args, blob, on_event, limited)
        return conn, request_id, future

    @staticmethod
    async def _await_reply(op: str, conn: _Connection, request_id: int,
                           future: asyncio.Future, timeout: Optional[float]) -> tuple:
        try:
            done, _ = await asyncio.wait({future}, timeout=timeout)
        except asyncio.CancelledError:
            conn.cancel(request_id)
            raise
        if not done:
            conn.cancel(request_id)
            raise Timeout(f"no reply to '{op}' within {timeout} s")
        return future.result()

    async def _call(self, op: str, args: Optional[dict] = None, blob: bytes = b"", *,
                    timeout: Union[float, None, str] = "call", on_event=None) -> tuple:
        if timeout == "call":
            timeout = self.call_timeout
        conn, request_id, future = await self._start(op, args, blob, on_event)
        return await self._await_reply(op, conn, request_id, future, timeout)

    async def call(self, op: str, args: Optional[dict] = None, blob: bytes = b"") -> tuple:
        """Any operation by name, with JSON arguments: its JSON reply and blob (as
        sandpool.Client.call)."""
        return await self._call(op, args, _ops.payload_bytes(blob))

    # --- tasks --------------------------------------------------------------------------------

    async def submit(self, type: str, payload: Payload = b"", *, pool: Optional[str] = None,
                     wait: bool = True, timeout: Optional[Duration] = None,
                     retries: Optional[int] = None, key: Optional[str] = None,
                     idempotency_key: Optional[str] = None, priority: Optional[int] = None,
                     tenant: Optional[str] = None, progress: Optional[ProgressFn] = None,
                     wait_timeout: Optional[Duration] = None, delay: Optional[Duration] = None,
                     not_before=None, request_token: Optional[str] = None) -> Union[Task, Submitted]:
        """As sandpool.Client.submit; `progress` is called on the event loop."""
        options = dict(pool=pool, priority=priority, timeout=timeout, retries=retries, key=key,
                       idempotency_key=idempotency_key, tenant=tenant, delay=delay,
                       not_before=not_before, request_token=request_token)
        data = _ops.payload_bytes(payload)
        if not wait:
            return _ops.submitted_of(*await self._call("submit", _ops.submit_args(type, **options),
                                                       data))
        future = await self.submit_async(type, data, **options, progress=progress)
        limit = None if wait_timeout is None else _ops.duration_ms(wait_timeout, "wait") / 1000
        try:
            done, _ = await asyncio.wait({future}, timeout=limit)
        except asyncio.CancelledError:
            future.cancel()  # ends the wait on poold; the task goes on
            raise
        if not done:
            future.cancel()
            if future.task_id is None:
                raise Timeout(f"the submit was not answered within {limit} s")
            return await self.wait(future.task_id, 0)
        return future.result()

    async def submit_async(self, type: str, payload: Payload = b"", *,
                           pool: Optional[str] = None, timeout: Optional[Duration] = None,
                           retries: Optional[int] = None, key: Optional[str] = None,
                           idempotency_key: Optional[str] = None, priority: Optional[int] = None,
                           tenant: Optional[str] = None,
                           progress: Optional[ProgressFn] = None,
                           delay: Optional[Duration] = None, not_before=None,
                           request_token: Optional[str] = None) -> "TaskFuture":
        """Sends a waited submit and returns once it is sent (past max_outstanding, once one
        ends): a TaskFuture, an asyncio future whose result is the task's Task once it ends.
        Cancelling the future ends the wait on poold, not the task. Options as submit()."""
        options = dict(pool=pool, priority=priority, timeout=timeout, retries=retries, key=key,
                       idempotency_key=idempotency_key, tenant=tenant, delay=delay,
                       not_before=not_before, request_token=request_token)
        future = TaskFuture()

        on_event = _ops.waited_submit_events(future._set_accepted, progress)

        args = _ops.submit_args(type, **options, wait=True, progress=progress is not None)
        conn, request_id, reply = await self._start("submit", args, _ops.payload_bytes(payload),
                                                    on_event, limited=True)
        future.request_id = request_id
        reply.add_done_callback(future._settle_from)
        future.add_done_callback(
            lambda f: conn.cancel(request_id) if f.cancelled() and not reply.done() else None)
        return future

    async def submit_many(self, type: Optional[str], payloads: Iterable[Union[Payload, Job]], *,
                          pool: Optional[str] = None, timeout: Optional[Duration] = None,
                          retries: Optional[int] = None, key: Optional[str] = None,
                          priority: Optional[int] = None,
                          tenant: Optional[str] = None,
                          request_token: Optional[str] = None) -> list[Submitted]:
        """As sandpool.Client.submit_many."""
        options = dict(pool=pool, priority=priority, timeout=timeout, retries=retries, key=key,
                       tenant=tenant)
        requests = _ops.with_request_token(
            _ops.batch_requests(type, payloads, options, self.server_max_frame), request_token)
        if requests[0][2] == 0:
            return []
        replies = []
        for args, blob, count in requests:
            body, _ = await self._call("submit_batch", args, blob)
            replies.append((body, count))
            if body.get("refused_from") is not None:
                break
        return _ops.batch_replies(replies, [count for _, _, count in requests])

    # --- events -------------------------------------------------------------------------------

    async def events(self, follow: bool = True, pool: Optional[str] = None) -> "EventStream":
        """The event stream (as sandpool.Client.events): `async for event in stream`;
        `await stream.aclose()` (or `async with`) ends it."""
        stream = EventStream(self)
        await stream._open(follow, pool)
        return stream

    # --- dead letters, page after page -------------------------------------------------------

    async def dlq_letters(self, **filter) -> AsyncIterator[DeadLetter]:
        cursor = None
        while True:
            page = await self.dlq_list(cursor=cursor, **filter)
            for letter in page.letters:
                yield letter
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    # Every other operation (task, wait, cancel, tasks, status, scale, drain, dlq_list,
    # reload, ...) is a coroutine method made from its row of _operations.OPERATIONS by the
    # class's decorator, with the signature and documentation of sandpool.Client's.


class TaskFuture(asyncio.Future):
    """The future of a waited submit (Client.submit_async): its result is the task's Task once
    the task ends; an error of the request is its exception. `task_id` is the task's id once
    poold accepted it, None before; `await future.accepted_id()` waits for it."""

    def __init__(self):
        super().__init__()
        self.task_id: Optional[int] = None
        self.request_id = 0  # the submit's request on its connection
        self._accepted = asyncio.Event()  # set once task_id is known or the future is done
        self.add_done_callback(lambda _: self._accepted.set())

    async def accepted_id(self) -> Optional[int]:
        """The task's id once poold accepted it; None when the submit failed first."""
        await self._accepted.wait()
        return self.task_id

    def _set_accepted(self, task_id: int) -> None:
        self.task_id = task_id
        self._accepted.set()

    def _settle_from(self, reply: asyncio.Future) -> None:
        """Takes the submit request's outcome: its final account, or its error (a lost
        connection's naming the accepted task)."""
        if self.done():
            return
        error = reply.exception()
        if error is None:
            try:
                self.set_result(_ops.task_of(*reply.result()))
            except SandpoolError as e:
                self.set_exception(e)
            return
        if isinstance(error, Unavailable) and self.task_id is not None:
            error = Unavailable(*error.args)
            error.task_id = self.task_id
        self.set_exception(error)


class EventStream:
    """An open `events` request on an asyncio Client: an async iterator of Event values."""

    def __init__(self, client: Client):
        self._client = client
        self._queue: asyncio.Queue = asyncio.Queue()
        self._closed = False
        self._connection: Optional[_Connection] = None
        self._id = 0
        self._future: Optional[asyncio.Future] = None

    async def _open(self, follow: bool, pool: Optional[str]) -> None:
        self._connection, self._id, self._future = await self._client._start(
            "events", _ops.events_args(follow, pool), b"",
            lambda body, _blob: self._queue.put_nowait(body))

    def __aiter__(self) -> "EventStream":
        return self

    async def __anext__(self) -> Event:
        if self._closed:
            raise StopAsyncIteration
        getter = asyncio.ensure_future(self._queue.get())
        done, _ = await asyncio.wait({getter, self._future}, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            return _ops.event_of(getter.result())
        getter.cancel()
        if not self._queue.empty():  # events that came before the final reply
            return _ops.event_of(self._queue.get_nowait())
        self._closed = True
        error = self._future.exception()
        if error is not None and not isinstance(error, Cancelled):
            raise error
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Ends the stream (a cancel frame); events not yet read are dropped."""
        if self._closed:
            return
        self._closed = True
        if not self._future.done():
            self._connection.cancel(self._id)

    async def __aenter__(self) -> "EventStream":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


async def _read_frame(reader: asyncio.StreamReader, decoder: _wire.Decoder) -> _wire.Frame:
    while True:
        frame = decoder.next()
        if frame is not None:
            return frame
        try:
            data = await reader.read(1 << 16)
        except OSError as e:
            raise Unavailable(f"connection to the service lost: {e}") from None
        if not data:
            raise Unavailable("the service closed the connection")
        decoder.feed(data)


async def _handshake(reader, writer, decoder: _wire.Decoder, name: str,
                     timeout: Optional[float]) -> dict:
    writer.write(_wire.encode(_wire.HELLO, 1, body={"version": _wire.PROTOCOL_VERSION,
                                                    "client": name}))
    # A refused peer's hello may fail to send while the refusal waits to be read.
    try:
        await writer.drain()
    except OSError:
        pass
    try:
        frame = await asyncio.wait_for(_read_frame(reader, decoder), timeout)
    except asyncio.TimeoutError:
        raise Timeout(f"the service did not answer the hello within {timeout} s") from None
    if frame.kind == _wire.ERROR:
        raise error_for(frame.name, frame.json.get("message", ""))
    if frame.kind != _wire.OK or frame.id != 1:
        raise ProtocolError("the server did not answer the hello")
    return frame.json
