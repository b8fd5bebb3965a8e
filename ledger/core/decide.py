"""The contract (SPEC 3), versioned, and every other decision rule of a round: pure
functions, values in, values out. No I/O, no clock, no database.

    Contract                  one version of the contract: the decision of a measured round,
                              the consecutive-failure count, the run's standing after a
                              round, the conclusion, and the words that explain each outcome
    CONTRACTS                 every version by number; the newest decides what is recorded now
    contract(version)         the version a stored decision or conclusion records (1 if none)
    reason(...)               history's one-line grounds of a decided round

`record`, the replay verifier and the dry-run `decide` command call these very functions, so
a replay re-derives exactly what was decided: `RoundDecided` and `RunConcluded` record the
version they were decided under, and the replay selects it (`round.decision`,
`controller.conclusion_as_recorded`). A rule never changes in place: a new version is a
subclass of `Contract` added to `CONTRACTS` (docs/decisions.md).

I and R are computed in float64, in configuration case order, left to right:

    I = sum_i (w_i / W) * ((b_i - c_i) / b_i)      W = w_1 + ... + w_n
    R = max_i (c_i - b_i) / b_i

Given only medians version 1 reproduces the existing controller bit for bit. Beyond the
contract: the mechanism a round changed, the profiler check of it and retried mechanisms.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from ledger.text import pct, percent


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

    @classmethod
    def of(cls, fields: Any) -> Objective:
        """The objective an event or a `runs` row recorded (anything with its four
        fields)."""
        return cls(
            fields.target_relative_improvement,
            fields.min_relative_improvement,
            fields.noise_floor,
            fields.max_case_regression,
        )


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


@dataclass(frozen=True, slots=True)
class Progress:
    """The run's standing after a round (or after planning, with zero rounds)."""

    rounds_recorded: int
    consecutive_failures: int
    cumulative_improvement: float
    target_met: bool
    needs_diagnosis: bool
    remaining_rounds: int


@dataclass(frozen=True, slots=True)
class Grounds:
    """Why the contract gave a measured round its decision, in words.

    `rule` names the rule that fired, `clause` states it with its numbers
    (the sentence `show`, the report and the web view print), `brief` is the short form
    `history --json` gives as `reason`."""

    decision: Decision
    rule: str
    clause: str
    brief: str

    def sentence(self, qualifier: str = "") -> str:
        """The clause as one sentence; `qualifier` (what raw samples add to a KEEP) goes
        before its end."""
        if self.decision is Decision.KEEP:
            return f"KEEP: {self.clause}{qualifier}; the candidate became the best kernel."
        return f"{self.decision}: {self.clause}{qualifier}."


