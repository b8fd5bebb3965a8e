"""`decide`: the decision for given measurements, with no ledger. Pure: values in, values
out; the same rules `record` applies (contract first, then SPEC 4.2 when samples allow)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ledger.core import decide
from ledger.errors import InputError, InputProblems
from ledger.inputs.models import (
    DecideInput,
    MeasurementIn,
    case_rows,
    problems,
)
from ledger.integrity.hashing import canonical


def parse_input(value: Any, where: str) -> DecideInput:
    try:
        item = DecideInput.model_validate(value)
    except ValidationError as exc:
        raise InputProblems(where, problems(exc, model=DecideInput)) from None
    if not item.cases:
        raise InputError(f"{where}: cases must be a non-empty list")
    if len({c.id for c in item.cases}) != len(item.cases):
        raise InputError(f"{where}: case ids must be unique")
    return item


def _side(rows: list[MeasurementIn], planned: list[str], field: str, found: list[str]):
    """Each planned case's median and samples on one side; every problem of its rows is
    added to `found`, in row order (a row with a problem gives no median), and whether a
    median disagreed with its samples."""
    from ledger.inputs import samples as raw

    by_case, bad = case_rows(rows, planned, field)
    medians, samples = [], []
    disagrees = False
    for case in planned:
        if case not in by_case:
            continue
        index, row = by_case[case]
        if row.source is not None:
            bad.append((index, f"{field}[{index}] takes samples_us inline, not a source file"))
            continue
        values = list(row.samples_us) if row.samples_us else None
        if values is not None and row.median_us is not None:
            try:
                raw.check_median_agrees(row.median_us, values, label=f"{field}[{index}].median_us")
            except raw.MedianDisagrees as exc:
                bad.append((index, exc.message))
                disagrees = True
                continue
        medians.append(row.median_us if row.median_us is not None else raw.median(values or []))
        samples.append(values)
    bad.sort(key=lambda item: item[0])
    found += [problem for _, problem in bad]
    return medians, samples, disagrees


# Said by decide's help and by each result its bootstrap decided (its `note`).
SEED_NOTE = (
    "decide seeds its bootstrap from its whole input, record from the run id, round, weights "
    "and samples, so bootstrap bounds can differ slightly from record's for the same "
    "samples; `kernel-ledger assess` reproduces record exactly"
)


def decide_one(item: DecideInput, where: str = "input") -> dict[str, Any]:
    """The decision, I, R and the evidence for one input object.

    With `reference` (the best kernel measured interleaved with the candidate in its
    session) the candidate is compared with the reference, not with `best`. Without one, when
    `session` and `best_session` name different sessions, a KEEP must clear the drift
    (`drift_sigma`, else `statistics.assumed_drift`) or it is NOISE, remeasure advised."""
    from ledger.core import stats

    planned = [c.id for c in item.cases]
    weights = [c.weight for c in item.cases]
    objective = decide.Objective.of(item.objective)
    config = stats.StatisticsConfig.from_mapping(item.statistics)
    paired = item.reference is not None
    best_rows = item.reference if item.reference is not None else item.best
    found: list[str] = []
    best_side = "reference" if paired else "best"
    best, best_samples, best_off = _side(best_rows, planned, best_side, found)
    cand, cand_samples, cand_off = _side(item.candidate, planned, "candidate", found)
    if found:
        from ledger.inputs.samples import median_hint

        hint = median_hint("samples_us") if best_off or cand_off else ""
        raise InputProblems(where, found, hint=hint)
    across = not paired and stats.different_sessions(
        None if item.best_session is None else item.best_session.model_dump(mode="json"),
        None if item.session is None else item.session.model_dump(mode="json"),
    )
    drift = item.drift_sigma
    if across and drift is None:
        drift = config.drift_assumed
    improvement = decide.weighted_improvement(weights, best, cand)
    regression = decide.worst_regression(best, cand)
    contract = decide.contract_decision(improvement, regression, objective)
    out: dict[str, Any] = {
        "decision": contract.value,
        "contract_decision": contract.value,
        "relative_improvement": improvement,
        "worst_case_regression": regression,
        "evidence": "medians",
        "statistics": None,
    }
    if paired or item.session is not None or item.best_session is not None:
        out["sides"] = "reference" if paired else ("different-sessions" if across else "best")
    flags: list[str] = []
    sampled = all(s is not None for s in (*best_samples, *cand_samples))
    if config.sequential is not None:
        if not sampled:
            raise InputError(
                f"{where}: statistics.sequential needs samples_us for every case on both sides"
            )
        from ledger.core import sequential

        outcome = sequential.sequential_decision(
            weights=weights,
            best_samples=best_samples,
            cand_samples=cand_samples,
            paired=paired,
            objective=objective,
            config=config,
            sequential=config.sequential,
            context=canonical(
                {
                    "objective": item.objective.model_dump(mode="json"),
                    "cases": [c.model_dump(mode="json") for c in item.cases],
                }
            ),
            drift_sigma=drift or 0.0,
        )
        out.update(
            decision=outcome.decision.value,
            evidence="samples",
            statistics=outcome.evidence,
            settled=outcome.settled,
            repeats_used=outcome.repeats_used,
        )
        if not outcome.settled:
            out["more_repeats"] = outcome.more_repeats
        final = outcome.decision
    elif sampled:
        seed = stats.derive_seed(canonical(item.model_dump(mode="json")))
        outcome = stats.noise_aware_decision(
            contract=contract,
            weights=weights,
            best_samples=best_samples,
            cand_samples=cand_samples,
            objective=objective,
            config=config,
            seed=seed,
            drift_sigma=drift or 0.0,
            drift_estimated=item.drift_sigma is not None,
            best_medians=best,
            cand_medians=cand,
        )
        out["statistics"] = outcome.evidence
        final = contract
        if outcome.evidence["kind"] == "samples":
            out["decision"] = outcome.decision.value
            out["evidence"] = "samples"
            final = outcome.decision
    else:
        final = contract
        if across and contract is decide.Decision.KEEP:
            assert drift is not None
            if not stats.clears_drift(improvement, drift, config.alpha, objective.noise_floor):
                final = decide.Decision.NOISE
                out["decision"] = final.value
    if across and contract is decide.Decision.KEEP and final is not decide.Decision.KEEP:
        flags.append(stats.FLAG_REMEASURE)
        out["advice"] = stats.REMEASURE_ACROSS_SESSIONS
    if across:
        out["drift_sigma"] = drift
    if flags:
        out["flags"] = flags
    if out["statistics"] is not None:  # a seeded bootstrap (or the sequential rule) ran
        out["note"] = SEED_NOTE
    return out
