"""`history --like-profile` scoring: different profiles are at different distances."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from ledger.core.projections import RoundRow
from ledger.core.similar import rank, signal_distance
from ledger.inputs.profiles import load_profile

NCU = Path(__file__).parent.parent / "fixtures" / "profiles" / "real" / "ncu-h200"


def _row(run_id: str, signals: dict[str, float]) -> RoundRow:
    values = dict.fromkeys(RoundRow._fields, "")
    values.update(
        run_id=run_id,
        round=1,
        relative_improvement=None,
        worst_case_regression=None,
        cumulative_improvement=0.0,
        consecutive_failures=0,
        target_met=False,
        needs_diagnosis=False,
        remaining_rounds=0,
        mechanism=None,
    )
    values.update(bottleneck="memory-transfer", mechanism_confirmed=None, flags=None)
    values["start_signals"] = json.dumps(signals)
    return RoundRow(**values)


def test_three_different_profiles_give_three_different_distances() -> None:
    # three real memory-bound kernels from one H200 capture
    saxpy = load_profile(NCU / "metrics.csv", kernel_name="CUDAFunctor_add<float>").signals
    copy = load_profile(NCU / "metrics.csv", kernel_name="kl_persistent_copy").signals
    saxpy_again = load_profile(NCU / "logfile.csv", kernel_name="CUDAFunctor_add<float>").signals
    assert signal_distance(saxpy, saxpy) == (0.0, len(saxpy))  # exactly 0, no float noise
    candidates = [_row("copy", copy), _row("again", saxpy_again), _row("same", saxpy)]
    ranked = rank(saxpy, candidates, 3)
    assert [r.row.run_id for r in ranked] == ["same", "again", "copy"]
    distances = [r.distance for r in ranked]
    assert len(set(distances)) == 3
    assert sorted(distances)[0] == 0.0
    # another launch of the same kernel is nearer than a different kernel
    assert signal_distance(saxpy, saxpy_again)[0] < signal_distance(saxpy, copy)[0]


def test_magnitudes_by_decades_fractions_by_difference() -> None:
    assert signal_distance({"duration_us": 10.0}, {"duration_us": 100.0}) == (1.0, 1)
    assert signal_distance({"duration_us": 100.0}, {"duration_us": 10.0}) == (1.0, 1)
    assert signal_distance({"sm_throughput": 0.9}, {"sm_throughput": 0.5}) == (0.4, 1)
    assert signal_distance({"grid_size": 0.0}, {"grid_size": 4.0}) == (1.0, 1)
    assert signal_distance({"a": 1.0}, {"b": 1.0}) == (math.inf, 0)


@given(
    st.dictionaries(
        st.sampled_from(["duration_us", "dram_throughput", "grid_size", "aiv_vec_ratio"]),
        st.floats(0.0, 1e6, allow_nan=False),
        min_size=1,
    ),
    st.dictionaries(
        st.sampled_from(["duration_us", "dram_throughput", "grid_size", "aiv_vec_ratio"]),
        st.floats(0.0, 1e6, allow_nan=False),
        min_size=1,
    ),
)
def test_distance_is_symmetric_and_zero_on_itself(a: dict, b: dict) -> None:
    assert signal_distance(a, a)[0] == 0.0
    assert signal_distance(a, b) == signal_distance(b, a)
