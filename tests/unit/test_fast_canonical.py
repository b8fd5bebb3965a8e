"""The fast canonicalizer (`hashing.canonical`) against its oracle, the `rfc8785` package:
byte-equal output wherever the oracle gives output, a refusal wherever the oracle refuses.

The fast path uses orjson (for values of JSON types only) or the C JSON encoder and repairs
or declines what they do differently (integral floats, exponents, negative zero, large
integers, UTF-16 key order, surrogates, non-string keys), so the strategies below aim
straight at those places. `parse_canonical`, the check that stored bytes are canonical, is
held to the same oracle."""

from __future__ import annotations

import json
import math

import orjson
import pytest
import rfc8785
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ledger.errors import InputError
from ledger.integrity.hashing import (
    _fast_canonical,
    _orjson_canonical,
    _orjson_writes_rfc8785,
    canonical,
    envelope_bytes,
    envelope_reference,
    parse_canonical,
)

BOUNDARY_FLOATS = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.0,
    0.5,
    1e-4,
    9.999999999999999e-05,
    1e-5,
    1e-6,
    1e-7,
    1.5e-7,
    123456789012345.0,
    999999999999999.9,
    1e15,
    1e16,
    1.5e16,
    9007199254740991.0,
    9007199254740992.0,
    1e20,
    1e21,
    1.5e21,
    1e22,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    0.1,
    0.18301676335576167,
    -0.0123,
    -10.0,
    100.0,
]
# Characters that matter to the repairs: quotes, backslashes, the digits and punctuation of
# numbers, control characters, line separators, BMP private-use (sorts above surrogate pairs in
# UTF-16) and characters beyond U+FFFF.
TRICKY = '".0,]}[{:e+-19\\\x00\x1f\x7f\u2028\u00e9\ue000\uffff\U0001f600\U00010000'
floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(BOUNDARY_FLOATS)
integers = st.integers(-(2**53) + 1, 2**53 - 1) | st.sampled_from(
    [0, -1, 2**53 - 1, -(2**53) + 1, 10**15, 1234567890123456]
)
texts = st.text() | st.text(alphabet=st.sampled_from(list(TRICKY)), max_size=12)
keys = st.text(max_size=6) | st.text(alphabet=st.sampled_from(list(TRICKY)), max_size=4)
scalars = st.none() | st.booleans() | integers | floats | texts
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=30,
)


def assert_same_as_oracle(value) -> None:
    try:
        expected = rfc8785.dumps(value)
    except rfc8785.CanonicalizationError:
        with pytest.raises(InputError):
            canonical(value)
        return
    except UnicodeEncodeError:  # the oracle's own error for a lone surrogate in a key
        with pytest.raises(UnicodeEncodeError):
            canonical(value)
        return
    assert canonical(value) == expected
    if not _has_non_string_key(value):
        assert canonical(value, string_keys=True) == expected
        fast = _orjson_canonical(value)
        assert fast is None or fast == expected
        _assert_parse_canonical(expected)


def _assert_parse_canonical(data: bytes) -> None:
    """parse_canonical accepts only canonical bytes, and reads them as json.loads does."""
    value = parse_canonical(data)
    if value is not None:
        assert rfc8785.dumps(json.loads(data)) == data
        assert value == json.loads(data)
        assert type(value) is type(json.loads(data))
    spaced = json.dumps(json.loads(data), ensure_ascii=False, indent=1).encode()
    if spaced != data:
        assert parse_canonical(spaced) is None


def _has_non_string_key(value) -> bool:
    if isinstance(value, dict):
        return any(not isinstance(k, str) for k in value) or any(
            _has_non_string_key(v) for v in value.values()
        )
    if isinstance(value, list | tuple):
        return any(_has_non_string_key(v) for v in value)
    return False


@settings(max_examples=3000, deadline=None)
@given(json_values)
@example({"a": 1.0, "b": [2.0, -0.0, 1e16, 1e-7, 1.5e21]})
@example({"x.0,": "1.0,", "y": [1.0], "z": {"w": 3.0}})
@example({"\U0001f600": 1, "\ue000": 2, "a": 3})
@example(["a\\", 1.0, '"', 2.0])
@example({"k": "text with 1.0, inside", "n": 1.0})
def test_json_values_equal_the_oracle(value):
    assert_same_as_oracle(value)