class Contract:
    """Version 1 of the contract: SPEC 3 as the JSON-file controller applies it.

    A version holds every contract rule (the decision of a measured round, the
    consecutive-failure count, the run's standing after a round, the conclusion) and the
    words that explain each outcome. A later version subclasses this one, sets `version`
    and overrides what changed, words included; `CONTRACTS` lists every version."""

    version: int = 1
    chains: bool = False  # whether the cumulative improvement chains same-session ratios

    # --- the rules ---------------------------------------------------------------------

    def decision(self, improvement: float, regression: float, objective: Objective) -> Decision:
        """The decision for a candidate that passed validation (a failed one is FAIL)."""
        if abs(improvement) < objective.noise_floor:
            return Decision.NOISE
        if (
            improvement >= objective.min_relative_improvement
            and regression <= objective.max_case_regression
        ):
            return Decision.KEEP
        return Decision.DISCARD

    def failures(self, previous: int, decision: Decision) -> int:
        """KEEP resets the consecutive-failure count; every other decision adds one."""
        return 0 if decision is Decision.KEEP else previous + 1

    def progress(
        self,
        *,
        weights: Sequence[float],
        original_baseline: Sequence[float],
        best: Sequence[float],
        rounds_recorded: int,
        consecutive_failures: int,
        objective: Objective,
        limits: Limits,
        chained: Sequence[float] | None = None,
    ) -> Progress:
        """Cumulative improvement, target, diagnosis and budget after `rounds_recorded`
        rounds: the best kernel's medians against the original baseline (`chained`, what
        a later version reads, is not read here)."""
        cumulative = weighted_improvement(weights, original_baseline, best)
        return Progress(
            rounds_recorded=rounds_recorded,
            consecutive_failures=consecutive_failures,
            cumulative_improvement=cumulative,
            target_met=cumulative >= objective.target_relative_improvement,
            needs_diagnosis=consecutive_failures >= limits.max_consecutive_failures,
            remaining_rounds=limits.max_rounds - rounds_recorded,
        )

    def conclusion(self, p: Progress) -> Conclusion:
        """passed if the target is met; failed if the budget is spent or diagnosis is
        needed; else inconclusive."""
        if p.target_met:
            return Conclusion.PASSED
        if p.remaining_rounds <= 0 or p.needs_diagnosis:
            return Conclusion.FAILED
        return Conclusion.INCONCLUSIVE

    def recorded_standings(self, p: Progress, objective: Objective) -> tuple[Progress, ...]:
        """The standings a conclusion recorded under this version may rest on, for a replay.

        A run's standing before its first round has the target not met (SPEC 3 decides
        `target_met` after a round). Until migration 0008 kernel-ledger counted a target of
        0 or less as met from the plan on, so a run analyzed before its first round
        concluded `passed`. Version 1 is recorded without its number, then and since, so a
        version-1 conclusion of such a run may rest on either reading; a later version is
        recorded with its number and has one."""
        before_any_round = p.rounds_recorded == 0
        if self.version == 1 and before_any_round and objective.target_relative_improvement <= 0:
            return (p, replace(p, target_met=True))
        return (p,)

    # --- the words ---------------------------------------------------------------------

    def grounds(
        self,
        decision: Decision | str,
        improvement: float,
        regression: float,
        objective: Objective,
        worst_case: str | None = None,
    ) -> Grounds:
        """Why a measured round got `decision` from this version's rule, with its numbers:
        the recorded decision is explained, never decided again. `worst_case` names the
        case of the largest regression R."""
        i, r, o = improvement, regression, objective
        r_text = f"worst case R = {pct(r)}" + (f" on {worst_case}" if worst_case else "")
        if decision == Decision.NOISE:
            return Grounds(
                Decision.NOISE,
                "noise-floor",
                f"|I| = {abs(i) * 100:.2f}% is below the noise floor {percent(o.noise_floor)}, "
                f"too small to tell from measurement noise ({r_text})",
                f"|I| {abs(i):.2%} is below the noise floor {o.noise_floor:.2%}",
            )
        if decision == Decision.DISCARD:
            low = i < o.min_relative_improvement
            high = r > o.max_case_regression
            parts = []
            if low:
                parts.append(
                    f"I = {pct(i)} is below the minimum improvement "
                    f"{percent(o.min_relative_improvement)}"
                )
            if high:
                parts.append(f"{r_text} is over its limit {percent(o.max_case_regression)}")
            if low:
                brief = (
                    f"I {i:+.2%} is below the minimum improvement {o.min_relative_improvement:.2%}"
                )
            else:
                brief = f"R {r:+.2%} exceeds the case-regression limit {o.max_case_regression:.2%}"
            rule = (
                "min-improvement+case-regression"
                if low and high
                else ("min-improvement" if low else "case-regression")
            )
            # a DISCARD that is neither cannot come from this rule: say what was stored
            return Grounds(
                Decision.DISCARD, rule, " and ".join(parts) or f"I = {pct(i)}, {r_text}", brief
            )
        return Grounds(
            Decision.KEEP,
            "keep",
            f"I = {pct(i)} is at least the minimum {percent(o.min_relative_improvement)} and "
            f"above the noise floor {percent(o.noise_floor)}, and {r_text} is within its "
            f"limit {percent(o.max_case_regression)}",
            f"I {i:+.2%} reaches {o.min_relative_improvement:.2%} and R {r:+.2%} stays "
            f"within {o.max_case_regression:.2%}",
        )

    def failure(self, failed_cases: Sequence[str] | None) -> str:
        """The sentence of a FAIL: `failed_cases` are the cases the round's case matrix
        marks as not passed, None where that file could not be read."""
        if failed_cases:
            which = "case " if len(failed_cases) == 1 else "cases "
            what = f"validation failed on {which}{', '.join(failed_cases)}"
        elif failed_cases is not None:
            what = (
                "the validation manifest's status was not passed (its case matrix marks no "
                "case as failed)"
            )
        else:
            what = "validation did not pass (the case matrix is not at hand to name the case)"
        return f"FAIL: {what}, so the candidate was never measured."

    def failure_brief(self, validation_status: str) -> str:
        """The short form of a FAIL, from the validation manifest's status."""
        return f"validation {validation_status}: the candidate was not measured"


