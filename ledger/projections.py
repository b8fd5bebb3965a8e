"""Pure folds: events -> run status, best kernel, cases and rounds.

These are the rows of the projection tables. The store writes them in the same
transaction as the events they follow; `rebuild` and the verifier fold the events again
and must get identical rows. One handler per event type; an unknown type fails loudly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ledger.decide import Limits, Objective
from ledger.events import (
    DiagnosisRecorded,
    Event,
    MeasurementsRecorded,
    NoiseMeasured,
    ProfileRecorded,
    RoundDecided,
    RoundSubmitted,
    RunConcluded,
    RunPlanned,
    ValidationLinked,
)
from ledger.hashing import canonical


@dataclass(frozen=True, slots=True)
class CaseRow:
    run_id: str
    position: int
    case_id: str
    weight: float
    baseline_median_us: float | None
    best_median_us: float | None


@dataclass(frozen=True, slots=True)
class RoundRow:
    run_id: str
    round: int
    op_name: str
    soc: str
    decision: str
    hypothesis: str
    change: str
    mechanism: str | None
    candidate_sha256: str
    candidate_path: str
    parent_kernel_sha256: str
    validation_status: str
    relative_improvement: float | None
    worst_case_regression: float | None
    cumulative_improvement: float
    best_kernel_sha256: str
    consecutive_failures: int
    target_met: bool
    needs_diagnosis: bool
    remaining_rounds: int
    recorded_at: str
    bottleneck: str | None = None
    mechanism_confirmed: bool | None = None
    flags: str | None = None
    start_signals: str | None = None


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: str
    parent_run_id: str | None
    op_name: str
    soc: str
    status: str
    conclusion: str | None
    original_kernel_sha256: str
    best_kernel_sha256: str
    best_kernel_path: str
    best_round: int
    target_relative_improvement: float
    min_relative_improvement: float
    noise_floor: float
    max_case_regression: float
    max_rounds: int
    max_consecutive_failures: int
    rounds_recorded: int
    kept_rounds: int
    consecutive_failures: int
    cumulative_improvement: float
    target_met: bool
    needs_diagnosis: bool
    remaining_rounds: int
    stream_version: int
    planned_at: str
    updated_at: str
    concluded_at: str | None
    bottleneck_model: str | None = None


@dataclass(frozen=True, slots=True)
class ProfileRow:
    run_id: str
    stream_version: int
    op_name: str
    soc: str
    kernel_sha256: str
    subject: str
    round: int | None
    format: str
    bottleneck: str | None
    signals: str
    recorded_at: str


def signals_text(signals: dict[str, float]) -> str:
    """Profile signals as stored in projection rows: canonical JSON text."""
    return canonical(signals).decode()


@dataclass(frozen=True, slots=True)
class _Pending:
    """What a round has stated so far, before its decision arrives."""

    submitted: RoundSubmitted | None = None
    validation_status: str | None = None


@dataclass(frozen=True, slots=True)
class RunView:
    """Everything the projections hold about one run."""

    run: RunRow
    cases: tuple[CaseRow, ...]
    rounds: tuple[RoundRow, ...] = ()
    pending: _Pending = field(default_factory=_Pending)
    profiles: tuple[ProfileRow, ...] = ()

    @property
    def objective(self) -> Objective:
        r = self.run
        return Objective(
            r.target_relative_improvement,
            r.min_relative_improvement,
            r.noise_floor,
            r.max_case_regression,
        )

    @property
    def limits(self) -> Limits:
        return Limits(self.run.max_rounds, self.run.max_consecutive_failures)

    @property
    def concluded(self) -> bool:
        return self.run.status == "concluded"


class ProjectionError(ValueError):
    """The events cannot be folded: out of order, or an unknown type."""


def _planned(event: RunPlanned, version: int, at: str) -> RunView:
    run = RunRow(
        run_id=event.run_id,
        parent_run_id=event.parent_run_id,
        op_name=event.op_name,
        soc=str(event.target.get("soc", "")),
        status="active",
        conclusion=None,
        original_kernel_sha256=event.kernel.sha256,
        best_kernel_sha256=event.kernel.sha256,
        best_kernel_path=event.kernel.path,
        best_round=0,
        target_relative_improvement=event.objective.target_relative_improvement,
        min_relative_improvement=event.objective.min_relative_improvement,
        noise_floor=event.objective.noise_floor,
        max_case_regression=event.objective.max_case_regression,
        max_rounds=event.limits.max_rounds,
        max_consecutive_failures=event.limits.max_consecutive_failures,
        rounds_recorded=0,
        kept_rounds=0,
        consecutive_failures=0,
        cumulative_improvement=0.0,
        target_met=event.objective.target_relative_improvement <= 0.0,
        needs_diagnosis=False,
        remaining_rounds=event.limits.max_rounds,
        stream_version=version,
        planned_at=at,
        updated_at=at,
        concluded_at=None,
    )
    cases = tuple(
        CaseRow(event.run_id, i, c.id, c.weight, None, None) for i, c in enumerate(event.cases)
    )
    return RunView(run=run, cases=cases)


def apply(view: RunView | None, version: int, at: str, event: Event) -> RunView:
    """Fold one event into the view of its run."""
    if isinstance(event, RunPlanned):
        if view is not None:
            raise ProjectionError("RunPlanned for a run that already exists")
        return _planned(event, version, at)
    if view is None:
        raise ProjectionError(f"{event.event_type} before RunPlanned")
    run = replace(view.run, stream_version=version, updated_at=at)
    if isinstance(event, ValidationLinked):
        pending = replace(view.pending, validation_status=event.status)
        return replace(view, run=run, pending=pending)
    if isinstance(event, MeasurementsRecorded):
        if event.role == "baseline":
            medians = {m.case_id: m.median_us for m in event.measurements}
            cases = tuple(
                replace(c, baseline_median_us=medians[c.case_id], best_median_us=medians[c.case_id])
                for c in view.cases
            )
            return replace(view, run=run, cases=cases)
        return replace(view, run=run)
    if isinstance(event, RoundSubmitted):
        return replace(view, run=run, pending=_Pending(submitted=event))
    if isinstance(event, RoundDecided):
        return _decided(view, run, at, event)
    if isinstance(event, ProfileRecorded):
        attribution = event.attribution or {}
        row = ProfileRow(
            run_id=run.run_id,
            stream_version=version,
            op_name=run.op_name,
            soc=run.soc,
            kernel_sha256=event.kernel_sha256,
            subject=event.subject,
            round=event.round,
            format=event.format,
            bottleneck=attribution.get("bottleneck"),
            signals=signals_text(event.signals),
            recorded_at=at,
        )
        return replace(view, run=run, profiles=(*view.profiles, row))
    if isinstance(event, NoiseMeasured):
        return replace(view, run=run)
    if isinstance(event, DiagnosisRecorded):
        run = replace(
            run, consecutive_failures=0, needs_diagnosis=False, bottleneck_model=event.bottleneck
        )
        return replace(view, run=run)
    if isinstance(event, RunConcluded):
        run = replace(run, status="concluded", conclusion=event.conclusion, concluded_at=at)
        return replace(view, run=run)
    raise ProjectionError(f"no projection handler for {event.event_type}")


def _decided(view: RunView, run: RunRow, at: str, event: RoundDecided) -> RunView:
    submitted = view.pending.submitted
    if submitted is None or submitted.round != event.round:
        raise ProjectionError(f"RoundDecided for round {event.round} without its RoundSubmitted")
    after = event.best_after
    run = replace(
        run,
        best_kernel_sha256=after.sha256,
        best_kernel_path=after.path,
        best_round=after.round,
        rounds_recorded=event.round,
        kept_rounds=run.kept_rounds + (event.decision == "KEEP"),
        consecutive_failures=event.consecutive_failures,
        cumulative_improvement=event.cumulative_improvement,
        target_met=event.target_met,
        needs_diagnosis=event.needs_diagnosis,
        remaining_rounds=event.remaining_rounds,
    )
    cases = tuple(
        replace(c, best_median_us=m) for c, m in zip(view.cases, after.medians_us, strict=True)
    )
    row = RoundRow(
        run_id=run.run_id,
        round=event.round,
        op_name=run.op_name,
        soc=run.soc,
        decision=event.decision,
        hypothesis=submitted.hypothesis,
        change=submitted.change,
        mechanism=event.mechanism,
        candidate_sha256=submitted.candidate.sha256,
        candidate_path=submitted.candidate.path,
        parent_kernel_sha256=submitted.parent_kernel_sha256,
        validation_status=view.pending.validation_status or "unknown",
        relative_improvement=event.relative_improvement,
        worst_case_regression=event.worst_case_regression,
        cumulative_improvement=event.cumulative_improvement,
        best_kernel_sha256=after.sha256,
        consecutive_failures=event.consecutive_failures,
        target_met=event.target_met,
        needs_diagnosis=event.needs_diagnosis,
        remaining_rounds=event.remaining_rounds,
        recorded_at=at,
        bottleneck=event.start_profile.bottleneck if event.start_profile else None,
        mechanism_confirmed=event.mechanism_check.confirmed if event.mechanism_check else None,
        flags=",".join(event.flags) or None,
        start_signals=signals_text(event.start_profile.signals) if event.start_profile else None,
    )
    return replace(view, run=run, cases=cases, rounds=(*view.rounds, row), pending=_Pending())


def fold(events: Iterable[tuple[int, str, Event]]) -> RunView:
    """Fold one run's (stream_version, recorded_at, event) triples, in version order."""
    view: RunView | None = None
    for version, at, event in events:
        view = apply(view, version, at, event)
    if view is None:
        raise ProjectionError("no events to fold")
    return view


def as_dict(row: Any) -> dict[str, Any]:
    return {name: getattr(row, name) for name in row.__slots__}
