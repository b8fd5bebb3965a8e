"""`decide`: the decision for given measurements, with no ledger. Pure: values in, values
out; the same rules `record` applies (contract first, then SPEC 4.2 when samples allow)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ledger.core import decide
from ledger.errors import InputError
from ledger.inputs.models import (
    DecideInput,
    MeasurementIn,
    check_measurements,
    explain,
)
from ledger.integrity.hashing import canonical


def parse_input(value: Any, where: str) -> DecideInput:
    try:
        item = DecideInput.model_validate(value)
    except ValidationError as exc:
        raise InputError(f"{where}: {explain(exc)}") from None
    if not item.cases:
        raise InputError(f"{where}: cases must be a non-empty list")
    if len({c.id for c in item.cases}) != len(item.cases):
        raise InputError(f"{where}: case ids must be unique")
    return item


def _side(rows: list[MeasurementIn], planned: list[str], field: str, where: str):
    from ledger.inputs import samples as raw

    try:
        by_case = check_measurements(rows, planned, field)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    medians, samples = [], []
    for case in planned:
        row = by_case[case]
        if row.source is not None:
            raise InputError(f"{where}: {field} rows take samples_us inline, not source files")
        values = list(row.samples_us) if row.samples_us else None
        if values is not None and row.median_us is not None:
            try:
                raw.check_median_agrees(row.median_us, values, label=f"{field}.median_us")
            except InputError as exc:
                raise InputError(f"{where}: {exc}") from None
        medians.append(row.median_us if row.median_us is not None else raw.median(values or []))
        samples.append(values)
    return medians, samples


def decide_one(item: DecideInput, where: str = "input") -> dict[str, Any]:
    """The decision, I, R and the evidence for one input object."""
    planned = [c.id for c in item.cases]
    weights = [c.weight for c in item.cases]
    objective = decide.Objective(
        item.objective.target_relative_improvement,
        item.objective.min_relative_improvement,
        item.objective.noise_floor,
        item.objective.max_case_regression,
    )
    best, best_samples = _side(item.best, planned, "best", where)
    cand, cand_samples = _side(item.candidate, planned, "candidate", where)
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
    if all(s is not None for s in (*best_samples, *cand_samples)):
        from ledger.core import stats

        config = stats.StatisticsConfig.from_mapping(item.statistics)
        seed = stats.derive_seed(canonical(item.model_dump(mode="json")))
        outcome = stats.noise_aware_decision(
            contract=contract,
            weights=weights,
            best_samples=best_samples,
            cand_samples=cand_samples,
            objective=objective,
            config=config,
            seed=seed,
            drift_sigma=item.drift_sigma or 0.0,
            drift_estimated=item.drift_sigma is not None,
            best_medians=best,
            cand_medians=cand,
        )
        out["statistics"] = outcome.evidence
        if outcome.evidence["kind"] == "samples":
            out["decision"] = outcome.decision.value
            out["evidence"] = "samples"
    return out
