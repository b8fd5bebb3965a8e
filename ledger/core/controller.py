"""The controller's pure core: from a run's state and the evidence folded from its events
to the events that record a decision, a profile or a conclusion. No I/O, no clock.

`record` and the replay verifier call the very same functions, so a replay re-derives
exactly what was decided. The decision rules themselves, every version of them, live in
`ledger/core/decide.py`: a new decision or conclusion is made under the newest version, and a
replay re-derives a stored one under the version it records.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ledger.core import decide
from ledger.core.events import (
    BestKernel,
    CaseCheck,
    FileRef,
    LimitFields,
    MeasurementsRecorded,
    MechanismCheck,
    MechanismEntry,
    ObjectiveFields,
    ProfileRecorded,
    RoundDecided,
    RoundSubmitted,
    RunConcluded,
    RunPlanned,
    StartProfile,
)
from ledger.core.evidence import RunEvidence
from ledger.core.projections import RunView
from ledger.errors import InputError
from ledger.integrity.hashing import canonical


def noise_aware(
    *,
    run_id: str,
    round_no: int,
    contract: decide.Decision,
    weights: list[float],
    best_medians: list[float],
    candidate_medians: list[float],
    best_samples: list[list[float] | None],
    candidate_samples: list[list[float] | None],
    objective: decide.Objective,
    evidence: RunEvidence,
    sides: str | None = None,
) -> tuple[decide.Decision, dict[str, Any]]:
    """SPEC 4.2 on top of the contract (pure). The seed derives from the recorded inputs;
    session drift comes from the run's A/A remeasures. `sides`: None (sessions unknown: as
    always), "reference" (a same-session reference: no drift between the sides) or
    "different-sessions" (the drift estimate, else statistics.assumed_drift)."""
    from ledger.core import stats

    config, drift, sigma = _drift(sides, evidence, weights)
    seed = stats.derive_seed(
        canonical(
            {
                "run_id": run_id,
                "round": round_no,
                "weights": weights,
                "best": best_samples,
                "candidate": candidate_samples,
            },
            string_keys=True,  # JSON types only: str, int and lists of floats or None
        )
    )
    if config.sequential is not None:
        return _sequential(
            run_id, round_no, contract, weights, best_samples, candidate_samples, objective,
            config, sides, sigma, drift,
        )  # fmt: skip
    outcome = stats.noise_aware_decision(
        contract=contract,
        weights=weights,
        best_samples=best_samples,
        cand_samples=candidate_samples,
        objective=objective,
        config=config,
        seed=seed,
        drift_sigma=sigma,
        drift_estimated=drift.estimated,
        best_medians=best_medians,
        cand_medians=candidate_medians,
    )
    evidence_out = {**outcome.evidence, **drift.to_evidence()}
    if sides is not None:
        evidence_out.update(sides=sides, drift_sigma=sigma)
    return outcome.decision, evidence_out


def _drift(sides: str | None, evidence: RunEvidence, weights: list[float]) -> tuple[Any, ...]:
    """The run's statistics settings, its drift estimate from the A/A pairs, and the drift
    between a decision's sides: none for a same-session reference; the run's estimate, else
    statistics.assumed_drift, for sides of different sessions; the estimate (0 when
    unestimated) where the sessions are unknown, as decisions always had it."""
    from ledger.core import stats

    config = _recorded_config(evidence.statistics)
    drift = stats.estimate_drift(evidence.noise_pairs, weights=weights, config=config)
    if sides == "reference":
        return config, drift, 0.0
    if sides == "different-sessions" and not drift.estimated:
        return config, drift, float(config.drift_assumed)
    return config, drift, float(drift.sigma)


def _sequential(
    run_id: str,
    round_no: int,
    contract: decide.Decision,
    weights: list[float],
    best_samples: list[list[float] | None],
    candidate_samples: list[list[float] | None],
    objective: decide.Objective,
    config: Any,
    sides: str | None,
    sigma: float,
    drift: Any,
) -> tuple[decide.Decision, dict[str, Any]]:
    """statistics.sequential on a round: the decision at its first settled look."""
    import numpy as np

    from ledger.core import sequential

    context = canonical({"run_id": run_id, "round": round_no}, string_keys=True)
    outcome = sequential.sequential_decision(
        weights=weights,
        best_samples=best_samples,
        cand_samples=candidate_samples,
        paired=sides == "reference",
        objective=objective,
        config=config,
        sequential=config.sequential,
        context=context,
        drift_sigma=sigma,
    )
    looks = outcome.evidence["looks"]
    deciding = looks[-1] if looks else {}
    evidence = {
        "kind": "samples",
        "method": sequential.METHOD,
        "contract_decision": contract.value,
        "decision": outcome.decision.value,
        "changed_by": None if outcome.decision is contract else "sequential",
        "improvement": deciding.get("improvement"),
        "worst_regression": deciding.get("worst_regression"),
        "improvement_lower": deciding.get("improvement_lower"),
        "regression_upper": deciding.get("regression_upper"),
        **config.evidence_settings(),
        "numpy_version": np.__version__,
        "advice": None,
        **drift.to_evidence(),
        "drift_sigma": sigma,
        "settled": outcome.settled,
        "repeats_used": outcome.repeats_used,
        "more_repeats": outcome.more_repeats,
        "looks": looks,
        "available_repeats": outcome.evidence["available_repeats"],
    }
    if sides is not None:
        evidence["sides"] = sides
    return outcome.decision, evidence


def _may_bootstrap(samples: Sequence[Sequence[float] | None] | None) -> bool:
    """Whether one side's samples could reach the bootstrap: every case with at least 3
    samples (the smallest `min_samples` the statistics accept). Below that the noise-aware
    decision is the contract's with no statistics, so it is not computed (nor numpy
    imported)."""
    return samples is not None and all(s is not None and len(s) >= 3 for s in samples)


def _recorded_config(statistics: Any) -> Any:
    """`StatisticsConfig.from_recorded`, built once per distinct recorded `statistics` (a
    replay asks for the same run's settings at every decision)."""
    from ledger.core import stats

    if statistics is None:
        return _config_of(None)
    if not isinstance(statistics, dict):
        return stats.StatisticsConfig.from_recorded(statistics)
    try:
        return _config_of(tuple(sorted((k, type(v), v) for k, v in statistics.items())))
    except TypeError:  # a value that cannot be a key (a list, say): build it every time
        return stats.StatisticsConfig.from_recorded(statistics)


@functools.lru_cache(maxsize=64)
def _config_of(key: tuple[tuple[str, type, Any], ...] | None) -> Any:
    from ledger.core import stats

    return stats.StatisticsConfig.from_recorded(None if key is None else {k: v for k, _, v in key})


def decide_round(
    *,
    view: RunView,
    submitted: RoundSubmitted,
    evidence: RunEvidence,
    candidate_medians: list[float] | None,
    candidate_samples: list[list[float] | None] | None = None,
    contract: int | None = None,
    vocabulary: int | None = None,
) -> RoundDecided:
    """The pure part of `record`: the decision event for a round, from the run's state and
    the evidence folded from its events (profiles, timings, failed mechanisms), under the
    contract version `contract` (None: the newest, for a new decision), its mechanism entry
    under vocabulary version `vocabulary` (None: the newest).

    The verifier calls this same function to re-derive every recorded decision, under the
    version it records.
    """
    rules = decide.contract(contract)
    weights = [c.weight for c in view.cases]
    best = [float(c.best_median_us) for c in view.cases]  # type: ignore[arg-type]
    baseline = [float(c.baseline_median_us) for c in view.cases]  # type: ignore[arg-type]
    objective = view.objective
    limits = view.limits  # a property that builds its value: read once
    run = view.run
    round_no = submitted.round
    candidate = submitted.candidate
    best_before = BestKernel(
        sha256=run.best_kernel_sha256,
        path=run.best_kernel_path,
        round=run.best_round,
        medians_us=best,
    )
    reference = evidence.references.get(round_no) if candidate_medians is not None else None
    sides: str | None = None
    compared, compared_samples = best, None
    if reference is not None:
        sides = "reference"
        compared = [float(m.median_us) for m in reference.measurements]
        compared_samples = [
            list(m.samples_us) if m.samples_us else None for m in reference.measurements
        ]
    elif candidate_medians is not None:
        measured = evidence.measured.get(round_no)
        if _different_sessions(
            evidence.session(run.best_round), measured.session if measured else None
        ):
            sides = "different-sessions"
    if candidate_medians is None:
        decision = decide.Decision.FAIL
        improvement = regression = None
        kind = "validation"
    else:
        improvement = decide.weighted_improvement(weights, compared, candidate_medians)
        regression = decide.worst_regression(compared, candidate_medians)
        decision = rules.decision(improvement, regression, objective)
        kind = "medians"
    contract_keep = decision is decide.Decision.KEEP
    statistics = None
    flags: list[str] = []
    if candidate_medians is not None and _may_bootstrap(candidate_samples):
        best_samples = (
            compared_samples if reference is not None else evidence.samples(run.best_round)
        )
        if _may_bootstrap(best_samples):
            decision, statistics = noise_aware(
                run_id=run.run_id,
                round_no=round_no,
                contract=decision,
                weights=weights,
                best_medians=compared,
                candidate_medians=candidate_medians,
                best_samples=best_samples,
                candidate_samples=candidate_samples,
                objective=objective,
                evidence=evidence,
                sides=sides,
            )
            if statistics.get("looks") is not None:  # the sequential rule decided
                improvement = statistics["improvement"] or improvement
                regression = statistics["worst_regression"] or regression
            if statistics["kind"] == "samples":
                kind = "samples"
                if not statistics["drift_estimated"]:
                    flags.append("drift_unestimated")
                if statistics["advice"] == "remeasure":
                    flags.append("remeasure-advised")
            else:
                statistics = None
    if sides == "different-sessions" and decision is decide.Decision.KEEP and statistics is None:
        from ledger.core import stats

        config, _, sigma = _drift(sides, evidence, weights)
        assert improvement is not None
        if not stats.clears_drift(improvement, sigma, config.alpha, objective.noise_floor):
            decision = decide.Decision.NOISE
    across = sides == "different-sessions"
    if across and contract_keep and decision is not decide.Decision.KEEP:
        from ledger.core import stats

        flags.append(stats.FLAG_REMEASURE)
    if decision is decide.Decision.KEEP:
        assert candidate_medians is not None
        best_after = BestKernel(
            sha256=candidate.sha256,
            path=candidate.path,
            round=round_no,
            medians_us=candidate_medians,
        )
    else:
        best_after = best_before
    failures = rules.failures(run.consecutive_failures, decision)
    factors = (
        chain(
            evidence.chain_factors,
            kept=decision is decide.Decision.KEEP,
            best=best,
            reference=compared if reference is not None else None,
        )
        if rules.chains
        else None
    )
    chained = (
        None
        if factors is None
        else [f * m for f, m in zip(factors, best_after.medians_us, strict=True)]
    )
    progress = rules.progress(
        weights=weights,
        original_baseline=baseline,
        best=best_after.medians_us,
        rounds_recorded=round_no,
        consecutive_failures=failures,
        objective=objective,
        limits=limits,
        chained=chained,
    )
    beside: dict[str, Any] = {}
    if factors is not None:
        best_round = round_no if decision is decide.Decision.KEEP else run.best_round
        beside = {
            "chain_factors": factors,
            "baseline_improvement": decide.weighted_improvement(
                weights, baseline, best_after.medians_us
            ),
            "baseline_across_sessions": _different_sessions(
                evidence.baseline_session, evidence.session(best_round)
            ),
        }
    start_signals = evidence.signals(run.best_kernel_sha256)
    start_profile = None
    if start_signals is not None:
        start_profile = StartProfile(
            kernel_sha256=run.best_kernel_sha256,
            bottleneck=evidence.bottleneck(run.best_kernel_sha256),
            signals=start_signals,
        )
    check = None
    if submitted.expected_signal is not None:
        check = mechanism_check(
            submitted.expected_signal,
            [c.case_id for c in view.cases],
            evidence,
            run.best_kernel_sha256,
            candidate.sha256,
        )
        if check.confirmed is False and decision is decide.Decision.KEEP:
            flags.append("mechanism-refuted")
    mechanism = decide.mechanism_of(submitted.mechanism, submitted.change)
    retried = decide.retried_rounds(mechanism, run.needs_diagnosis, evidence.failed_mechanisms)
    if retried:
        flags.append("retried-mechanism")
    if candidate_medians is not None:
        measured = evidence.measured.get(round_no)
        if flagged_cases(measured, SAMPLES_NOT_FOUND):
            flags.append(SAMPLES_NOT_FOUND)
        if flagged_cases(measured, SOURCE_NOT_SAMPLES):
            flags.append(SOURCE_NOT_SAMPLES)
    return RoundDecided(
        contract=rules.version,
        round=round_no,
        decision=decision.value,
        evidence=kind,
        case_ids=[c.case_id for c in view.cases],
        weights=weights,
        objective=ObjectiveFields(**asdict(objective)),
        limits=LimitFields(**asdict(limits)),
        best_before=best_before,
        candidate_sha256=candidate.sha256,
        candidate_medians_us=candidate_medians,
        relative_improvement=improvement,
        worst_case_regression=regression,
        statistics=statistics,
        best_after=best_after,
        **{k: v for k, v in asdict(progress).items() if k != "rounds_recorded"},
        mechanism=mechanism,
        mechanism_check=check,
        start_profile=start_profile,
        retried_rounds=retried,
        flags=flags,
        mechanism_entry=mechanism_entry(mechanism, submitted.change, vocabulary),
        **beside,
    )


def chain(
    previous: Sequence[float] | None,
    *,
    kept: bool,
    best: Sequence[float],
    reference: Sequence[float] | None,
) -> list[float] | None:
    """The chain factors after a round (contract 2): per case, what carries the best
    kernel's stored medians to the original baseline's session. A KEEP on a same-session
    reference multiplies each case's factor by best / reference (the new best's medians come
    from the reference's session, where the old best measured `reference`); any other round
    keeps the factors. None (all 1) until a kept round had a reference."""
    if not (kept and reference is not None):
        return None if previous is None else list(previous)
    base = [1.0] * len(best) if previous is None else previous
    return [f * b / r for f, b, r in zip(base, best, reference, strict=True)]


def mechanism_entry(
    mechanism: str | None, change: str, vocabulary: int | None = None
) -> MechanismEntry:
    """The vocabulary entry of the round's mechanism (as the decision records it: the
    round's `mechanism`, else the parameter its `change` names) and change; the rounds row
    holds the same two texts, so `suggest.entry_of` reads the entry from it too. Under the
    vocabulary version `vocabulary` (a replay's, as recorded), else the newest."""
    from ledger.core import mechanisms

    version = mechanisms.VERSION if vocabulary is None else vocabulary
    found = mechanisms.classify(mechanism, change, version)
    return MechanismEntry(entry=found.entry, vocabulary=version, source=found.source)


def mechanism_check(
    expected: dict[str, Any],
    case_ids: Sequence[str],
    evidence: RunEvidence,
    best_sha256: str,
    candidate_sha256: str,
) -> MechanismCheck:
    """The check of the signal a round expected to move (pure).

    Where either kernel has profiles that named their case, each case the candidate was
    profiled on is compared with the best kernel's profile of that same case, never with
    another case's: confirmed when every compared case moved as expected, refuted when one
    did not, unknown when no case has a profile on both sides. Otherwise the latest profile
    of each kernel is compared, as before cases were profiled (a replay of those rounds
    re-derives the same check)."""
    metric, direction = expected["metric"], expected["direction"]
    min_change = float(expected.get("min_change", 0.0))
    best_cases = evidence.case_signals(best_sha256)
    cand_cases = evidence.case_signals(candidate_sha256)
    asked = {"metric": metric, "direction": direction, "min_change": min_change}

    def check(best: dict[str, float] | None, candidate: dict[str, float] | None) -> dict:
        verdict = decide.check_mechanism(**asked, best_signals=best, candidate_signals=candidate)
        return asdict(verdict)

    if not best_cases and not cand_cases:
        latest = check(evidence.signals(best_sha256), evidence.signals(candidate_sha256))
        return MechanismCheck(**asked, **latest)
    checks = [
        CaseCheck(case_id=case, **check(best_cases.get(case), cand_cases[case]))
        for case in case_ids
        if case in cand_cases
    ]
    compared = [c for c in checks if c.confirmed is not None]
    confirmed = None if not compared else all(c.confirmed for c in compared)
    shown = next((c for c in compared if c.confirmed is False), None)
    shown = shown or (compared[0] if compared else checks[0] if checks else None)
    return MechanismCheck(
        **asked,
        best_value=shown.best_value if shown else None,
        candidate_value=shown.candidate_value if shown else None,
        confirmed=confirmed,
        case_id=shown.case_id if shown else None,
        cases=checks,
    )


def _different_sessions(first: dict | None, second: dict | None) -> bool:
    """stats.different_sessions, without loading the statistics (numpy) where a side names
    no session, as every round of a run without sessions."""
    if not first or not second:
        return False
    from ledger.core.stats import different_sessions

    return different_sessions(first, second)


SAMPLES_NOT_FOUND = "samples-file-not-found"
"""The flag of a round whose measurements named a raw-samples file that did not exist."""
SOURCE_NOT_SAMPLES = "source-not-samples"
"""The flag of a round whose measurements named a `source` file that holds no samples."""
SOURCE_FLAGS = {SAMPLES_NOT_FOUND: "source_not_found", SOURCE_NOT_SAMPLES: "source_not_samples"}
"""Each of those flags, and the measurement field that marks a case with it."""


def flagged_cases(measured: MeasurementsRecorded | None, flag: str) -> tuple[str, ...]:
    """The cases whose measurement carries `flag`: it named a samples file (`source`) that
    was not there, or one that is not a samples file."""
    if measured is None:
        return ()
    return tuple(
        m.case_id for m in measured.measurements if getattr(m, SOURCE_FLAGS[flag]) is not None
    )


def conclusion_as_recorded(view: RunView, recorded: RunConcluded) -> bool:
    """Whether a stored conclusion follows from the run under the contract version it
    records: from one of the standings that version's conclusions may rest on
    (`Contract.recorded_standings`)."""
    rules = decide.contract(recorded.contract)
    standings = rules.recorded_standings(_standing(view), view.objective)
    return any(_concluded(view, p, rules) == recorded for p in standings)


def conclusion_event(view: RunView, contract: int | None = None) -> RunConcluded:
    """The pure part of `analyze`: how the run concludes, from its state, under the
    contract version `contract` (None: the newest, for a new conclusion)."""
    return _concluded(view, _standing(view), decide.contract(contract))


def _standing(view: RunView) -> decide.Progress:
    run = view.run
    return decide.Progress(
        rounds_recorded=run.rounds_recorded,
        consecutive_failures=run.consecutive_failures,
        cumulative_improvement=run.cumulative_improvement,
        target_met=run.target_met,
        needs_diagnosis=run.needs_diagnosis,
        remaining_rounds=run.remaining_rounds,
    )


def _concluded(view: RunView, p: decide.Progress, rules: decide.Contract) -> RunConcluded:
    run = view.run
    return RunConcluded(
        contract=rules.version,
        conclusion=rules.conclusion(p).value,
        target_met=p.target_met,
        needs_diagnosis=p.needs_diagnosis,
        cumulative_improvement=p.cumulative_improvement,
        round_count=p.rounds_recorded,
        kept_rounds=[r.round for r in view.rounds if r.decision == "KEEP"],
        best_kernel=BestKernel(
            sha256=run.best_kernel_sha256,
            path=run.best_kernel_path,
            round=run.best_round,
            medians_us=[float(c.best_median_us) for c in view.cases],  # type: ignore[arg-type]
        ),
    )


@dataclass(frozen=True)
class AttributionSettings:
    target: Any
    thresholds: Any
    floors: Any
    platform: str | None = None  # the run's platform family, which the words follow


def attribution_settings(plan: RunPlanned) -> AttributionSettings:
    """Target capabilities, thresholds and floors for bottleneck attribution, from the run's
    configuration: optional `target` keys vector_cores, cube_cores, ub_bytes, sm_count,
    peak_bandwidth_gbps, peak_tflops, and
    optional sections `bottleneck_thresholds` and `floors`."""
    return settings_from(plan.target, plan.config_document)


def settings_from(target: dict[str, Any], doc: dict[str, Any]) -> AttributionSettings:
    from ledger.core.bottleneck import Floors, TargetCaps, Thresholds

    keys = (
        "vector_cores",
        "cube_cores",
        "ub_bytes",
        "sm_count",
        "peak_bandwidth_gbps",
        "peak_tflops",
    )
    from ledger.core.suggest import platform_family

    caps = {k: target[k] for k in keys if k in target}
    soc = target.get("soc")
    return AttributionSettings(
        target=_build(TargetCaps, caps, "target"),
        thresholds=_build(
            Thresholds, doc.get("bottleneck_thresholds") or {}, "bottleneck_thresholds"
        ),
        floors=_build(Floors, doc.get("floors") or {}, "floors"),
        platform=platform_family(soc) if isinstance(soc, str) and soc.strip() else None,
    )


def _build(cls: Any, values: Any, where: str) -> Any:
    if not isinstance(values, dict):
        raise InputError(f"{where} must be an object")
    known = set(cls.__dataclass_fields__)
    unknown = sorted(set(values) - known)
    if unknown:
        raise InputError(
            f"{where}.{unknown[0]} is not a known setting ({', '.join(sorted(known))})"
        )
    try:
        return cls(**values)
    except TypeError as exc:
        raise InputError(f"{where}: {exc}") from None


def profile_event(
    settings: AttributionSettings,
    *,
    subject: str,
    round_no: int | None,
    kernel_sha256: str,
    origin: str,
    fmt: str,
    signals: dict[str, float],
    attributes: dict[str, str] | None = None,
    files: list[FileRef] | None = None,
    aggregation: str = "",
    kernel_name: str | None = None,
    notes: list[str] | None = None,
    shapes: list[tuple[str, int, float, dict[str, float]]] | None = None,
    case_id: str | None = None,
) -> ProfileRecorded:
    """A profile event with its bottleneck attribution (pure). The attribution records the
    rules version, the core type it routed on, every note the reader made, and, where the
    kernel ran with several shapes, each shape's own attribution (shape, launches, total
    time, class, first evidence line)."""
    from ledger.core.bottleneck import RULES_VERSION, classify

    def attribute(values: dict[str, float]) -> Any:
        return classify(
            values,
            settings.target,
            settings.thresholds,
            settings.floors,
            attributes,
            platform=settings.platform,
        )

    attribution = attribute(signals)
    extra: dict[str, Any] = {"rules": RULES_VERSION, "core": attribution.core}
    if notes:
        extra["notes"] = list(notes)
    if shapes:
        extra["shapes"] = [
            {
                "shape": shape,
                "launches": launches,
                "total_us": total_us,
                "bottleneck": (each := attribute(values)).bottleneck,
                "evidence": each.evidence[0] if each.evidence else "",
            }
            for shape, launches, total_us, values in shapes
        ]
    return ProfileRecorded(
        subject=subject,
        round=round_no,
        kernel_sha256=kernel_sha256,
        origin=origin,
        format=fmt,
        kernel_name=kernel_name,
        signals=signals,
        attributes=attributes or {},
        files=files or [],
        aggregation=aggregation,
        attribution={
            "bottleneck": str(attribution.bottleneck),
            "evidence": list(attribution.evidence),
            "first_experiment": attribution.first_experiment,
            "headroom": attribution.headroom,
            "flags": list(attribution.flags),
            **extra,
        },
        case_id=case_id,
    )
