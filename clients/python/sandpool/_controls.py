"""The replies of the pool controls (scale, strategy, drain, resume, restart, kill_worker)
and of the service's administration (reload, shutdown), as typed values. No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._checked import bool_member, int_member, list_member, str_member
from .errors import ProtocolError


@dataclass(frozen=True)
class PoolState:
    """The reply of every pool control (scale, strategy, drain, resume, restart,
    kill_worker): the pool and its state once the control was taken (`running`,
    `draining`, ...). A new worker target shows in status()'s `target_workers` once the
    pool's loop has taken it."""

    pool: str
    state: str


def pool_state_of(body: dict, _blob: bytes = b"") -> PoolState:
    return PoolState(pool=str_member(body, "pool", required=True),
                     state=str_member(body, "state", required=True))


@dataclass(frozen=True)
class ReloadedPool:
    """A pool a reload reconfigured in place (`rolling_restart`: its workers are replaced
    one by one), rescaled (`workers`: the new target) or failed to start or reconfigure
    (`error`; it keeps running as it was)."""

    pool: str
    rolling_restart: bool = False
    workers: int = 0
    error: str = ""


@dataclass(frozen=True)
class ReloadResult:
    """The reply of `reload` (docs/operations.md, "Reload"): the pools added, removed,
    replaced, reconfigured, scaled, whose strategy changed, and that failed; and whether the
    service section changed in a way only a restart of poold applies."""

    added: list[str]
    removed: list[str]
    replaced: list[str]
    reconfigured: list[ReloadedPool]
    scaled: list[ReloadedPool]
    strategy_changed: list[str]
    failed: list[ReloadedPool]
    service_section_needs_restart: bool = False

    @property
    def ok(self) -> bool:
        """True iff no pool failed to start or reconfigure."""
        return not self.failed


def reload_of(body: dict, _blob: bytes = b"") -> ReloadResult:
    def names(key: str) -> list[str]:
        out = list_member(body, key)
        if not all(isinstance(n, str) for n in out):
            raise ProtocolError(f"reload reply: {key} holds a non-string")
        return out

    def pools(key: str) -> list[ReloadedPool]:
        out = []
        for e in list_member(body, key):
            if not isinstance(e, dict):
                raise ProtocolError(f"reload reply: an entry of {key} is not an object")
            out.append(ReloadedPool(pool=str_member(e, "pool", required=True),
                                    rolling_restart=bool_member(e, "rolling_restart"),
                                    workers=int_member(e, "workers"), error=str_member(e, "error")))
        return out

    return ReloadResult(added=names("added"), removed=names("removed"),
                        replaced=names("replaced"), reconfigured=pools("reconfigured"),
                        scaled=pools("scaled"), strategy_changed=names("strategy_changed"),
                        failed=pools("failed"),
                        service_section_needs_restart=bool_member(body,
                                                            "service_section_needs_restart"))


def stopping_of(body: dict, _blob: bytes = b"") -> bool:
    return bool_member(body, "stopping")
