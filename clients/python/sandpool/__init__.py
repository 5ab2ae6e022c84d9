"""A Python client for sandpool's poold (docs/protocol.md, "Control protocol").

    import sandpool
    with sandpool.Client("/run/sandpool/poold.sock") as client:
        task = client.submit("echo", b"hello")     # waits for the task to end
        print(task.state, task.result)

The asyncio variant is sandpool.aio.Client. Standard library only.
"""

from ._controls import PoolState, ReloadedPool, ReloadResult
from ._ops import (Attempt, CancelResult, DeadLetter, DeadLetterPage, Event, ImportResult, Job,
                   ReplayResult, Submitted, Task, TaskList, TaskSummary, TERMINAL_STATES)
from ._reads import (PoolStats, PoolStatus, PoolTarget, Stats, Status, Version, WorkerInfo,
                     Workers)
from .client import Client, EventStream, TaskFuture, default_socket_path
from .errors import (BadRequest, Busy, Cancelled, Closed, Forbidden, Internal, NotFound,
                     PluginError, ProtocolError, QueueFull, SandpoolError, ServerProtocolError,
                     ServiceError, ServiceSystemError, TaskFailed, Timeout, TooLarge, Unavailable,
                     UnknownOp, UnsupportedVersion)

__version__ = "0.1.0"

__all__ = [
    "Attempt", "BadRequest", "Busy", "CancelResult", "Cancelled", "Client", "Closed",
    "DeadLetter", "DeadLetterPage", "Event", "EventStream", "Forbidden", "ImportResult",
    "Internal", "Job", "NotFound", "PluginError", "PoolState", "PoolStats", "PoolStatus",
    "PoolTarget", "ProtocolError", "QueueFull", "ReloadResult", "ReloadedPool", "ReplayResult",
    "SandpoolError", "ServerProtocolError", "ServiceError", "ServiceSystemError", "Stats",
    "Status", "Submitted", "TERMINAL_STATES", "Task", "TaskFailed", "TaskFuture", "TaskList",
    "TaskSummary", "Timeout", "TooLarge", "Unavailable", "UnknownOp", "UnsupportedVersion",
    "Version", "WorkerInfo", "Workers", "default_socket_path",
]
