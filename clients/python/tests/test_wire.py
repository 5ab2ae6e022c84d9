"""The frame codec and the error table, without a server."""

import pathlib
import re
import struct

import pytest

import sandpool
from sandpool import _ops, _wire
from sandpool.errors import error_for

PROTOCOL_MD = pathlib.Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


def test_a_frame_round_trips_through_the_decoder_fed_byte_by_byte():
    data = _wire.encode(_wire.OK, 7, "", {"id": 7, "state": "completed"}, b"\x00result")
    # The header as docs/protocol.md lays it out.
    body_len, kind, flags, name_len, frame_id, json_len = struct.unpack_from("<IBBHQI", data)
    assert (kind, flags, name_len, frame_id) == (_wire.OK, 0, 0, 7)
    assert body_len == len(data) - 4 and json_len == len(b'{"id":7,"state":"completed"}')
    decoder = _wire.Decoder()
    frames = []
    for i in range(len(data)):
        decoder.feed(data[i:i + 1])
        frame = decoder.next()
        if frame is not None:
            frames.append(frame)
    assert len(frames) == 1
    assert (frames[0].id, frames[0].json, frames[0].blob) == (7, {"id": 7, "state": "completed"},
                                                              b"\x00result")


def test_empty_json_reads_as_an_empty_object_and_names_travel():
    decoder = _wire.Decoder()
    decoder.feed(_wire.encode(_wire.ERROR, 3, "queue_full") + _wire.encode(_wire.EVENT, 4))
    first, second = decoder.next(), decoder.next()
    assert (first.kind, first.name, first.json) == (_wire.ERROR, "queue_full", {})
    assert (second.kind, second.id) == (_wire.EVENT, 4)
    assert decoder.next() is None


@pytest.mark.parametrize("frame, why", [
    (struct.pack("<IBBHQI", 8, 16, 0, 0, 1, 0), "below the header"),
    (struct.pack("<IBBHQI", 16, 2, 0, 0, 1, 0), "kind 2"),
    (struct.pack("<IBBHQI", 16, 16, 1, 0, 1, 0), "flags"),
    (struct.pack("<IBBHQI", 16, 16, 0, 4, 1, 0), "exceed its length"),
    (struct.pack("<IBBHQI", 18, 16, 0, 0, 1, 2) + b"[]", "not an object"),
    (struct.pack("<IBBHQI", 17, 16, 0, 0, 1, 1) + b"{", "malformed JSON"),
])
def test_a_broken_server_frame_is_a_protocol_error(frame, why):
    decoder = _wire.Decoder()
    decoder.feed(frame)
    with pytest.raises(sandpool.ProtocolError, match=why):
        decoder.next()


def test_a_server_frame_over_max_frame_is_refused_from_its_header():
    decoder = _wire.Decoder(max_body=100)
    decoder.feed(struct.pack("<IBBHQI", 101, 16, 0, 0, 1, 0))
    with pytest.raises(sandpool.ProtocolError, match="max_frame"):
        decoder.next()


def test_every_error_code_of_the_protocol_has_its_exception():
    section = PROTOCOL_MD.read_text().split("### Errors", 1)[1].split("###", 1)[0]
    codes = re.findall(r"^\| `([a-z_]+)` \|", section, re.MULTILINE)
    assert len(codes) >= 15, codes
    for code in codes:
        error = error_for(code, "why")
        assert isinstance(error, sandpool.ServiceError)
        assert error.code == code and error.message == "why"
        assert type(error) is not sandpool.Internal or code == "internal", code
    assert isinstance(error_for("unavailable", ""), sandpool.Closed)
    assert isinstance(error_for("conflict", ""), sandpool.BadRequest)
    unknown = error_for("brand_new", "m")
    assert isinstance(unknown, sandpool.Internal) and unknown.code == "brand_new"


def test_submit_options_map_to_the_protocols_arguments():
    args = _ops.submit_args("echo", pool="p", priority=2, timeout=1.5, retries=0, key="k",
                            idempotency_key="i", tenant="acme", wait=True, progress=True)
    assert args == {"type": "echo", "pool": "p", "priority": 2, "timeout_ms": 1500,
                    "retries": 0, "key": "k", "idempotency_key": "i", "tenant": "acme",
                    "wait": True, "progress": True}
    assert _ops.submit_args("echo") == {"type": "echo"}  # the pool's defaults for the rest
    assert _ops.duration_ms(0.0001, "t") == 1  # rounded up, never to 0


def test_a_schedule_is_sent_as_delay_ms_or_not_before_ms():
    import datetime
    assert _ops.submit_args("echo", delay=90)["delay_ms"] == 90000
    at = datetime.datetime(2026, 11, 27, 18, 0, tzinfo=datetime.timezone.utc)
    assert _ops.submit_args("echo", not_before=at)["not_before_ms"] == int(at.timestamp()) * 1000
    assert _ops.submit_args("echo", not_before=1790000000)["not_before_ms"] == 1790000000000


def test_a_batch_is_split_to_fit_max_frame_and_a_refused_tail_refuses_the_rest():
    requests = _ops.batch_requests("echo", [b"x" * 100] * 10, {}, max_body=450)
    assert [count for _, _, count in requests] == [2, 3, 2, 3]
    assert b"".join(blob for _, blob, _ in requests) == b"x" * 1000
    sent = []

    def replies():
        sent.append(1)
        yield {"ids": [7, 8]}, 2
        sent.append(2)
        yield {"ids": [9], "refused_from": {"index": 1, "code": "queue_full", "message": "m"}}, 3
        sent.append(3)  # never reached: nothing after a refused tail is sent
        yield {"ids": [10, 11]}, 2

    out = _ops.batch_replies(replies(), [2, 3, 2, 3])
    assert [s.id for s in out] == [7, 8, 9] + [0] * 7
    assert all(isinstance(s.error, sandpool.QueueFull) for s in out[3:])
    assert sent == [1, 2]