@settings(max_examples=2000, deadline=None)
@given(floats)
def test_floats_equal_the_oracle(number):
    for value in ([number], {"v": number}, [number, -number, number * 10, number / 3]):
        assert_same_as_oracle(value)
    assert_same_as_oracle(number)  # a lone number goes to the oracle, same bytes


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF)))
def test_unicode_strings_equal_the_oracle(text):
    for value in ([text], {text: text}, {"a": text, text + "b": 1.0}):
        assert_same_as_oracle(value)


@pytest.mark.parametrize(
    "value",
    [
        [float("nan")],
        {"a": float("inf")},
        [-float("inf")],
        [2**53],
        {"a": -(2**53)},
        [10**30],
        ["\ud800"],
        {"a": "x\udfff"},
        {1: 2},
        {"a": {2.5: "x"}},
        {None: 1},
        [{1, 2}],
        [b"bytes"],
    ],
)
def test_what_the_oracle_refuses_is_refused(value):
    with pytest.raises(rfc8785.CanonicalizationError):
        rfc8785.dumps(value)
    with pytest.raises(InputError):
        canonical(value)


def test_a_lone_surrogate_in_a_key_fails_as_in_the_oracle():
    with pytest.raises(UnicodeEncodeError):
        rfc8785.dumps({"\udfff": 1})
    with pytest.raises(UnicodeEncodeError):
        canonical({"\udfff": 1})


def test_tuples_and_dict_subclasses_as_the_oracle_has_them():
    class Ordered(dict):
        pass

    for value in [(1, 2.0, "x"), Ordered(b=1.0, a=[True, None]), [(), {}]]:
        assert canonical(value) == rfc8785.dumps(value)


def test_a_cycle_is_refused_like_the_oracle():
    value: list = []
    value.append(value)
    with pytest.raises(RecursionError):
        rfc8785.dumps(value)
    with pytest.raises(RecursionError):
        canonical(value)


def test_ordinary_payloads_take_the_fast_path():
    """The shapes of real payloads (integral weights, 17-digit ratios, negative small floats,
    hashes, non-ASCII text) must not fall back to the slow oracle."""
    payload = {
        "weights": [1.0, 2.0, 1.0],
        "relative_improvement": 0.18301676335576167,
        "worst_case_regression": -0.0123,
        "sha256": "0123456789012345678901234567890123456789012345678901234567890123",
        "hypothesis": "Verdoppelte Puffer ≥ 2 — µs gespart, 1.0, übrigens",
        "medians_us": [16.1, 47.9, 55.0, 38.9],
        "round": 7,
        "nested": [{"a": 100.0, "b": None, "c": True}],
    }
    fast = _fast_canonical(payload)
    assert fast is not None
    assert fast == rfc8785.dumps(payload)
    assert json.loads(fast)["weights"] == [1, 2, 1]


@pytest.mark.parametrize("field", ["stream_id", "event_type", "event_id", "recorded_at"])
def test_envelope_refuses_a_lone_surrogate_like_the_oracle(field):
    fields = {
        "stream_id": "run",
        "stream_version": 1,
        "event_id": "00000000-0000-0000-0000-000000000001",
        "event_type": "RunPlanned",
        "schema_version": 1,
        "recorded_at": "2026-11-30T12:00:00.000000Z",
        "parent_hash": "0" * 64,
    }
    fields[field] = "bad\ud800"
    with pytest.raises(rfc8785.CanonicalizationError):
        envelope_reference(fields, {"a": 1})
    with pytest.raises(rfc8785.CanonicalizationError):
        envelope_bytes(**fields, payload=b'{"a":1}')


def test_envelope_escapes_like_the_oracle():
    fields = {
        "stream_id": 'run "quoted" \\ \x01 \u2028 \U0001f600',
        "stream_version": 3,
        "event_id": "id",
        "event_type": "Ünïcode",
        "schema_version": 2,
        "recorded_at": "2026-11-30T12:00:00.000000Z",
        "parent_hash": "f" * 64,
    }
    payload = {"x": [1.0, math.pi]}
    assert envelope_bytes(**fields, payload=rfc8785.dumps(payload)) == envelope_reference(
        fields, payload
    )


