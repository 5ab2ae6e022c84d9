"""What the tests of the pool controls, `tasks`, `dlq_import`, `reload` and `shutdown`
(test_client_ops.py, test_aio_ops.py) share: a pool of their own to control, a spill-file
line, and a wait for a condition."""

from __future__ import annotations

import json
import time

from poold_server import PATIENCE, plugin

# A pool the controls may drain, scale and restart without touching the pools other tests
# use: the upper plugin (type `upper`), one to three workers.
CONTROLLED_POOL = f"""\
  - name: ctl
    plugin: {plugin("upper")}
    workers: {{min: 1, max: 3, initial: 1}}
"""

# A pool a reload adds to the default pools (poold_server.config_yaml), none of which serves
# the type `upper`: a server with CONTROLLED_POOL already serves it, so not one of those.
ADDED_POOL = f"""\
  - name: added
    plugin: {plugin("upper")}
    workers: {{initial: 1}}
"""


# Task ids for imported letters that no task of the test's poold can have: poold's ids count
# from the wall clock in ms times 1000, which stays below 2^51 until 2041 (and from 2^52 on
# an id names a Redis pool's task).
IMPORTED_TASK_ID = 2**51


def spill_line(task_id: int, pool: str = "fail", payload_base64: str = "eA==") -> str:
    """One line of a dead-letter spill file (docs/dead-letters.md, "Spill files")."""
    return json.dumps({
        "version": 1, "pool": pool, "task_id": task_id, "type": "fail",
        "reason": "retries_exhausted", "error": "imported by a test",
        "dead_lettered_ms": 1764122830123, "options": {"priority": 0, "key": ""},
        "attempts": [], "payload_base64": payload_base64}) + "\n"


def until(predicate, what: str):
    """Returns predicate()'s first true value, asking again until PATIENCE seconds pass
    (then fails naming `what`)."""
    deadline = time.monotonic() + PATIENCE
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {PATIENCE} s: {what}")
        time.sleep(0.02)
