"""One connection to poold (docs/protocol.md, "Control protocol"): the socket after its
hello, and the reader thread that routes replies and events to the open requests by id.
sandpool.Client holds one at a time (client.py).
"""

from __future__ import annotations

import itertools
import logging
import socket
import threading
from typing import Optional

from . import _wire
from .errors import ProtocolError, SandpoolError, Timeout, TooLarge, Unavailable, error_for

_log = logging.getLogger("sandpool")


class Pending:
    __slots__ = ("on_event", "on_done", "holds_slot")

    def __init__(self, on_event, on_done, holds_slot):
        self.on_event = on_event  # (body, blob) -> None, on the reader thread; or None
        self.on_done = on_done  # (reply tuple or exception) -> None, exactly once
        self.holds_slot = holds_slot  # took one of the connection's max_outstanding


# Which connection's reader thread the current thread is (None on other threads).
reader_of = threading.local()


class Connection:
    """One socket to poold after its hello, with the reader thread that routes replies and
    events to the open requests by id. Once it ends (`broken` set: lost, closed by poold or
    by us) it stays ended; requests still open get the reason. Thread-safe."""

    def __init__(self, path: str, name: str, hello_timeout: Optional[float], max_frame: int,
                 max_outstanding: int):
        self._decoder = _wire.Decoder(max_frame)
        # Waited submits open at once; start() waits for a slot (Client's max_outstanding).
        self._slots = threading.Semaphore(max_outstanding)
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()  # guards _pending, broken
        self._pending: dict[int, Pending] = {}
        self._ids = itertools.count(2)  # the hello is 1, as the C++ client's
        self.broken: Optional[SandpoolError] = None
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(path)
        except OSError as e:
            self._sock.close()
            raise Unavailable(f"cannot connect to {path}: {e.strerror or e}") from None
        try:
            self.hello = self._handshake(name, hello_timeout)
        except BaseException:
            self._sock.close()
            raise
        self.server_max_frame: int = self.hello.get("max_frame", _wire.DEFAULT_MAX_FRAME)
        self.ended = threading.Event()  # set when the reader has stopped
        self._reader = threading.Thread(target=self._read_loop, name="sandpool-client",
                                        daemon=True)
        self._reader.start()

    def _handshake(self, name: str, timeout: Optional[float]) -> dict:
        hello = _wire.encode(_wire.HELLO, 1, body={"version": _wire.PROTOCOL_VERSION,
                                                   "client": name})
        # A server that refuses us (rights, connection limit) writes its error and closes
        # without reading, so the hello may fail with EPIPE while the answer waits unread.
        send_error = None
        try:
            self._sock.sendall(hello)
        except OSError as e:
            send_error = e
        self._sock.settimeout(timeout)
        try:
            frame = self._read_frame()
        except socket.timeout:
            raise Timeout(f"the service did not answer the hello within {timeout} s") from None
        except Unavailable:
            if send_error is not None:
                raise Unavailable(f"connection to the service lost: {send_error}") from None
            raise
        finally:
            self._sock.settimeout(None)
        if frame.kind == _wire.ERROR:
            raise error_for(frame.name, frame.json.get("message", ""))
        if frame.kind != _wire.OK or frame.id != 1:
            raise ProtocolError("the server did not answer the hello")
        return frame.json

    def _read_frame(self) -> _wire.Frame:
        while True:
            frame = self._decoder.next()
            if frame is not None:
                return frame
            try:
                data = self._sock.recv(1 << 16)
            except socket.timeout:
                raise
            except OSError as e:
                raise Unavailable(f"connection to the service lost: {e}") from None
            if not data:
                raise Unavailable("the service closed the connection")
            self._decoder.feed(data)

    def _read_loop(self) -> None:
        reader_of.connection = self
        try:
            self._route_frames()
        finally:
            self.ended.set()

    def _route_frames(self) -> None:
        while True:
            try:
                frame = self._read_frame()
            except SandpoolError as e:
                return self._fail_all(e)
            if frame.kind == _wire.ERROR and frame.id == 0:
                # A connection-level error ends every open request; the server closes.
                return self._fail_all(error_for(frame.name, frame.json.get("message", "")))
            with self._lock:
                pending = self._pending.get(frame.id)
                if pending is not None and frame.kind != _wire.EVENT:
                    del self._pending[frame.id]
            if pending is None:
                continue  # a request we gave up on (timed out, cancelled)
            if frame.kind != _wire.EVENT:
                self._release(pending)
            if frame.kind == _wire.EVENT:
                if pending.on_event is not None:
                    guarded(pending.on_event, frame.json, frame.blob)
            elif frame.kind == _wire.ERROR:
                pending.on_done(error_for(frame.name, frame.json.get("message", "")))
            else:
                pending.on_done((frame.json, frame.blob))

    def _fail_all(self, why: SandpoolError) -> None:
        with self._lock:
            if self.broken is None:
                self.broken = why
            pending, self._pending = self._pending, {}
        for p in pending.values():
            self._release(p)
            p.on_done(why)

    def _release(self, pending: Pending) -> None:
        if pending.holds_slot:
            self._slots.release()

    def close(self) -> None:
        with self._lock:
            if self.broken is None:
                self.broken = Unavailable("the client was closed")
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if self._reader is not threading.current_thread():
            self._reader.join()
        self._sock.close()
        self._fail_all(Unavailable("the client was closed"))

    def start(self, op: str, args: Optional[dict], blob: bytes, on_event, on_done,
              limited: bool = False) -> int:
        """Sends one request; returns its id. on_done gets the final reply or exception once,
        on the reader thread (or, if the connection ends first, from whoever ends it).
        limited: the request takes one of the max_outstanding slots, waiting for one."""
        request_id = next(self._ids)  # itertools.count: atomic under the GIL
        data = _wire.encode(_wire.REQUEST, request_id, op, args, blob)
        if len(data) - _wire.LENGTH_BYTES > self.server_max_frame:
            raise TooLarge(f"request of {len(data) - _wire.LENGTH_BYTES} bytes is over the "
                           f"server's limit of {self.server_max_frame}")
        # The reader thread never waits for a slot: only it frees them.
        holds_slot = limited and getattr(reader_of, "connection", None) is not self
        if holds_slot:
            self._slots.acquire()
        with self._lock:
            if self.broken is not None:
                if holds_slot:
                    self._slots.release()
                raise unusable(self.broken)
            self._pending[request_id] = Pending(on_event, on_done, holds_slot)
        try:
            with self._write_lock:
                self._sock.sendall(data)
        except OSError as e:
            if self.forget(request_id):  # else the reader has failed it already
                raise Unavailable(f"connection to the service lost: {e}") from None
        return request_id

    def forget(self, request_id: int) -> bool:
        """Drops an open request (its late reply will be ignored); returns true iff it was
        still open."""
        with self._lock:
            pending = self._pending.pop(request_id, None)
        if pending is None:
            return False
        self._release(pending)
        return True

    def cancel(self, request_id: int) -> None:
        """Sends a cancel frame: the server ends that open request with `cancelled`."""
        try:
            with self._write_lock:
                self._sock.sendall(_wire.encode(_wire.CANCEL, request_id))
        except OSError:
            pass  # a lost connection ends the request anyway


class HelloFacts:
    """What both clients tell of their connection's hello; a client class that has `_conn`
    (a connection with `hello` and `server_max_frame`) mixes it in."""

    @property
    def hello(self) -> dict:
        """The server's answer to the hello (version, server, rights, uid, gid, max_frame)."""
        return self._conn.hello

    @property
    def rights(self) -> str:
        """What poold granted this peer: "admin" or "read"."""
        return self._conn.hello.get("rights", "")

    @property
    def server_max_frame(self) -> int:
        """The largest request body poold takes (its hello's max_frame)."""
        return self._conn.server_max_frame


def unusable(why: SandpoolError) -> Unavailable:
    """The error for a request on a connection that has ended for `why`."""
    if isinstance(why, Unavailable):
        return Unavailable(str(why))
    return Unavailable(f"the connection ended: {why}")


def guarded(callback, *args) -> None:
    """Runs a user's callback (progress) on the reader thread; an exception it raises is
    logged, and the reader carries on delivering everyone else's replies."""
    try:
        callback(*args)
    except Exception:
        _log.exception("sandpool: a callback raised")