def test_ordinary_payloads_take_the_orjson_path():
    payload = {
        "weights": [1.0, 2.0, 1.0],
        "ratio": 0.18301676335576167,
        "small": 1.5e-5,
        "hypothesis": "Verdoppelte Puffer ≥ 2 — µs gespart, 1.0, übrigens",
        "nested": [{"a": 100.0, "b": None, "c": True, "d": -0.0123}],
    }
    expected = rfc8785.dumps(payload)
    assert _orjson_canonical(payload) == expected
    assert parse_canonical(expected) == json.loads(expected)
    plain = rfc8785.dumps({"weights": [1, 2.5], "hypothesis": "tile-size 64", "d": -0.0123})
    assert _orjson_writes_rfc8785(plain)  # read back by the quick scans alone


def test_integers_up_to_2_53_minus_1_take_the_fast_paths():
    """A run decided on medians plans with `min_samples` 2^53-1: its RunPlanned payload is
    written and read back by the fast paths, as the oracle writes it."""
    payload = {"statistics": {"bootstrap": "smoothed", "min_samples": 2**53 - 1}, "n": -(2**53 - 1)}
    expected = rfc8785.dumps(payload)
    assert expected == b'{"n":-9007199254740991,"statistics":{"bootstrap":"smoothed",' + (
        b'"min_samples":9007199254740991}}'
    )
    assert _orjson_canonical(payload) == expected
    assert _fast_canonical(payload) == expected
    assert _orjson_writes_rfc8785(expected)
    assert parse_canonical(expected) == payload


@pytest.mark.parametrize(
    "value",
    [
        [2**53],  # beyond: the oracle refuses it
        [-(2**53)],
        [1234567890123456.5],  # 16 digits, then a fraction
        [12345678901234567],  # 17 digits
        [9007199254740991.0],  # an integral float of 16 digits: left to the oracle
    ],
)
def test_other_numbers_of_16_digits_or_more_leave_the_fast_paths(value):
    assert _orjson_canonical(value) is None
    assert _fast_canonical(value) is None
    written = orjson.dumps(value)
    assert not _orjson_writes_rfc8785(written)


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":1.0}',  # an integral float written as such
        b'{"b":1,"a":2}',  # keys out of order
        b'{"a": 1}',  # whitespace
        b'{"a":1,"a":1}',  # a duplicate key
        b'{"a":1e-7}',  # RFC 8785 writes 1e-7, but the fast path leaves exponents to the oracle
        b'{"a":"\\u00e9"}',  # an escape RFC 8785 does not use
        b'{"a":NaN}',
        b'{"a":100000000000000000000}',
        b"[1,2",
        b"\xff",
    ],
)
def test_parse_canonical_declines_what_it_cannot_prove(data):
    assert parse_canonical(data) is None


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_event_models_refuse_non_finite_numbers(bad):
    """orjson writes NaN and Infinity as null; the models refuse them before any encoder."""
    from pydantic import ValidationError

    from ledger.core.events import CaseWeight, Measurement

    with pytest.raises(ValidationError, match="finite"):
        Measurement(case_id="c", median_us=bad, repeats=3)
    with pytest.raises(ValidationError, match="finite"):
        Measurement(case_id="c", median_us=1.0, repeats=3, samples_us=[1.0, bad])
    with pytest.raises(ValidationError, match="finite"):
        CaseWeight(id="c", weight=bad)
    assert orjson.dumps([bad]) == b"[null]"  # why the refusal matters


@settings(max_examples=3000, deadline=None)
@given(json_values.filter(lambda v: isinstance(v, list | dict) and not _has_non_string_key(v)))
@example({"a": [2.0, -0.0, 1e16, 1.5e-7, 9007199254740993, -9007199254740993]})
@example({"k": "x.0,y e+1 e-2", "n": [0.5, 12]})
@example(["\U0001f600", {"\ue000": 1, "\U0001f600": 2}])
def test_parse_canonical_takes_orjson_output_only_where_it_is_rfc8785(value):
    """Bytes `orjson` wrote for a value are its own parse's output, the case the quick
    scans decide: they are accepted only where they are the oracle's bytes as well."""
    try:
        data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # a lone surrogate, an integer beyond 64 bits
        return
    try:
        expected = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeEncodeError):
        expected = None
    parsed = parse_canonical(data)
    if data != expected:
        assert parsed is None
    else:
        assert parsed is None or parsed == json.loads(data)
