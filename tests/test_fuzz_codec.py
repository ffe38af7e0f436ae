"""The frame fuzzer's encoder, checked against proton's own decoder, and its case generator's promises."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from proton import Data, Described, int32, symbol, ubyte, uint, ulong, ushort

from harness.fuzz import codec as c
from harness.fuzz import hostile

ROOT = Path(__file__).resolve().parents[1]


def decode(data: bytes):
    d = Data()
    assert d.decode(data) == len(data), "proton did not read every byte"
    d.rewind()
    d.next()
    got = d.get_object()
    return bytes(got) if isinstance(got, memoryview) else got  # the view dies with `d`


@pytest.mark.parametrize("encoded, expected", [
    (c.null(), None), (c.boolean(True), True), (c.boolean(False), False),
    (c.ubyte(200), ubyte(200)), (c.ushort(65535), ushort(65535)),
    (c.uint(0), uint(0)), (c.uint(255), uint(255)), (c.uint(2**32 - 1), uint(2**32 - 1)),
    (c.ulong(0), ulong(0)), (c.ulong(7), ulong(7)), (c.ulong(2**64 - 1), ulong(2**64 - 1)),
    (c.int_(-5), int32(-5)), (c.int_(2**31 - 1), int32(2**31 - 1)), (c.long(-(2**63)), -(2**63)),
    (c.string("héllo"), "héllo"), (c.string("x" * 300), "x" * 300), (c.string("wide", wide=True), "wide"),
    (c.symbol("amqp:decode-error"), symbol("amqp:decode-error")), (c.binary(b"\x00\xff"), b"\x00\xff"),
    (c.binary(b"b" * 70000), b"b" * 70000),
    (c.list_([]), []), (c.list_([c.uint(1), c.string("a")]), [uint(1), "a"]),
    (c.list_([c.null()] * 300), [None] * 300), (c.list_([c.boolean(True)], wide=True), [True]),
    (c.map_([(c.string("k"), c.uint(1))]), {"k": uint(1)}),
])
def test_primitive_encodings_decode_to_what_was_meant(encoded, expected):
    got = decode(encoded)
    assert got == expected and type(got) is type(expected)


def test_a_symbol_array_decodes_as_an_array_of_symbols():
    got = decode(c.symbols(["ANONYMOUS", "PLAIN"]))
    assert got.type == Data.SYMBOL and list(got.elements) == [symbol("ANONYMOUS"), symbol("PLAIN")]


def test_performatives_carry_their_descriptor_and_fields_in_spec_order():
    got = decode(c.composite("open", container_id="c1", hostname="h", max_frame_size=512, channel_max=7))
    assert got == Described(ulong(0x10), ["c1", "h", uint(512), ushort(7)])
    got = decode(c.composite("attach", name="l", handle=3, role=True,
                             source=c.composite("source", address="q"), initial_delivery_count=0))
    assert got.descriptor == ulong(0x12)
    assert got.value[:3] == ["l", uint(3), True]
    assert got.value[5] == Described(ulong(0x28), ["q"]) and got.value[9] == uint(0)
    got = decode(c.composite("sasl_init", mechanism="ANONYMOUS"))
    assert got == Described(ulong(0x41), [symbol("ANONYMOUS")])
    got = decode(c.composite("close", error={"condition": "amqp:decode-error", "description": "bad"}))
    assert got == Described(ulong(0x18), [Described(ulong(0x1D), [symbol("amqp:decode-error"), "bad"])])


def test_raw_fields_go_in_unchecked_and_unknown_fields_are_refused():
    body = c.composite("sasl_init", mechanism=c.Raw(c.null()))
    assert body == bytes.fromhex("005341c0020140"), "a null kept in place, not trimmed away"
    assert c.composite("open", container_id=c.Raw(c.string(b"a\xffb"))).endswith(b"\xa1\x03a\xffb")
    with pytest.raises(TypeError, match="open has no field"):
        c.composite("open", container=1)


def test_frames_split_back_into_header_type_channel_and_body():
    stream = c.AMQP_HEADER + c.amqp_frame("begin", channel=3, next_outgoing_id=0, incoming_window=1,
                                          outgoing_window=1) + c.EMPTY_FRAME + b"\x00\x00"
    frames, rest = c.split_frames(stream)
    assert [(t, ch) for t, ch, _ in frames] == [(-1, 0), (0, 3), (0, 0)]
    assert c.descriptor(frames[1][2]) == 0x11 and frames[2][2] == b"" and rest == b"\x00\x00"
    close = c.amqp_frame("close", error={"condition": "amqp:connection:framing-error"})
    assert c.error_condition(c.split_frames(close)[0][0][2]) == "amqp:connection:framing-error"
    assert c.frame(b"", size=4)[:4] == b"\x00\x00\x00\x04", "a size field may lie"


def test_cases_are_deterministic_from_seed_and_index_and_every_family_takes_turns():
    ctx = hostile.Context()
    first = [hostile.generate(5, i, ctx) for i in range(len(hostile.FAMILIES) * 3)]
    again = [hostile.generate(5, i, ctx) for i in range(len(hostile.FAMILIES) * 3)]
    assert [(x.label, x.steps) for x in first] == [(x.label, x.steps) for x in again]
    assert {x.family for x in first} == set(hostile.FAMILIES)
    other = [hostile.generate(6, i, ctx) for i in range(len(first))]
    assert [x.data for x in other] != [x.data for x in first], "another seed, other cases"
    with pytest.raises(ValueError, match="unknown fuzz family 'nope'"):
        hostile.generate(1, 0, ctx, ["nope"])


def test_the_known_crashers_come_out_of_their_families_and_match_the_regression_file():
    """The fuzzer must find the issue-15 crashers from its families, not from a list: within a few thousand
    cases the sasl and utf8 families produce the very bytes crashers.yaml keeps."""
    ctx = hostile.Context()
    by_name = {}
    for i in range(3000):
        case = hostile.generate(1, i, ctx, ["sasl", "utf8"])
        by_name.setdefault(case.name, case)
    entries = {e["id"]: e for e in yaml.safe_load((ROOT / "suites/robustness/crashers.yaml").read_text())["crashers"]}
    assert by_name["sasl-init.mechanism-null"].hex == entries["sasl-init.mechanism-null"]["input_hex"]
    assert len(by_name["sasl-init.mechanism-null"].data) == 23
    assert "open.container-id.invalid-utf8" in by_name
    built = (c.SASL_HEADER + c.sasl_frame("sasl_init", mechanism="ANONYMOUS") + c.AMQP_HEADER
             + c.frame(c.composite("open", container_id=c.Raw(c.string(b"fuzz\xffid")))))
    assert built.hex() == entries["open.container-id.invalid-utf8"]["input_hex"]


def test_case_names_are_stable_labels_without_numbers_from_the_draw():
    """A name is a finding's signature: counts, offsets and seeds must stay out of it (or two seeds finding one
    fault report two). Descriptor-like words (utf8, 0-9-1, sasl-init) are the only digits allowed."""
    ctx = hostile.Context()
    names = {hostile.generate(s, i, ctx).name for s in (1, 2) for i in range(800)}
    assert len(names) < 800, "names repeat across draws"
    allowed = {"utf8", "0-9-1", "version-2", "revision-9", "below-8", "max-frame", "frame", "over-max"}
    for name in names:
        stripped = name
        for word in allowed:
            stripped = stripped.replace(word, "")
        assert not any(ch.isdigit() for ch in stripped), name