class ChainedContract(Contract):
    """Version 2: the cumulative improvement chains the same-session ratios of the kept
    rounds. A KEEP decided on a same-session `reference` moves the best kernel by the ratio
    candidate / reference of each case, measured in one session; the stored medians of the
    new best kernel come from that session, the original baseline from another. `chained`
    carries the best kernel back to the baseline's session: per case the baseline times the
    product of the kept rounds' ratios (controller.chain), and the cumulative improvement is
    the weighted improvement of the baseline over it. A run none of whose kept rounds had a
    reference has `chained` None, and version 2 decides it as version 1, to the bit."""

    version = 2
    chains = True

    def progress(self, *, chained: Sequence[float] | None = None, **fields: Any) -> Progress:
        if chained is None:
            return super().progress(**fields)
        return super().progress(**{**fields, "best": chained})


CONTRACTS: dict[int, Contract] = {1: Contract(), 2: ChainedContract()}
"""Every version of the contract, by number. A new version is added here and decides every
round recorded from then on (the newest one decides); a stored decision or conclusion
replays under the version it records, and one that records none is version 1."""

CONTROLLER_CONTRACT = 1
"""The version the JSON-file controller's runs are decided under, whatever version is
newest: version 1 is SPEC 3 as the controller applies it (it knows no sessions or
references). `import --legacy` and the drop-in `triton-optimization` record under it, so a
run folder's rounds and conclusion hash as its replay always gave them."""


def merge_rule(target: float) -> str:
    """What the run's target decides, said when it is set (`plan`) and when it was not met
    (`check-merge`): a run concludes passed only once its target is met, and check-merge
    passes only for a run that concluded passed."""
    return (
        f"check-merge will pass only if the cumulative improvement reaches {pct(target)} "
        "(objective.target_relative_improvement)"
    )


def known_version(version: int) -> int:
    """`version` when it is a version of `CONTRACTS`; else a ValueError naming those known."""
    if version not in CONTRACTS:
        known = ", ".join(str(v) for v in sorted(CONTRACTS))
        raise ValueError(f"contract version {version} is not known to this kernel-ledger ({known})")
    return version


def contract(version: int | None = None) -> Contract:
    """The contract of `version`; None: the newest, which decides what is recorded now."""
    return CONTRACTS[max(CONTRACTS) if version is None else known_version(version)]


def contract_decision(improvement: float, regression: float, objective: Objective) -> Decision:
    """The newest version's decision for a candidate that passed validation: what is decided
    now (`decide`, the statistics' benchmarks). A replay asks `contract(version)`."""
    return contract().decision(improvement, regression, objective)


def reason(
    decision: str,
    *,
    validation_status: str,
    improvement: float | None,
    regression: float | None,
    objective: Objective | None,
) -> str:
    """A decided round's grounds in one short sentence (`history --json`'s `reason`), from
    what its `rounds` row holds. That row keeps no contract version, so the newest version
    words it, as it decides it; where raw samples overruled the medians, both are named."""
    if decision == Decision.FAIL or improvement is None or regression is None:
        return contract().failure_brief(validation_status)
    if objective is None:
        return f"I {improvement:+.2%}, R {regression:+.2%}"
    rules = contract()
    by_medians = rules.decision(improvement, regression, objective)
    grounds = rules.grounds(by_medians, improvement, regression, objective).brief
    if by_medians == decision:
        return grounds
    return f"the medians say {by_medians} ({grounds}), but the raw samples make it {decision}"


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
