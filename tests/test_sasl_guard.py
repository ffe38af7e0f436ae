"""reference/sasl_guard.py: which client byte streams reach proton's SASL layer.

Valid streams are the ones proton's own client writes (not hand-made), so the guard is checked against what
real clients send; the bad ones are the frames that crash proton-C 0.40 or break AMQP 1.0 §5.3.
"""

from __future__ import annotations

import struct

import pytest
from proton import Connection, Transport

from reference.sasl_guard import MAX_SASL_FRAME, SASL_HEADER, SaslFrameError, SaslGuard, decode_frame

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"


def proton_client_stream(mechs: str = "ANONYMOUS") -> bytes:
    """What a proton client writes in a whole handshake: SASL header, sasl-init, AMQP header, open. The server
    side is played by hand: it offers ANONYMOUS and answers sasl-outcome ok."""
    transport = Transport(Transport.CLIENT)
    transport.sasl().allowed_mechs(mechs)
    connection = Connection()
    connection.container = "guard-test"
    transport.bind(connection)
    connection.open()
    mechanisms = sasl_frame(b"\x00\x53\x40" + list8(b"\xa3\x09ANONYMOUS"))
    outcome = sasl_frame(b"\x00\x53\x44" + list8(b"\x50\x00"))
    out = b""
    for server_says in (SASL_HEADER + mechanisms, outcome):
        transport.push(server_says)
        while (pending := transport.pending()) > 0:
            out += transport.peek(pending)
            transport.pop(pending)
    return out


def sasl_frame(body: bytes) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, 1, 0) + body


def list8(*fields: bytes) -> bytes:
    data = b"".join(fields)
    return b"\xc0" + bytes([len(data) + 1, len(fields)]) + data


def sasl_init(*fields: bytes) -> bytes:
    return sasl_frame(b"\x00\x53\x41" + list8(*fields))


def feed(stream: bytes, chunk: int) -> tuple[str | None, bool]:
    guard = SaslGuard()
    for i in range(0, len(stream), chunk):
        problem = guard.check(stream[i:i + chunk])
        if problem:
            return problem, guard.done
    return None, guard.done


@pytest.mark.parametrize("chunk", [1, 3, 4096])
def test_a_proton_client_handshake_passes_and_the_guard_steps_aside(chunk):
    stream = proton_client_stream()
    assert stream.startswith(SASL_HEADER) and AMQP_HEADER in stream, "proton pipelines SASL and AMQP headers"
    assert feed(stream, chunk) == (None, True)


def test_a_stream_without_sasl_is_left_to_proton():
    assert feed(AMQP_HEADER + b"\x00\x00\x00\x08\x02\x00\x00\x00", 4096) == (None, True)
    assert feed(b"GET / HTTP/1.1\r\n", 4096) == (None, True)


@pytest.mark.parametrize("frame, expected", [
    (sasl_init(b"\x40"), "sasl-init: mandatory field mechanism is null"),
    (sasl_frame(b"\x00\x53\x41\x45"), "sasl-init: mandatory field mechanism is null or missing"),
    (sasl_init(b"\xa1\x05PLAIN"), "field mechanism is a string, expected symbol"),
    (sasl_init(b"\xa3\x09ANONYMOUS", b"\xa1\x01x"), "field initial-response is a string, expected binary"),
    (sasl_init(b"\xa3\x09ANONYMOUS", b"\x40", b"\xa1\x02\xff\xfe"), "field hostname is not valid UTF-8"),
    (sasl_frame(b"\x00\x53\x43" + list8(b"\x40")), "sasl-response: mandatory field response is null"),
    (sasl_frame(b"\x00\x53\x44" + list8(b"\x50\x00")), "a client may not send sasl-outcome"),
    (sasl_frame(b"\x00\x53\x41\xc0\x10\x01\xa3\x09ANONYMOUS"), "list size 16 does not fit the frame"),
    (sasl_frame(b"\x00\x53\x41\x40"), "sasl-init: body is type code 0x40, expected a list"),
    (sasl_frame(b"\x00\x53\x41" + list8(b"\xa3\x20ANONYMOUS")), "ends inside a value"),
    (sasl_frame(b"\xa3\x09ANONYMOUS"), "not a described type"),
    (struct.pack(">IBBH", 8, 2, 0, 0), "frame type 0 during SASL negotiation"),
    (struct.pack(">IBBH", 12, 1, 1, 0) + b"abcd", "data offset 1 does not fit"),
    (struct.pack(">IBBH", 4, 2, 1, 0), "frame size 4 is below"),
    (struct.pack(">IBBH", MAX_SASL_FRAME + 1, 2, 1, 0), f"frame size {MAX_SASL_FRAME + 1} is over"),
])
@pytest.mark.parametrize("chunk", [1, 4096])
def test_bad_sasl_frames_are_named(frame, expected, chunk):
    problem, done = feed(SASL_HEADER + frame, chunk)
    assert problem is not None and expected in problem, problem
    assert done, "after a violation the guard stops reading: the loop closes the connection"


