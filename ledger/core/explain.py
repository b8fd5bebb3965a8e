"""Why a round got its decision, in words: one sentence from the stored decision event.

    explain(decided, failed_cases=..., reference_us=...)
                                       -> Explanation   the rule that fired, with its numbers
    noise_summary(events)              -> NoiseSummary  A/A pairs, drift and thresholds
    GLOSSARY                                             every flag the ledger writes

Pure: no I/O, no clock. The sentence is read from what `RoundDecided` stored (the contract's
I and R, the objective in force, the bootstrap's bounds and the drift it used); nothing is
decided again, so the words can never disagree with the recorded decision. The contract's
words come from the version of the contract the decision records (`decide.Contract`);
this module adds what the noise-aware rule said. The report, the web view, `show`,
`history`, `analyze`'s report.md, suggest, `record` and `assess` all call `explain`, with
what `inputs.models.explain_inputs` reads beside the decision (the failed cases, the
reference's medians).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.core.aa import DRIFT_PAIRS_RULE, FLAG_DRIFT_UNESTIMATED, MIN_DRIFT_PAIRS
from ledger.core.controller import SAMPLES_NOT_FOUND, SOURCE_NOT_SAMPLES
from ledger.core.decide import Objective, contract, weighted_improvement
from ledger.core.events import (
    Event,
    Measurement,
    MeasurementsRecorded,
    NoiseMeasured,
    RoundDecided,
    RunPlanned,
)
from ledger.core.projections import REOPENED_FLAG
from ledger.text import pct, percent

# The flags a decision (RoundDecided.flags, the rounds table) and a drift estimate
# (statistics.drift_flags) write; GLOSSARY adds a profile attribution's (attribution.flags),
# on first use, so `record` words its decision without importing the profile attribution.
_DECISION_GLOSSARY: dict[str, str] = {
    FLAG_DRIFT_UNESTIMATED: (
        f"Session-to-session drift is not estimated: {DRIFT_PAIRS_RULE}, and the run has fewer; "
        "the bootstrap used only within-session noise (drift 0). Record `kernel-ledger noise` "
        "remeasures of the best kernel to estimate it. A round whose sides were measured in "
        "one session (a same-session reference) has no drift between them: there the flag only "
        "says the run has no estimate yet."
    ),
    "remeasure-advised": (
        "The round was kept, but its improvement I is within twice the larger of the noise "
        "floor and the bootstrap spread of I: a remeasure may turn it into NOISE."
    ),
    "mechanism-refuted": (
        "The round was kept, but the profiler signal it said it would move did not move in the "
        "stated direction by the stated amount: the speed-up has another cause than the one "
        "claimed."
    ),
    "retried-mechanism": (
        "While the run needed diagnosis, the round changed the same mechanism as earlier "
        "rounds that were not kept (listed in retried_rounds)."
    ),
    SAMPLES_NOT_FOUND: (
        "A measurement named a raw-samples file that was not found when the round was "
        "recorded; its median stands as given, and no samples of that case were stored."
    ),
    SOURCE_NOT_SAMPLES: (
        "A measurement named a source file that is not a raw-samples file (a benchmark log, "
        "say): its sha256 was recorded as evidence, and the case's median stands as given."
    ),
    REOPENED_FLAG: (
        "History: the round was recorded after its run had concluded once (RunReopened), "
        "on the caller's stated reason."
    ),
}


@functools.cache
def glossary() -> dict[str, str]:
    """Every flag the ledger writes: on a decision, on a drift estimate and on a profile's
    attribution (attribution.flags), with its meaning."""
    from ledger.core.bottleneck import (
        FLOOR_ABOVE_MEASURED,
        MIXED,
        TARGET_EXCEEDS_HEADROOM,
        Bottleneck,
    )

    found = dict(_DECISION_GLOSSARY)
    found[MIXED] = (
        "Profile: two pipe families' shares of the kernel's time were within the mixed margin "
        "of each other; the runner-up is named as well."
    )
    found[TARGET_EXCEEDS_HEADROOM] = (
        "Profile: the run's target improvement is larger than the headroom left between the "
        "measured time and the estimated hardware floor."
    )
    found[FLOOR_ABOVE_MEASURED] = (
        "Profile: the estimated hardware floor is above the measured time; the floor model's "
        "peak figures do not fit this target."
    )
    for cls in Bottleneck:
        if cls is not Bottleneck.UNKNOWN:
            found[f"also-{cls}"] = (
                f"Profile: the {cls} rule fired too, after the bottleneck that was chosen; its "
                "evidence is listed after the main evidence."
            )
    return found


def __getattr__(name: str) -> Any:
    if name == "GLOSSARY":  # `from ledger.core.explain import GLOSSARY`: built on first use
        return glossary()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DECISION_MEANINGS: dict[str, str] = {
    "KEEP": "the candidate became the new best kernel",
    "DISCARD": "correct, but not good enough, or some case regressed too much",
    "NOISE": "the change is too small to tell from measurement noise",
    "FAIL": "the candidate did not pass validation and was never measured",
}


def describe_flag(flag: str) -> str:
    """The glossary entry of a flag; an unknown flag (a newer ledger) says so."""
    known = _DECISION_GLOSSARY.get(flag) or glossary().get(flag)
    return known or "not described by this version of kernel-ledger"


@dataclass(frozen=True, slots=True)
class Explanation:
    round: int
    decision: str
    rule: str  # which rule fired: "validation", a `Grounds.rule`, or a bootstrap-* rule
    sentence: str
    flags: tuple[str, ...]
    worst_case: str | None  # the case with the largest regression R, when measured

    def as_dict(self) -> dict[str, Any]:
        """What `show --json` gives as `explanation` and `record`/`assess --json` as `why`:
        {rule, sentence, worst_case, flags {flag: meaning}}."""
        return {
            "rule": self.rule,
            "sentence": self.sentence,
            "worst_case": self.worst_case,
            "flags": {f: describe_flag(f) for f in self.flags},
        }

    @property
    def text(self) -> str:
        """The sentence, and the flags the round carries, for plain-text output."""
        return self.sentence + (f" Flags: {', '.join(self.flags)}." if self.flags else "")


def _worst_case(d: RoundDecided, reference_us: Sequence[float] | None) -> str | None:
    """The case of the largest regression, against the medians the decision compared: the
    round's same-session reference where it had one (the controller compares a candidate
    with its reference whenever the round carries one), else the best kernel's stored
    medians. A decision on a reference (statistics.sides "reference") whose medians the
    caller could not give names no case rather than one from the wrong comparison."""
    if d.candidate_medians_us is None or not d.case_ids:
        return None
    if reference_us is None and (d.statistics or {}).get("sides") == "reference":
        return None
    best = list(reference_us) if reference_us is not None else d.best_before.medians_us
    if len(best) != len(d.candidate_medians_us) or len(best) != len(d.case_ids):
        return None
    changes = [(c - b) / b for b, c in zip(best, d.candidate_medians_us, strict=True)]
    return d.case_ids[max(range(len(changes)), key=changes.__getitem__)]


def explain(
    decided: RoundDecided,
    *,
    failed_cases: Sequence[str] | None = None,
    reference_us: Sequence[float] | None = None,
) -> Explanation:
    """One sentence: the rule that fired for this round, with its numbers.

    `failed_cases` names the cases the round's case matrix marks as not passed, where the
    caller could still read that (hash-checked) file; None when it could not.
    `reference_us` are the medians of the round's same-session reference (its
    MeasurementsRecorded with role "reference"), which a decision on a reference compared
    the candidate with; None when the round had none or the caller did not read it.
    """
    d = decided
    rules = contract(d.contract)
    flags = tuple(d.flags)
    if d.decision == "FAIL" or d.relative_improvement is None:
        sentence = rules.failure(failed_cases)
        return Explanation(d.round, d.decision, "validation", sentence, flags, None)
    i, r = d.relative_improvement, d.worst_case_regression
    assert r is not None
    worst = _worst_case(d, reference_us)
    stats = d.statistics or {}
    o = d.objective
    decision = stats.get("contract_decision", d.decision)
    grounds = rules.grounds(decision, i, r, Objective.of(o), worst)
    changed_by = stats.get("changed_by")
    if grounds.rule != "keep":
        return Explanation(d.round, d.decision, grounds.rule, grounds.sentence(), flags, worst)
    lower, upper = stats.get("improvement_lower"), stats.get("regression_upper")
    boot = _bootstrap_words(stats)
    if changed_by == "noise_floor":
        rule = "bootstrap-noise-floor"
        sentence = (
            f"NOISE: the medians alone would keep it ({grounds.clause}), but the bootstrap's "
            f"{boot['alpha']} lower bound of I, {pct(lower)}, is not above the noise floor "
            f"{percent(o.noise_floor)}{boot['drift']}."
        )
    elif changed_by == "case_regression":
        rule = "bootstrap-case-regression"
        sentence = (
            f"DISCARD: the medians alone would keep it ({grounds.clause}), but the bootstrap's "
            f"{boot['quantile']} upper bound of R, {pct(upper)}, is over the limit "
            f"{percent(o.max_case_regression)}{boot['drift']}."
        )
    else:
        rule = "keep"
        qualifier = ""
        if lower is not None:
            qualifier = (
                f"; the bootstrap's {boot['alpha']} lower bound of I, {pct(lower)}, clears "
                f"the noise floor and its {boot['quantile']} upper bound of R, "
                f"{pct(upper)}, stays within the limit{boot['drift']}"
            )
        elif d.evidence == "medians":
            qualifier = " (medians only: no raw samples to test it against noise)"
        sentence = grounds.sentence(qualifier)
    return Explanation(d.round, d.decision, rule, sentence, flags, worst)


def _bootstrap_words(stats: dict[str, Any]) -> dict[str, str]:
    alpha = stats.get("alpha")
    quantile = stats.get("regression_quantile")
    sigma = stats.get("drift_sigma")
    pairs = stats.get("drift_pairs")
    if stats.get("sides") == "reference":
        drift = " (no drift widened it: both sides were measured in one session)"
    elif stats.get("sides") == "different-sessions" and not stats.get("drift_estimated"):
        drift = (
            f" (the sides come from different sessions: the assumed drift sigma "
            f"{sigma * 100:.2f}% widened it; {_aa_pairs(pairs or 0)} usable, "
            f"{MIN_DRIFT_PAIRS} needed to estimate it)"
        )
    elif stats.get("drift_estimated"):
        drift = f" (drift sigma {sigma * 100:.2f}% from {_aa_pairs(pairs)} widened it)"
    elif stats:
        drift = (
            f" (drift unestimated: {_aa_pairs(pairs or 0)} usable, {MIN_DRIFT_PAIRS} needed to "
            "widen it)"
        )
    else:
        drift = ""
    return {
        "alpha": f"{alpha * 100:g}%" if isinstance(alpha, int | float) else "lower",
        "quantile": f"{quantile * 100:g}%" if isinstance(quantile, int | float) else "upper",
        "drift": drift,
    }


# --- noise ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NoisePair:
    """Two measurements of one kernel in two sessions (an A/A pair) and how far apart."""

    kernel_sha256: str
    first: str  # "round N" or "remeasure after round N"
    second: str
    improvement: float | None  # I of the second over the first, from the medians
    cases: int
    samples: bool  # raw samples on both sides


@dataclass(frozen=True, slots=True)
class NoiseSummary:
    noise_floor: float | None
    min_relative_improvement: float | None
    max_case_regression: float | None
    statistics: dict[str, Any] | None  # the run's recorded statistics settings
    pairs: tuple[NoisePair, ...]
    drift: tuple[
        tuple[int, float | None, bool, int | None], ...
    ]  # (round, sigma, estimated, pairs)
    sentence: str


def noise_summary(events: Iterable[Event]) -> NoiseSummary:
    """The run's A/A pairs, the drift each decision used, and the thresholds in force."""
    plan: RunPlanned | None = None
    latest: dict[str, tuple[str, list[Measurement]]] = {}
    pairs: list[NoisePair] = []
    drift: list[tuple[int, float | None, bool, int | None]] = []
    weights: list[float] | None = None
    for event in events:
        if isinstance(event, RunPlanned):
            plan = event
            weights = [c.weight for c in event.cases]
        elif isinstance(event, MeasurementsRecorded):
            label = "original" if event.round == 0 else f"round {event.round}"
            latest[event.kernel_sha256] = (label, list(event.measurements))
        elif isinstance(event, NoiseMeasured):
            label = f"remeasure after round {event.after_round}"
            before = latest.get(event.kernel_sha256)
            if before is not None:
                pairs.append(
                    _pair(event.kernel_sha256, before, (label, event.measurements), weights)
                )
            latest[event.kernel_sha256] = (label, list(event.measurements))
        elif isinstance(event, RoundDecided) and event.statistics:
            s = event.statistics
            drift.append(
                (
                    event.round,
                    s.get("drift_sigma"),
                    bool(s.get("drift_estimated")),
                    s.get("drift_pairs"),
                )
            )
    objective = plan.objective if plan else None
    floor = objective.noise_floor if objective else None
    if pairs:
        spread = [abs(p.improvement) for p in pairs if p.improvement is not None]
        worst = max(spread) if spread else None
        sentence = (
            f"{_aa_pairs(len(pairs))}: the same kernel measured twice differed by up to "
            f"{percent(worst) if worst is not None else '—'} in I"
        )
        if floor is not None and worst is not None:
            sentence += (
                f", {'within' if worst < floor else 'beyond'} the noise floor {percent(floor)}"
            )
        sentence += "."
    else:
        sentence = (
            "No A/A remeasures were recorded: drift between sessions is not estimated, and "
            "only the noise within each session's samples is accounted for."
        )
    if floor is not None:
        sentence += f" Decisions treat |I| below {percent(floor)} as noise."
    return NoiseSummary(
        noise_floor=floor,
        min_relative_improvement=objective.min_relative_improvement if objective else None,
        max_case_regression=objective.max_case_regression if objective else None,
        statistics=dict(plan.statistics) if plan and plan.statistics else None,
        pairs=tuple(pairs),
        drift=tuple(drift),
        sentence=sentence,
    )


def _pair(
    kernel: str,
    first: tuple[str, Sequence[Measurement]],
    second: tuple[str, Sequence[Measurement]],
    weights: list[float] | None,
) -> NoisePair:
    a, b = list(first[1]), list(second[1])
    improvement = None
    if weights and len(a) == len(b) == len(weights):
        try:
            improvement = weighted_improvement(
                weights, [m.median_us for m in a], [m.median_us for m in b]
            )
        except (ValueError, ZeroDivisionError):
            improvement = None
    return NoisePair(
        kernel_sha256=kernel,
        first=first[0],
        second=second[0],
        improvement=improvement,
        cases=len(b),
        samples=all(m.samples_us for m in (*a, *b)),
    )


def _aa_pairs(count: object) -> str:
    return "1 A/A pair" if count == 1 else f"{count} A/A pairs"
