"""The control protocol's frames (docs/protocol.md, "Frames"): pure encoding and an
incremental decoder, no I/O, shared by the threaded and the asyncio client.

Every frame: u32 body_len, u8 kind, u8 flags (0), u16 name_len, u64 id, u32 json_len, then
the name, the JSON text and the blob. Little-endian throughout.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Optional

from .errors import ProtocolError, TooLarge

PROTOCOL_VERSION = 1

# Kinds (docs/protocol.md, the table under "Frames").
HELLO = 1
REQUEST = 2
CANCEL = 3
OK = 16
ERROR = 17
EVENT = 18

_HEADER = struct.Struct("<IBBHQI")  # body_len, kind, flags, name_len, id, json_len
LENGTH_BYTES = 4
FIXED_BODY_BYTES = _HEADER.size - LENGTH_BYTES  # 16
MAX_NAME_BYTES = 256
# What the C++ client accepts from a server by default (ClientOptions::max_frame): 16 MiB of
# result or payload plus 64 KiB for the rest.
DEFAULT_MAX_FRAME = (16 << 20) + 65536
# The kinds a server sends; anything else from it breaks the protocol.
_SERVER_KINDS = (OK, ERROR, EVENT)


@dataclass
class Frame:
    kind: int
    id: int
    name: str = ""
    json: dict = field(default_factory=dict)
    blob: bytes = b""


def encode(kind: int, frame_id: int, name: str = "", body: dict | None = None,
           blob: bytes = b"") -> bytes:
    """Returns the bytes of one frame. `body` None is sent as empty JSON (the server reads {})."""
    name_bytes = name.encode()
    if len(name_bytes) > MAX_NAME_BYTES:
        raise ValueError(f"frame name of {len(name_bytes)} bytes is over {MAX_NAME_BYTES}")
    text = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
    body_len = FIXED_BODY_BYTES + len(name_bytes) + len(text) + len(blob)
    if body_len > 0xFFFFFFFF:
        raise TooLarge(f"frame of {body_len} bytes does not fit the protocol's 32-bit length")
    return b"".join((_HEADER.pack(body_len, kind, 0, len(name_bytes), frame_id, len(text)),
                     name_bytes, text, bytes(blob)))


def body_len(name: str, body: Optional[dict], blob_len: int) -> int:
    """The body_len encode() would write for these parts (without encoding the blob)."""
    text = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
    return FIXED_BODY_BYTES + len(name.encode()) + len(text) + blob_len


class Decoder:
    """Frames out of a byte stream: feed() bytes as they arrive, then next() until it returns
    None. A server's frame that breaks the format raises ProtocolError; the connection cannot
    be trusted after that. Not thread-safe: one reader feeds it."""

    def __init__(self, max_body: int = DEFAULT_MAX_FRAME):
        self._max_body = max_body
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes) -> None:
        if self._pos and self._pos >= len(self._buf) // 2:
            del self._buf[:self._pos]
            self._pos = 0
        self._buf += data

    def next(self) -> Frame | None:
        avail = len(self._buf) - self._pos
        if avail < _HEADER.size:
            return None
        body_len, kind, flags, name_len, frame_id, json_len = _HEADER.unpack_from(
            self._buf, self._pos)
        if body_len < FIXED_BODY_BYTES:
            raise ProtocolError(f"the server sent a frame length {body_len} below the header")
        if body_len > self._max_body:
            raise ProtocolError(f"the server sent a frame of {body_len} bytes, over the "
                                f"client's max_frame of {self._max_body}")
        if avail < LENGTH_BYTES + body_len:
            return None
        start = self._pos + _HEADER.size
        self._pos += LENGTH_BYTES + body_len
        if kind not in _SERVER_KINDS:
            raise ProtocolError(f"the server sent a frame of kind {kind}")
        if flags != 0:
            raise ProtocolError(f"the server sent frame flags {flags}")
        if name_len > MAX_NAME_BYTES or FIXED_BODY_BYTES + name_len + json_len > body_len:
            raise ProtocolError("the server sent a frame whose sections exceed its length")
        end = self._pos
        name = bytes(self._buf[start:start + name_len]).decode(errors="replace")
        text = bytes(self._buf[start + name_len:start + name_len + json_len])
        blob = bytes(self._buf[start + name_len + json_len:end])
        try:
            body = json.loads(text) if text else {}
        except ValueError as e:
            raise ProtocolError(f"the server sent malformed JSON: {e}") from None
        if not isinstance(body, dict):
            raise ProtocolError("the server sent JSON that is not an object")
        return Frame(kind, frame_id, name, body, blob)
