"""Checked reads of a reply's members, for the parsers of _ops.py and _controls.py: a reply is
the server's word, checked before it is believed, so a member of the wrong type is a
ProtocolError naming it, never a TypeError later in the caller's code.
"""

from __future__ import annotations

from .errors import ProtocolError


def member(body: dict, key: str, types, what: str, default, required: bool):
    if key not in body or body[key] is None:
        if required:
            raise ProtocolError(f"the reply lacks `{key}`")
        return default
    value = body[key]
    if not isinstance(value, types) or (types is int and isinstance(value, bool)):
        raise ProtocolError(f"the reply's `{key}` is not {what}")
    return value


def int_member(body: dict, key: str, required: bool = False) -> int:
    return member(body, key, int, "an integer", 0, required)


def str_member(body: dict, key: str, required: bool = False) -> str:
    return member(body, key, str, "a string", "", required)


def bool_member(body: dict, key: str) -> bool:
    return member(body, key, bool, "a boolean", False, False)


def list_member(body: dict, key: str) -> list:
    return list(member(body, key, list, "a list", [], False))
