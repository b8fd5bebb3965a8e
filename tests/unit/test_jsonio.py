"""The strict JSON reader's checks. `check_json_value` first walks a value without element
paths (`_plainly_valid`) and only on doubt walks it again with them (`_explain_invalid`,
the walk that names the element in its error). The quick walk must never pass a value the
naming walk refuses; both walks are held to each other here, on generated values that sit on
every rule's edge. Likewise, the depth scan over the text is skipped only when the text has
too few brackets to nest too deep."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import InputError
from ledger.inputs.jsonio import (
    MAX_DEPTH,
    _explain_invalid,
    _plainly_valid,
    check_json_value,
    parse_json_bytes,
)
from ledger.integrity.hashing import MAX_SAFE_INTEGER

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.sampled_from([MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=6),
    st.sampled_from(["\ud800", "a\udfffb", "ok"]),
    st.sampled_from([(1, 2), b"bytes", 1.5j]),  # not JSON values at all
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.text(max_size=4), st.sampled_from(["\ud801"])), inner, max_size=4
        ),
    ),
    max_leaves=30,
)


def _nested(depth: int, leaf: object) -> object:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def _verdict(check, value) -> str:
    try:
        check(value, "")
    except (ValueError, TypeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "accepted"


@settings(max_examples=600, deadline=None)
@given(_VALUES)
def test_the_quick_walk_never_passes_what_the_naming_walk_refuses(value):
    if _plainly_valid(value):
        assert _verdict(_explain_invalid, value) == "accepted"
    assert _verdict(check_json_value, value) == _verdict(_explain_invalid, value)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=MAX_DEPTH - 3, max_value=MAX_DEPTH + 3),
    st.sampled_from([1, 1.5, math.inf, "x", "\ud800", None, [], {}, 2**60]),
)
def test_nesting_at_the_limit_is_judged_alike(depth, leaf):
    value = _nested(depth, leaf)
    assert _verdict(check_json_value, value) == _verdict(_explain_invalid, value)


def test_the_limit_itself():
    check_json_value(_nested(MAX_DEPTH, 1))
    check_json_value(_nested(MAX_DEPTH, []))  # an empty container at the limit holds nothing
    with pytest.raises(ValueError, match="nesting deeper than 64 levels"):
        check_json_value(_nested(MAX_DEPTH + 1, 1))
    with pytest.raises(ValueError, match=r"a\.k\[0\]: number is not finite"):
        check_json_value({"a": {"k": [math.inf]}})


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=MAX_DEPTH + 8), st.booleans())
def test_the_depth_scan_skipped_for_few_brackets_changes_no_answer(depth, in_strings):
    """Texts with brackets in strings and in structure, around the limit: the reader
    refuses exactly those nested deeper than MAX_DEPTH."""
    text = "[" * depth + "1" + "]" * depth
    if in_strings:
        text = '{"note": "[[[{{{", "v": ' + text + "}"
        depth += 1
    try:
        value = parse_json_bytes(text.encode(), "input", "t.json")
    except InputError as exc:
        assert depth > MAX_DEPTH, exc
        assert "nested deeper than 64 levels" in str(exc)
    else:
        assert depth <= MAX_DEPTH
        assert json.dumps(value).count("[") >= depth - 1


def test_duplicate_keys_are_still_refused():
    with pytest.raises(InputError, match="duplicate key 'a'"):
        parse_json_bytes(b'{"a": 1, "b": {"c": 2}, "a": 3}', "input", "t.json")
    with pytest.raises(InputError, match="duplicate key 'c'"):
        parse_json_bytes(b'{"b": {"c": 2, "c": 2}}', "input", "t.json")
    assert parse_json_bytes(b'{"a": {"a": {"a": 1}}}', "input", "t.json") == {"a": {"a": {"a": 1}}}
