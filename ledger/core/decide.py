"""Every decision rule of a round, as pure functions: values in, values out.

No I/O, no clock, no database. `record`, the replay verifier and the dry-run `decide`
command call these very functions, so a replay re-derives exactly what was decided.

The contract (SPEC 3) is computed in float64, in configuration case order, left to right:

    I = sum_i (w_i / W) * ((b_i - c_i) / b_i)      W = w_1 + ... + w_n
    R = max_i (c_i - b_i) / b_i

Given only medians these functions reproduce the existing controller bit for bit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum


class Decision(StrEnum):
    KEEP = "KEEP"
    DISCARD = "DISCARD"
    NOISE = "NOISE"
    FAIL = "FAIL"


class Conclusion(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True, slots=True)
class Objective:
    target_relative_improvement: float
    min_relative_improvement: float
    noise_floor: float
    max_case_regression: float


@dataclass(frozen=True, slots=True)
class Limits:
    max_rounds: int
    max_consecutive_failures: int


def weighted_improvement(
    weights: Sequence[float], best: Sequence[float], candidate: Sequence[float]
) -> float:
    """I: the weighted mean relative improvement of `candidate` over `best`.

    >>> weighted_improvement([1.0, 1.0], [10.0, 20.0], [9.0, 20.0])
    0.05
    """
    if not (len(weights) == len(best) == len(candidate)) or not weights:
        raise ValueError("weights, best and candidate must be non-empty and of equal length")
    total = 0.0
    for w in weights:
        total += w
    improvement = 0.0
    for w, b, c in zip(weights, best, candidate, strict=True):
        improvement += (w / total) * ((b - c) / b)
    return improvement


def worst_regression(best: Sequence[float], candidate: Sequence[float]) -> float:
    """R: the largest relative slow-down of any case (negative when every case got faster).

    >>> worst_regression([10.0, 20.0], [9.0, 21.0])
    0.05
    """
    if len(best) != len(candidate) or not best:
        raise ValueError("best and candidate must be non-empty and of equal length")
    return max((c - b) / b for b, c in zip(best, candidate, strict=True))


def contract_decision(improvement: float, regression: float, objective: Objective) -> Decision:
    """The decision of SPEC 3 for a candidate that passed validation."""
    if abs(improvement) < objective.noise_floor:
        return Decision.NOISE
    if (
        improvement >= objective.min_relative_improvement
        and regression <= objective.max_case_regression
    ):
        return Decision.KEEP
    return Decision.DISCARD


@dataclass(frozen=True, slots=True)
class Progress:
    """The run's standing after a round (or after planning, with zero rounds)."""

    rounds_recorded: int
    consecutive_failures: int
    cumulative_improvement: float
    target_met: bool
    needs_diagnosis: bool
    remaining_rounds: int


def progress(
    *,
    weights: Sequence[float],
    original_baseline: Sequence[float],
    best: Sequence[float],
    rounds_recorded: int,
    consecutive_failures: int,
    objective: Objective,
    limits: Limits,
) -> Progress:
    """Cumulative improvement, target, diagnosis and budget after `rounds_recorded` rounds."""
    cumulative = weighted_improvement(weights, original_baseline, best)
    return Progress(
        rounds_recorded=rounds_recorded,
        consecutive_failures=consecutive_failures,
        cumulative_improvement=cumulative,
        target_met=cumulative >= objective.target_relative_improvement,
        needs_diagnosis=consecutive_failures >= limits.max_consecutive_failures,
        remaining_rounds=limits.max_rounds - rounds_recorded,
    )


def next_consecutive_failures(previous: int, decision: Decision) -> int:
    """KEEP resets the count; every other decision adds one."""
    return 0 if decision is Decision.KEEP else previous + 1


def conclude(p: Progress) -> Conclusion:
    """passed if the target is met; failed if the budget is spent or diagnosis is needed."""
    if p.target_met:
        return Conclusion.PASSED
    if p.remaining_rounds <= 0 or p.needs_diagnosis:
        return Conclusion.FAILED
    return Conclusion.INCONCLUSIVE


# --- mechanisms, profiles and diagnosis ---------------------------------------------------

_PARAMETER = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(?:=|:|->)")


def mechanism_of(mechanism: str | None, change: str) -> str | None:
    """The mechanism a round changes: its `mechanism` field, else the parameter named on the
    left of `change` ("ROWS_PER_ITER=1 -> 4" -> "ROWS_PER_ITER").

    >>> mechanism_of(None, "ROWS_PER_ITER=1 -> 4")
    'ROWS_PER_ITER'
    """
    if mechanism is not None and mechanism.strip():
        return mechanism.strip()
    match = _PARAMETER.match(change)
    return match.group(1) if match else None


@dataclass(frozen=True, slots=True)
class MechanismVerdict:
    best_value: float | None
    candidate_value: float | None
    confirmed: bool | None


def check_mechanism(
    metric: str,
    direction: str,
    min_change: float,
    best_signals: Mapping[str, float] | None,
    candidate_signals: Mapping[str, float] | None,
) -> MechanismVerdict:
    """Confirmed when the candidate's signal moved in `direction` by at least `min_change`
    (absolute, in the signal's own unit) from the best kernel's; refuted when it did not;
    unknown (None) without both profiles."""
    best = best_signals.get(metric) if best_signals else None
    cand = candidate_signals.get(metric) if candidate_signals else None
    if best is None or cand is None:
        return MechanismVerdict(best, cand, None)
    moved = (best - cand) if direction == "decrease" else (cand - best)
    return MechanismVerdict(best, cand, moved >= min_change and moved > 0)


def retried_rounds(
    mechanism: str | None, needs_diagnosis: bool, failed: Mapping[str, Sequence[int]]
) -> list[int]:
    """While the run needs diagnosis, the earlier failed rounds that changed this mechanism."""
    if not needs_diagnosis or mechanism is None:
        return []
    return list(failed.get(mechanism, ()))
