"""Typed exceptions: one class per error code of the control protocol (docs/protocol.md,
"Errors"), plus the client's own (the service unreachable, a broken frame, a task that
did not complete).

Every server error is a ServiceError carrying `code` (the wire code, e.g. "queue_full") and
`message` (the server's text). Where a builtin exception means the same, the class derives
from it too, so `except TimeoutError` or `except PermissionError` also work.
"""

from __future__ import annotations


class SandpoolError(Exception):
    """Base of every exception this package raises."""


class Unavailable(SandpoolError, ConnectionError):
    """The service cannot be reached: no socket, connection refused, the connection lost or
    closed by the service, or the client closed. (The C++ client's kUnavailable; poolctl
    exits 3.) Requests that were open on a lost connection fail with this; a task that was
    accepted keeps running: wait() for it on a new connection. `task_id`: the task a waited
    submit had got accepted before the connection was lost, else None."""

    task_id = None


class ProtocolError(SandpoolError):
    """The server sent something the protocol does not allow (a broken frame, a reply that
    does not decode). The connection is closed."""


class ServiceError(SandpoolError):
    """An error frame from poold. `code` is the wire code; `message` the server's text."""

    code = "internal"

    def __init__(self, message: str = "", code: str | None = None):
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(f"{self.code}: {message}" if message else self.code)


class BadRequest(ServiceError, ValueError):
    """Malformed frame, JSON or arguments (the message names the field)."""

    code = "bad_request"


class UnknownOp(BadRequest):
    """No such operation on this server."""

    code = "unknown_op"


class UnsupportedVersion(ServiceError):
    """The server speaks another protocol version."""

    code = "unsupported_version"


class Forbidden(ServiceError, PermissionError):
    """The peer lacks the rights for the operation, or for the socket at all (then at
    connect). Payloads, results and every change need `admin` (docs/security.md)."""

    code = "forbidden"


class TooLarge(ServiceError):
    """A frame over the server's max_frame, or a payload over the pool's max_payload. Also
    raised by the client before sending a request the server's hello says is too large."""

    code = "too_large"


class NotFound(ServiceError, LookupError):
    """No such task, pool, worker or dead letter."""

    code = "not_found"


class Busy(ServiceError):
    """Too many outstanding requests, connections or streams for this peer."""

    code = "busy"


class QueueFull(ServiceError):
    """The pool's queue refused the task: back off and submit again."""

    code = "queue_full"


class Closed(ServiceError):
    """The service is shutting down, or the pool is draining, failed or removed."""

    code = "closed"


class Cancelled(ServiceError):
    """The request was cancelled (a stream closed, a wait given up)."""

    code = "cancelled"


class Timeout(ServiceError, TimeoutError):
    """A bounded wait ran out: the server's, or the client's own (hello_timeout,
    call_timeout; then the request was cancelled on the server)."""

    code = "timeout"


class Internal(ServiceError):
    """A bug in the service: a handler threw or dropped the request unanswered."""

    code = "internal"


class ServiceSystemError(ServiceError, OSError):
    """A system call failed on the service's side (the message names the call and errno);
    also a journal refusal (`storage: ...`)."""

    code = "system"


class PluginError(ServiceError):
    """A plugin that cannot be found, loaded or initialised."""

    code = "plugin"


class ServerProtocolError(ServiceError):
    """A handler's protocol error (wire code `protocol_error`)."""

    code = "protocol_error"


class TaskFailed(SandpoolError):
    """Raised by Task.check() (and the result of a future from Client.submit_async when asked
    to check): the task ended, but not `completed`. The operation itself worked; `task`
    holds the account (state, reason, error, history)."""

    def __init__(self, task):
        self.task = task
        why = task.reason or task.error or task.state
        super().__init__(f"task {task.id} {task.state}: {why}")


_BY_CODE: dict[str, type[ServiceError]] = {
    cls.code: cls
    for cls in (BadRequest, UnknownOp, UnsupportedVersion, Forbidden, TooLarge, NotFound, Busy,
                QueueFull, Closed, Cancelled, Timeout, Internal, ServiceSystemError,
                PluginError, ServerProtocolError)
}
# Codes the protocol lets a server send that poold does not (wire_errors.cpp).
_ALIASES = {"invalid_argument": BadRequest, "conflict": BadRequest, "unavailable": Closed}


def error_for(code: str, message: str) -> ServiceError:
    """The exception for a wire error code; an unknown code becomes Internal, keeping the
    code (as the C++ client maps it to kInternal)."""
    cls = _BY_CODE.get(code) or _ALIASES.get(code)
    if cls is None:
        return Internal(message, code=code)
    return cls(message, code=code)
