"""Numeric edges (docs/reliability.md, section 6): every time within
[samples.MIN_TIME_US, samples.MAX_TIME_US] and every weight within
[inputs.MIN_WEIGHT, inputs.MAX_WEIGHT] gives a decision whose every statistic is finite,
with no numpy warning; a value outside the range is refused as input."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import InputError
from ledger.inputs import samples
from ledger.inputs.models import MAX_WEIGHT, MIN_WEIGHT
from ledger.services import dryrun

OBJECTIVE = {
    "target_relative_improvement": 0.1,
    "min_relative_improvement": 0.01,
    "noise_floor": 0.005,
    "max_case_regression": 0.02,
}
EDGES = [samples.MIN_TIME_US, samples.MAX_TIME_US, 1.0]
times = st.one_of(
    st.sampled_from(EDGES),
    st.floats(samples.MIN_TIME_US, samples.MAX_TIME_US, allow_nan=False),
)
weights = st.one_of(
    st.sampled_from([MIN_WEIGHT, MAX_WEIGHT, 1.0]), st.floats(MIN_WEIGHT, MAX_WEIGHT)
)


def _side(draw, n_cases: int, with_samples: bool) -> list[dict]:
    rows = []
    for index in range(n_cases):
        if with_samples:
            values = draw(st.lists(times, min_size=1, max_size=40))
            rows.append({"case_id": f"c{index}", "samples_us": values})
        else:
            rows.append({"case_id": f"c{index}", "median_us": draw(times), "repeats": 5})
    return rows


@st.composite
def decide_inputs(draw) -> dict:
    n_cases = draw(st.integers(1, 4))
    with_samples = draw(st.booleans())
    return {
        "objective": OBJECTIVE,
        "cases": [{"id": f"c{i}", "weight": draw(weights)} for i in range(n_cases)],
        "best": _side(draw, n_cases, with_samples),
        "candidate": _side(draw, n_cases, with_samples),
    }


def _finite(value) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(v) for v in value)
    return True


@settings(max_examples=150, deadline=None)
@given(decide_inputs())
def test_every_decision_within_the_ranges_is_finite(document):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy RuntimeWarning fails the test
        result = dryrun.decide_one(dryrun.parse_input(document, "input"), "input")
    assert result["decision"] in ("KEEP", "DISCARD", "NOISE", "FAIL")
    assert _finite(result), result
    json.dumps(result, allow_nan=False)


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("median_us", 5e-324, "must be a time between 1e-06 and 1e+12 us"),
        ("median_us", 1e308, "must be a time between 1e-06 and 1e+12 us"),
        ("median_us", 1.0000001e12, "must be a time between 1e-06 and 1e+12 us"),
        ("samples_us", [1e308, 1e308, 1e308], "must be a time between 1e-06 and 1e+12 us"),
        ("samples_us", [5e-324, 1.0], "must be a time between 1e-06 and 1e+12 us"),
        ("weight", 1e308, "must be between 1e-06 and 1e+06"),
        ("weight", 5e-324, "must be between 1e-06 and 1e+06"),
    ],
)
def test_values_outside_the_ranges_are_refused(field, value, fragment):
    document = {
        "objective": OBJECTIVE,
        "cases": [{"id": "a", "weight": 1.0}],
        "best": [{"case_id": "a", "median_us": 10.0, "repeats": 5}],
        "candidate": [{"case_id": "a", "median_us": 9.0, "repeats": 5}],
    }
    if field == "weight":
        document["cases"][0]["weight"] = value
    else:
        document["candidate"][0] = {"case_id": "a", field: value, "repeats": 5}
    with pytest.raises(InputError, match=re_escape(fragment)):
        dryrun.decide_one(dryrun.parse_input(document, "input"), "input")


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.parametrize(
    "content",
    [
        b"[1e999999]",
        b'{"unit": "ms", "samples": [1e999999]}',
        b'{"unit": "ns", "samples": [1e-999999]}',
        b"[1e308, 1e308]",
        b"[5e-324]",
        b"Duration(us)\n1e999999\n",
        b"Duration(us)\n1e-400\n",
    ],
)
def test_samples_files_with_absurd_values_are_refused(tmp_path: Path, content: bytes):
    path = tmp_path / ("samples.csv" if content.startswith(b"Duration") else "samples.json")
    path.write_bytes(content)
    with pytest.raises(InputError) as raised:
        samples.load_samples_file(path)
    reasons = ("between 1e-06 and 1e+12 us", "overflows", "must be a positive time")
    assert any(reason in str(raised.value) for reason in reasons), raised.value


@settings(max_examples=100, deadline=None)
@given(st.lists(times, min_size=1, max_size=200))
def test_medians_of_samples_in_range_stay_in_range(values):
    median = samples.median(values)
    assert samples.MIN_TIME_US <= median <= samples.MAX_TIME_US