def test_a_half_frame_waits_for_the_rest_and_memory_stays_bounded():
    guard = SaslGuard()
    frame = sasl_init(b"\xa3\x09ANONYMOUS")
    assert guard.check(SASL_HEADER + frame[:-3]) is None and not guard.done
    assert guard.check(frame[-3:]) is None
    assert guard.check(AMQP_HEADER) is None and guard.done


# AMQP 1.0 part 1 §1.6: each fixed-width encoding and its width (written out here, not read from the guard's table)
FIXED_WIDTHS = [(0x41, "boolean", 0), (0x42, "boolean", 0), (0x56, "boolean", 1), (0x50, "ubyte", 1),
                (0x60, "ushort", 2), (0x70, "uint", 4), (0x52, "uint", 1), (0x43, "uint", 0), (0x80, "ulong", 8),
                (0x53, "ulong", 1), (0x44, "ulong", 0), (0x51, "byte", 1), (0x61, "short", 2), (0x71, "int", 4),
                (0x54, "int", 1), (0x81, "long", 8), (0x55, "long", 1), (0x72, "float", 4), (0x82, "double", 8),
                (0x83, "timestamp", 8), (0x98, "uuid", 16), (0x73, "char", 4)]


@pytest.mark.parametrize("code, kind, width", FIXED_WIDTHS, ids=[f"0x{c:02x}" for c, _k, _w in FIXED_WIDTHS])
def test_a_field_of_any_fixed_width_type_is_read_whole_and_named(code, kind, width):
    """A value of the wrong type is stepped over by its width and named: read with another width, the rest of
    the list would be misread and the client told something else than what is wrong."""
    frame = sasl_init(b"\xa3\x09ANONYMOUS", b"\x40", bytes([code]) + b"\x00" * width)
    problem, done = feed(SASL_HEADER + frame, 4096)
    assert problem is not None and f"field hostname is a {kind}, expected string" in problem, problem


@pytest.mark.parametrize("doff, body, readable", [
    (2, b"\x00\x53\x44" + list8(b"\x50\x00"), True),   # a server's sasl-outcome, as the loop's SASL client reads it
    (3, b"\x00\x00\x00\x00" + b"\x00\x53\x44" + list8(b"\x50\x00"), True),  # an extended header before the body
    (5, b"\x00\x53\x44" + list8(b"\x50\x00"), False),  # the body would start past the frame's end (AMQP 1.0 §2.3.1)
])
def test_a_frame_s_data_offset_is_held_to_the_frame(doff, body, readable):
    frame = struct.pack(">IBBH", 8 + len(body), doff, 1, 0) + body
    if readable:
        code, fields = decode_frame(frame, from_client=False)
        assert code == 0x44 and fields == [("ubyte", b"\x00")]
    else:
        with pytest.raises(SaslFrameError, match="not a SASL frame"):
            decode_frame(frame, from_client=False)


@pytest.mark.parametrize("code, kind, width", [(0xA0, "binary", 1), (0xB0, "binary", 4), (0xA1, "string", 1),
                                               (0xB1, "string", 4), (0xA3, "symbol", 1), (0xB3, "symbol", 4)])
def test_a_field_of_any_variable_width_type_is_read_whole(code, kind, width):
    """Each variable-width encoding's size prefix (AMQP 1.0 §1.6) read with its own width: the field is named by
    its type, or accepted where it is the one expected (a binary initial-response)."""
    value = b"abc"
    frame = sasl_init(b"\xa3\x09ANONYMOUS", bytes([code]) + len(value).to_bytes(width, "big") + value)
    problem, done = feed(SASL_HEADER + frame, 4096)
    if kind == "binary":
        assert problem is None, problem
    else:
        assert problem is not None and f"field initial-response is a {kind}, expected binary" in problem, problem
