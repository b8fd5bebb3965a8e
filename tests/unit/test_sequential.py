"""The sequential rule (ledger/core/sequential.py): looks, spending, first settled look,
prefix replay, conservatism when unsettled, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from ledger.core import decide
from ledger.core import sequential as sq
from ledger.core import stats as st
from ledger.errors import InputError

OBJ = decide.Objective(0.10, 0.01, 0.005, 0.02)
SEQ = {"min_repeats": 10, "max_repeats": 100, "batch": 10}
CONFIG = st.StatisticsConfig(sequential=SEQ)


def _round(gain: float, cv: float, n: int, seed: int, cases: int = 4):
    rng = np.random.default_rng(seed)
    sigma = math.sqrt(math.log1p(cv * cv))
    times = [12.0, 35.0, 80.0, 210.0][:cases]
    best = [m * np.exp(rng.normal(0, sigma, n)) for m in times]
    cand = [m * (1 - gain) * np.exp(rng.normal(0, sigma, n)) for m in times]
    return best, cand


def _decide(best, cand, paired=True, drift=0.0, objective=OBJ, config=CONFIG):
    return sq.sequential_decision(
        weights=[1.0] * len(best),
        best_samples=best,
        cand_samples=cand,
        paired=paired,
        objective=objective,
        config=config,
        sequential=config.sequential,
        drift_sigma=drift,
    )


def test_looks_and_levels_spend_exactly_alpha():
    config = sq.SequentialConfig(10, 100, 10)
    assert config.looks() == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    levels = config.levels(0.05)
    assert math.isclose(sum(levels), 0.05, rel_tol=1e-12)
    assert all(a > 0 for a in levels)
    assert sq.SequentialConfig(10, 25, 10).looks() == [10, 20, 25]
    assert sq.SequentialConfig(50, 50, 10).looks() == [50]


def test_a_large_gain_settles_keep_at_the_first_look():
    best, cand = _round(0.15, 0.02, 100, seed=1)
    out = _decide(best, cand)
    assert (out.decision, out.settled, out.repeats_used, out.more_repeats) == (
        decide.Decision.KEEP,
        True,
        10,
        0,
    )
    assert out.evidence["looks"][0]["settled_by"] == "keep"


def test_a_clear_regression_settles_discard():
    best, cand = _round(-0.05, 0.02, 100, seed=2)
    out = _decide(best, cand)
    assert out.decision is decide.Decision.DISCARD and out.settled


def test_unsettled_with_samples_left_asks_for_the_next_look():
    best, cand = _round(0.0, 0.05, 15, seed=3)
    out = _decide(best, cand)
    assert not out.settled
    assert out.decision is not decide.Decision.KEEP
    assert (out.repeats_used, out.more_repeats) == (10, 10)


def test_fewer_samples_than_min_repeats_is_no_look():
    best, cand = _round(0.3, 0.01, 6, seed=4)
    out = _decide(best, cand)
    assert (out.settled, out.look, out.more_repeats) == (False, None, 4)
    assert out.decision is decide.Decision.NOISE  # the medians KEEP, but nothing is settled


@settings(max_examples=25, deadline=None)
@given(
    gain=hs.sampled_from([-0.05, -0.01, 0.0, 0.01, 0.02, 0.05, 0.15]),
    cv=hs.sampled_from([0.005, 0.02, 0.05]),
    seed=hs.integers(0, 2**32 - 1),
)
def test_a_settled_decision_replays_on_its_prefix_and_more_samples_change_nothing(gain, cv, seed):
    best, cand = _round(gain, cv, 100, seed, cases=2)
    out = _decide(best, cand)
    if out.settled:
        n = out.repeats_used
        again = _decide([b[:n] for b in best], [c[:n] for c in cand])
        assert (again.decision, again.settled, again.repeats_used) == (out.decision, True, n)
        assert again.evidence["looks"] == out.evidence["looks"]
        # samples past the settled look are kept and change nothing
        longer = _decide([*best], [np.concatenate([c, c[:7] * 0.5]) for c in cand])
        assert (longer.decision, longer.repeats_used) == (out.decision, n)
    else:
        # unsettled at max_repeats: never a KEEP, so never less conservative than the fixed rule
        assert out.repeats_used == 100 and out.more_repeats == 0
        assert out.decision is not decide.Decision.KEEP


def test_sequential_never_keeps_what_the_fixed_rule_at_that_n_does_not():
    for seed in range(30):
        best, cand = _round(0.012, 0.02, 100, seed, cases=2)
        out = _decide(best, cand)
        if out.decision is decide.Decision.KEEP:
            look = out.evidence["looks"][-1]
            assert look["contract_decision"] == "KEEP"
            assert look["improvement_lower"] > OBJ.noise_floor


def test_drift_widens_a_cross_session_keep_into_noise():
    best, cand = _round(0.0276, 0.01, 100, seed=5)
    assert _decide(best, cand, paired=False).decision is decide.Decision.KEEP
    assert _decide(best, cand, paired=False, drift=0.02).decision is not decide.Decision.KEEP


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"min_repeats": 2}, "statistics.sequential.min_repeats must be at least 3, got 2"),
        (
            {"min_repeats": 20, "max_repeats": 10},
            "statistics.sequential.max_repeats must be at least min_repeats (20), got 10",
        ),
        ({"batch": 0}, "statistics.sequential.batch must be at least 1, got 0"),
        ({"batch": True}, "statistics.sequential.batch must be an integer, got True"),
        ({"looks": 3}, "statistics.sequential.looks is not a known setting"),
        (
            {"unpaired_best": "last-n"},
            "statistics.sequential.unpaired_best must be one of first-n, all, got 'last-n'",
        ),
        ([10], "statistics.sequential must be an object"),
    ],
)
def test_settings_are_validated(value, message):
    with pytest.raises(InputError) as info:
        st.StatisticsConfig.from_mapping({"sequential": value})
    assert str(info.value).startswith(message)


def test_settings_absent_leave_the_recorded_statistics_as_before():
    assert "sequential" not in st.StatisticsConfig().evidence_settings()
    assert "assumed_drift" not in st.StatisticsConfig().evidence_settings()
    config = st.StatisticsConfig.from_mapping({"sequential": SEQ, "assumed_drift": 0.03})
    assert config.evidence_settings()["sequential"] == {**SEQ, "unpaired_best": "first-n"}
    assert config.drift_assumed == 0.03
    # a run planned before unpaired_best existed replays under "all", with the same bytes
    recorded = st.StatisticsConfig.from_recorded({"sequential": SEQ})
    assert recorded.sequential.unpaired_best == "all"
    assert recorded.evidence_settings()["sequential"] == SEQ
    planned = st.StatisticsConfig.planned({"sequential": SEQ})
    assert planned["sequential"] == {**SEQ, "unpaired_best": "first-n"}
    assert st.StatisticsConfig.from_recorded(planned).sequential.unpaired_best == "first-n"
    assert st.StatisticsConfig().drift_assumed == st.DEFAULT_ASSUMED_DRIFT


def _aa_sessions(op: str) -> list[list[np.ndarray]]:
    """The real H200 A/A remeasures of `op`'s best kernel (examples/gpu-campaign/<op>/raw/
    aa-K): per measurement, per session, per case the samples in measurement order."""
    import itertools
    import json
    from pathlib import Path

    base = Path(__file__).resolve().parents[2] / "examples" / "gpu-campaign" / op
    cases = [c["id"] for c in json.loads((base / "config.json").read_text())["cases"]]
    out = []
    for folder in sorted((base / "raw").glob("aa-*")):
        per_case = []
        for case in cases:
            doc = json.loads((folder / f"{case}.json").read_text())
            bounds = list(itertools.accumulate(doc["session_lengths"], initial=0))
            values = np.asarray(doc["samples_us"], dtype=float)
            per_case.append([values[a:b] for a, b in itertools.pairwise(bounds)])
        out.append([list(s) for s in zip(*per_case, strict=True)])
    return out


@pytest.mark.parametrize("op", ["softmax", "rmsnorm"])
def test_real_aa_sessions_are_kept_rarely_once_looks_compare_like_positions(op):
    """Two sessions of one kernel (H200, do_bench), no reference: a look's first n candidate
    samples against the best kernel's first n ("first-n") keeps at most 5% of the pairs; the
    rule as first recorded, against the stored session whole ("all"), kept far more, because
    a session's first samples run faster than the rest of it."""
    aa = _aa_sessions(op)
    objective = decide.Objective(0.10, 0.02, 0.01, 0.10)  # the campaign's
    kept = {"first-n": 0, "all": 0}
    trials = 0
    for k in range(len(aa)):
        for first, second in ((aa[k], aa[(k + 1) % len(aa)]), (aa[(k + 1) % len(aa)], aa[k])):
            for best, cand in zip(first, second, strict=False):
                trials += 1
                for rule in kept:
                    config = st.StatisticsConfig(sequential={**SEQ, "unpaired_best": rule})
                    out = _decide(best, cand, False, 0.004, objective, config)
                    kept[rule] += out.decision is decide.Decision.KEEP
    assert trials == 96
    assert kept["first-n"] / trials <= 0.05
    assert kept["all"] / trials >= 0.08
