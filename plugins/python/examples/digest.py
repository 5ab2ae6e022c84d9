"""Native libraries through the standard library's C modules: OpenSSL (hashlib) and zlib.

    plugin_config: {"handler": "digest:handle", "path": [".../python-examples"]}

The payload is any bytes; the result is one line per digest and the deflated size:
"sha256 <hex>", "blake2b <hex>", "crc32 <hex>", "deflated <n>".
"""
import hashlib
import zlib


def handle(payload: bytes) -> str:
    return "\n".join([
        "sha256 " + hashlib.sha256(payload).hexdigest(),
        "blake2b " + hashlib.blake2b(payload, digest_size=16).hexdigest(),
        "crc32 %08x" % zlib.crc32(payload),
        "deflated %d" % len(zlib.compress(payload, 6)),
    ])
