"""The decision contract (SPEC 3), version 1, including values exactly at each threshold."""

from __future__ import annotations

import pytest

from ledger.core.decide import (
    Conclusion,
    Decision,
    Limits,
    Objective,
    contract,
    reason,
    weighted_improvement,
    worst_regression,
)

V1 = contract(1)  # a version's rules never change: these hold for version 1 forever

OBJ = Objective(
    target_relative_improvement=0.10,
    min_relative_improvement=0.01,
    noise_floor=0.005,
    max_case_regression=0.02,
)


def test_improvement_is_weighted_and_normalized():
    assert weighted_improvement([1.0], [10.0], [9.0]) == pytest.approx(0.1)
    assert weighted_improvement([3.0, 1.0], [10.0, 10.0], [9.0, 11.0]) == pytest.approx(0.05)
    # weights 2 and 2 are the same as 1 and 1
    assert weighted_improvement([2.0, 2.0], [10.0, 20.0], [9.0, 20.0]) == weighted_improvement(
        [1.0, 1.0], [10.0, 20.0], [9.0, 20.0]
    )


def test_improvement_is_computed_left_to_right_in_case_order():
    w, b, c = [0.1, 0.7, 0.2], [3.0, 7.0, 11.0], [2.9, 7.3, 10.1]
    total = 0.1 + 0.7 + 0.2
    expected = 0.0
    for wi, bi, ci in zip(w, b, c, strict=True):
        expected += (wi / total) * ((bi - ci) / bi)
    assert weighted_improvement(w, b, c) == expected  # bit for bit


def test_regression_is_the_worst_case():
    assert worst_regression([10.0, 10.0], [9.0, 10.5]) == pytest.approx(0.05)
    assert worst_regression([10.0, 10.0], [9.0, 9.5]) == pytest.approx(-0.05)


def test_mismatched_lengths_are_programming_errors():
    with pytest.raises(ValueError):
        weighted_improvement([1.0], [1.0, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        worst_regression([], [])


@pytest.mark.parametrize(
    ("improvement", "regression", "expected"),
    [
        (0.0049999, 0.0, Decision.NOISE),
        (-0.0049999, 0.0, Decision.NOISE),
        (0.005, 0.0, Decision.DISCARD),  # |I| == noise_floor is not noise
        (-0.005, 0.0, Decision.DISCARD),
        (0.0099999, -0.1, Decision.DISCARD),
        (0.01, 0.02, Decision.KEEP),  # both exactly at their thresholds
        (0.01, 0.0200001, Decision.DISCARD),
        (0.5, 0.02, Decision.KEEP),
        (0.5, 0.03, Decision.DISCARD),
        (-0.5, -0.1, Decision.DISCARD),
    ],
)
def test_contract_thresholds(improvement, regression, expected):
    assert V1.decision(improvement, regression, OBJ) is expected


def test_noise_wins_over_keep_when_floor_exceeds_minimum():
    obj = Objective(0.1, min_relative_improvement=0.0, noise_floor=0.02, max_case_regression=1.0)
    assert V1.decision(0.015, 0.0, obj) is Decision.NOISE


def test_consecutive_failures():
    assert V1.failures(2, Decision.KEEP) == 0
    for d in (Decision.DISCARD, Decision.NOISE, Decision.FAIL):
        assert V1.failures(2, d) == 3


def _progress(best, rounds=1, failures=0, limits=Limits(3, 2)):
    return V1.progress(
        weights=[1.0, 1.0],
        original_baseline=[10.0, 10.0],
        best=best,
        rounds_recorded=rounds,
        consecutive_failures=failures,
        objective=OBJ,
        limits=limits,
    )


def test_progress_and_conclusion():
    p = _progress([9.0, 9.0])  # exactly 10%: target met at the threshold
    assert p.cumulative_improvement == pytest.approx(0.1) and p.target_met
    assert V1.conclusion(p) is Conclusion.PASSED
    p = _progress([9.5, 9.5], rounds=3)
    assert p.remaining_rounds == 0 and V1.conclusion(p) is Conclusion.FAILED
    p = _progress([9.5, 9.5], rounds=1, failures=2)
    assert p.needs_diagnosis and V1.conclusion(p) is Conclusion.FAILED
    p = _progress([9.5, 9.5], rounds=1, failures=1)
    assert not p.needs_diagnosis and V1.conclusion(p) is Conclusion.INCONCLUSIVE
    p = _progress([9.0, 9.0], rounds=3, failures=5)  # target met wins over everything
    assert V1.conclusion(p) is Conclusion.PASSED


@pytest.mark.parametrize(
    ("decision", "improvement", "regression", "objective", "expected"),
    [
        ("KEEP", 0.05, 0.01, OBJ, "I +5.00% reaches 1.00% and R +1.00% stays within 2.00%"),
        ("NOISE", -0.002, 0.01, OBJ, "|I| 0.20% is below the noise floor 0.50%"),
        ("DISCARD", 0.006, 0.05, OBJ, "I +0.60% is below the minimum improvement 1.00%"),
        ("DISCARD", 0.05, 0.05, OBJ, "R +5.00% exceeds the case-regression limit 2.00%"),
        (
            "NOISE",
            0.05,
            0.01,
            OBJ,
            "the medians say KEEP (I +5.00% reaches 1.00% and R +1.00% stays within 2.00%), "
            "but the raw samples make it NOISE",
        ),
        ("KEEP", 0.05, 0.01, None, "I +5.00%, R +1.00%"),  # the run's objective unknown
        ("FAIL", None, None, OBJ, "validation failed: the candidate was not measured"),
    ],
)
def test_history_reason_names_the_grounds_of_the_recorded_decision(
    decision, improvement, regression, objective, expected
):
    assert (
        reason(
            decision,
            validation_status="failed",
            improvement=improvement,
            regression=regression,
            objective=objective,
        )
        == expected
    )
