"""Canonical bytes and the event hash: the fast envelope equals the RFC 8785 oracle."""

from __future__ import annotations

import hashlib
import json

import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.actors import KEYS, actor_text, describe, parsed, printable, stored_problem
from ledger.integrity.hashing import (
    ZERO_HASH,
    canonical,
    envelope_bytes,
    envelope_reference,
    event_hash,
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
identity = st.fixed_dictionaries(
    {
        "stream_id": st.text(min_size=1, max_size=40),
        "stream_version": st.integers(1, 2**31),
        "event_id": st.uuids().map(str),
        "event_type": st.sampled_from(["RunPlanned", "RoundDecided", "Ünïcode\u2028"]),
        "schema_version": st.integers(1, 9),
        "recorded_at": st.just("2026-11-30T12:00:00.000001Z"),
        "parent_hash": st.just(ZERO_HASH) | st.text("0123456789abcdef", min_size=64, max_size=64),
    }
)


@settings(max_examples=500, deadline=None)
@given(identity, json_values)
def test_envelope_equals_rfc8785_of_the_whole_envelope(fields, payload):
    stored = rfc8785.dumps(payload)
    fast = envelope_bytes(**fields, payload=stored)
    assert fast == envelope_reference(fields, payload)
    assert json.loads(fast)["payload"] == json.loads(stored)
    assert event_hash(**fields, payload=stored) == hashlib.sha256(fast).hexdigest()


def test_canonical_known_answers():
    assert canonical({"b": 1.0, "a": [True, None], "é": "\u2028"}) == (
        b'{"a":[true,null],"b":1,"\xc3\xa9":"\xe2\x80\xa8"}'
    )
    assert canonical(1e21) == b"1e+21"
    assert canonical(0.1) == b"0.1"


FIELDS = {
    "stream_id": "run",
    "stream_version": 1,
    "event_id": "00000000-0000-0000-0000-000000000001",
    "event_type": "RunPlanned",
    "schema_version": 1,
    "recorded_at": "2026-11-30T12:00:00.000000Z",
    "parent_hash": ZERO_HASH,
    "payload": b'{"a":1}',
}


def test_any_change_of_identity_changes_the_hash():
    fields = dict(FIELDS)
    base = event_hash(**fields)
    for key, other in (
        ("stream_id", "run2"),
        ("stream_version", 2),
        ("event_id", "00000000-0000-0000-0000-000000000002"),
        ("event_type", "RunConcluded"),
        ("schema_version", 2),
        ("recorded_at", "2026-11-30T12:00:00.000001Z"),
        ("parent_hash", "1" * 64),
        ("payload", b'{"a":2}'),
    ):
        assert event_hash(**{**fields, key: other}) != base, key


actor_value = st.text(
    st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Cf", "Co", "Cn")),
    min_size=1,
    max_size=20,
).filter(str.isprintable)
actors = st.dictionaries(st.sampled_from(KEYS), actor_value, min_size=1)


@settings(max_examples=300, deadline=None)
@given(identity, json_values, actors)
def test_an_actor_is_hashed_first_in_the_envelope_as_rfc8785_orders_it(fields, payload, actor):
    stored, text = rfc8785.dumps(payload), actor_text(actor)
    fast = envelope_bytes(**fields, payload=stored, actor=text)
    assert fast == rfc8785.dumps({**fields, "payload": payload, "actor": actor})
    assert fast.startswith(b'{"actor":' + text.encode() + b',"event_id":')
    assert event_hash(**fields, payload=stored, actor=text) == hashlib.sha256(fast).hexdigest()
    assert stored_problem(text) is None and parsed(text) == actor


def test_an_event_without_an_actor_hashes_as_before_and_any_actor_changes_it():
    fields = dict(FIELDS)
    # the hash of this envelope from before actors existed (no "actor" key at all)
    before = hashlib.sha256(rfc8785.dumps({**fields, "payload": {"a": 1}})).hexdigest()
    assert event_hash(**fields) == event_hash(**fields, actor=None) == before
    one = actor_text({"os_user": "ana", "host": "box"})
    assert one == '{"host":"box","os_user":"ana"}'
    hashes = {
        event_hash(**fields, actor=text)
        for text in (one, actor_text({"os_user": "bob", "host": "box"}), actor_text({"label": "a"}))
    }
    assert len(hashes) == 3 and before not in hashes


def test_stored_actor_problems_and_how_an_actor_reads():
    for text, why in (
        ("not json", "actor is not JSON"),
        ("{}", "actor must be a non-empty JSON object"),
        ('{"role":"x"}', "actor has unknown fields ['role']"),
        ('{"label":""}', "actor label must be 1 to 128 characters, not 0"),
        ('{"label":"a\\u0007"}', "actor label must be printable characters only"),
        ('{"os_user":"a","host":"b"}', "actor text is not RFC 8785 canonical"),
        ('{ "label":"a"}', "actor text is not RFC 8785 canonical"),
    ):
        assert (stored_problem(text) or "").startswith(why), text
    assert describe({"db_role": "app", "label": "agent-7", "client": "claude"}) == (
        "agent-7 (role app, via claude)"
    )
    assert describe({"os_user": "ana", "host": "box"}) == "ana@box"
    assert describe({"label": "ci"}) == "ci"
    assert describe(None) == "not recorded"
    assert printable("a\x07b" + "c" * 200) == "a?b" + "c" * 125
