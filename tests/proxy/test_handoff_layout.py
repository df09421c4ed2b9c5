"""The hand-off's message layout, tied to the slots: RawExchange.state (the forwarder's
pack), unpack_flat and the Captured reader (the recorder's unpack) are written out by hand,
so adding a captured field without adding it to each of them fails here."""

from __future__ import annotations

import dataclasses

from mcp_tap.proxy.capture import (
    COMMON_NAMES,
    FLAT_NAMES,
    LISTED,
    RARE_NAMES,
    RARE_USUAL,
    SAME_AS,
    Flat,
    RawBody,
    RawExchange,
    unpack_flat,
)
from mcp_tap.proxy.captured import RAW_ONLY, Captured, materialize_state

_BODIES = ("request", "response", "tunnel")


def _marked() -> tuple[RawExchange, dict[str, object]]:
    """An exchange whose every flat field holds its own marker object (all rare fields
    unusual: markers equal nothing else)."""
    raw = RawExchange.__new__(RawExchange)
    markers: dict[str, object] = {}
    for name in FLAT_NAMES:
        markers[name] = object()
        setattr(raw, name, markers[name])
    raw.request, raw.response, raw.tunnel = RawBody(8), None, None
    return raw, markers


def test_the_layout_names_every_slot_once() -> None:
    """Every slot of RawExchange is a body, the message's key, common or rare: once."""
    assert len(set(COMMON_NAMES + RARE_NAMES)) == len(COMMON_NAMES + RARE_NAMES)
    assert sorted((*COMMON_NAMES, *RARE_NAMES, "handover_key", *_BODIES)) == sorted(
        RawExchange.__slots__)
    assert set(RARE_USUAL) == set(RARE_NAMES) and set(LISTED) <= set(RARE_NAMES)
    assert Flat._fields == COMMON_NAMES + RARE_NAMES


def test_pack_sends_each_field_in_its_place() -> None:
    """RawExchange.state: the common fields in order, then the rare ones as one tuple."""
    raw, markers = _marked()
    flat = raw.state()[0]
    assert flat[:-1] == tuple(markers[n] for n in COMMON_NAMES)
    assert all(a is b for a, b in zip(flat[:-1], (markers[n] for n in COMMON_NAMES),
                                      strict=True))
    rare = flat[-1]
    assert rare is not None
    assert all(a is markers[n] for a, n in zip(rare, RARE_NAMES, strict=True))


def _usual(raw: RawExchange) -> None:
    """Set every rare field of ``raw`` to its usual value (RARE_USUAL)."""
    for name, usual in RARE_USUAL.items():
        if isinstance(usual, tuple) and usual[0] is SAME_AS:
            usual = getattr(raw, usual[1])
        setattr(raw, name, usual)


def test_pack_tests_every_rare_field_for_its_usual_value() -> None:
    """None for the rare tuple only when each rare field has its usual value: one field
    away from it (each in turn) sends the tuple."""
    raw, _ = _marked()
    _usual(raw)
    assert raw.state()[0][-1] is None
    for name in RARE_NAMES:
        other, _ = _marked()
        _usual(other)
        unusual = object()
        setattr(other, name, unusual)
        rare = other.state()[0][-1]
        assert rare is not None and rare[RARE_NAMES.index(name)] is unusual, name


def test_unpack_reads_each_field_from_its_place() -> None:
    """unpack_flat is pack's inverse, field by field, both ways of sending the rare ones."""
    raw, markers = _marked()
    got = unpack_flat(raw.state()[0])
    assert all(getattr(got, n) is markers[n] for n in Flat._fields)
    _usual(raw)
    got = unpack_flat(raw.state()[0])
    for name in Flat._fields:
        expected = getattr(raw, name)
        if name in LISTED:
            assert expected is None and getattr(got, name) == [], name
        else:
            assert getattr(got, name) is expected or getattr(got, name) == expected, name


def test_the_recorder_takes_every_field_it_is_handed() -> None:
    """Every Flat field is stored in the Captured as it came, or is one of RAW_ONLY
    (decoded into another field); every Captured field is set."""
    raw, markers = _marked()
    raw.request_pairs = raw.response_pairs = ()
    raw.forwarded_pairs = raw.egress_pairs = raw.egress_body = None
    raw.session = None
    cap = materialize_state(raw.state(), 10)
    assert set(RAW_ONLY) <= set(Flat._fields)
    for name in Flat._fields:
        if name not in RAW_ONLY:
            assert getattr(cap, name) is markers[name], name
    assert cap.handover_key is None  # the message carries it
    unset = [f.name for f in dataclasses.fields(Captured) if not hasattr(cap, f.name)]
    assert unset == []
    # The rare fields at their usual values (sent as None): read as unpack_flat reads them.
    _usual(raw)
    flat = raw.state()[0]
    assert flat[-1] is None
    cap = materialize_state(raw.state(), 10)
    expected = unpack_flat(flat)
    for name in Flat._fields:
        if name not in RAW_ONLY:
            assert getattr(cap, name) == getattr(expected, name), name
            if name not in LISTED:
                assert getattr(cap, name) is getattr(expected, name), name


def test_every_message_tag_has_a_constructor_and_a_reader() -> None:
    """Each tag is built by its constructor (tag first, a plain tuple marshal takes) and has
    a branch in the recording process's dispatch, which names no tag as a bare string."""
    import ast
    import inspect
    import marshal
    import textwrap

    from mcp_tap.proxy import handoff, recording_process

    built = {handoff.record(1, ()), handoff.begun(1, 2), handoff.begin(1, "tap", "s"),
             handoff.drop(1), handoff.lost(2, "why"), handoff.hold(), handoff.held(1, 0.5),
             handoff.stop()}
    assert {m[0] for m in built} == set(handoff.TAGS)
    assert all(type(m) is tuple for m in built)
    assert marshal.loads(marshal.dumps(sorted(built, key=repr))) == sorted(built, key=repr)
    tree = ast.parse(textwrap.dedent(inspect.getsource(recording_process._Handover.handle)))
    read = {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "handoff"}
    assert {getattr(handoff, name) for name in read} == set(handoff.TAGS)
    assert not [node.value for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and node.value in handoff.TAGS]
