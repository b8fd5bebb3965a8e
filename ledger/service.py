"""One method per use case: read the stream, decide with the pure core, append events and
projections in one transaction. A reader who opens this file sees the whole workflow.

    plan     config file  -> RunPlanned, ValidationLinked, MeasurementsRecorded (baseline)
    record   round result -> RoundSubmitted, ValidationLinked, [MeasurementsRecorded],
                             RoundDecided
    analyze  run          -> RunConcluded (once), then analysis.json, report.md, manifest.json
"""

from __future__ import annotations

import statistics as pystats
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ledger import decide, projections
from ledger.errors import InputError
from ledger.events import (
    BestKernel,
    CaseWeight,
    Event,
    FileRef,
    LimitFields,
    Measurement,
    MeasurementsRecorded,
    ObjectiveFields,
    RoundDecided,
    RoundSubmitted,
    RunConcluded,
    RunPlanned,
    ValidationLinked,
)
from ledger.hashing import sha256_hex
from ledger.inputs import (
    MeasurementIn,
    ValidationEvidence,
    check_measurements,
    check_validation,
    load_config,
    load_round_result,
    parse_measurements,
    resolve,
)
from ledger.jsonio import display, read_bytes
from ledger.projections import RunView
from ledger.store.eventstore import NewEvent, Store, StoredEvent

MEDIAN_REL_TOLERANCE = 1e-6


def utc_now() -> str:
    """RFC 3339 UTC with microseconds, ending in Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class PlanResult:
    run_id: str
    kernel_sha256: str
    case_count: int


@dataclass(frozen=True)
class RecordResult:
    run_id: str
    round: int
    decision: str
    relative_improvement: float | None
    worst_case_regression: float | None
    cumulative_improvement: float
    target_met: bool
    needs_diagnosis: bool
    remaining_rounds: int
    best_kernel_sha256: str


@dataclass(frozen=True)
class KernelFile:
    ref: FileRef
    content: bytes


def read_kernel(path: Path, what: str) -> KernelFile:
    data = read_bytes(path, what)
    digest = sha256_hex(data)
    return KernelFile(FileRef(path=str(path), sha256=digest, size=len(data)), data)


def file_ref(path: Path, what: str) -> FileRef:
    data = read_bytes(path, what)
    return FileRef(path=str(path), sha256=sha256_hex(data), size=len(data))


def _measurement(row: MeasurementIn, base_file: Path, field: str) -> Measurement:
    """Normalize one measurement: compute the median from samples, check agreement, hash the
    raw source file. Extra keys are kept verbatim."""
    median = row.median_us
    samples = list(row.samples_us) if row.samples_us is not None else None
    if samples is not None:
        computed = float(pystats.median(samples))
        if median is None:
            median = computed
        elif abs(median - computed) > MEDIAN_REL_TOLERANCE * computed:
            raise InputError(
                f"{field}.median_us {median:g} disagrees with the median of samples_us "
                f"({computed:g})"
            )
    repeats = row.repeats if row.repeats is not None else len(samples or ())
    source = None
    if row.source is not None:
        source = file_ref(resolve(base_file, row.source), f"{field}.source")
    assert median is not None
    return Measurement(
        case_id=row.case_id,
        median_us=median,
        repeats=repeats,
        samples_us=samples,
        source=source,
        extra=dict(row.model_extra or {}),
    )


def _measurements(
    rows: Sequence[MeasurementIn], planned: Sequence[str], base_file: Path, field: str
) -> list[Measurement]:
    by_case = check_measurements(rows, planned, field)
    index = {id(row): i for i, row in enumerate(rows)}
    return [
        _measurement(by_case[c], base_file, f"{field}[{index[id(by_case[c])]}]") for c in planned
    ]


def _validation_event(
    round_no: int, kernel_sha256: str, ev: ValidationEvidence
) -> ValidationLinked:
    return ValidationLinked(
        round=round_no,
        kernel_sha256=kernel_sha256,
        manifest=FileRef(
            path=str(ev.manifest_path), sha256=ev.manifest_sha256, size=ev.manifest_size
        ),
        manifest_run_id=ev.manifest.run_id,
        manifest_parent_run_id=ev.manifest.parent_run_id,
        status=ev.manifest.status,
        case_matrix=FileRef(
            path=str(ev.case_matrix_path), sha256=ev.case_matrix_sha256, size=ev.case_matrix_size
        ),
        case_ids=ev.case_ids,
    )


def decide_round(
    *,
    view: RunView,
    round_no: int,
    candidate_sha256: str,
    candidate_path: str,
    candidate_medians: list[float] | None,
) -> RoundDecided:
    """The pure part of `record`: the decision event for a round, from the run's state.

    The verifier calls this same function to re-derive every recorded decision.
    """
    weights = [c.weight for c in view.cases]
    best = [float(c.best_median_us) for c in view.cases]  # type: ignore[arg-type]
    baseline = [float(c.baseline_median_us) for c in view.cases]  # type: ignore[arg-type]
    objective = view.objective
    run = view.run
    best_before = BestKernel(
        sha256=run.best_kernel_sha256,
        path=run.best_kernel_path,
        round=run.best_round,
        medians_us=best,
    )
    if candidate_medians is None:
        decision = decide.Decision.FAIL
        improvement = regression = None
        evidence = "validation"
    else:
        improvement = decide.weighted_improvement(weights, best, candidate_medians)
        regression = decide.worst_regression(best, candidate_medians)
        decision = decide.contract_decision(improvement, regression, objective)
        evidence = "medians"
    if decision is decide.Decision.KEEP:
        assert candidate_medians is not None
        best_after = BestKernel(
            sha256=candidate_sha256,
            path=candidate_path,
            round=round_no,
            medians_us=candidate_medians,
        )
    else:
        best_after = best_before
    failures = decide.next_consecutive_failures(run.consecutive_failures, decision)
    progress = decide.progress(
        weights=weights,
        original_baseline=baseline,
        best=best_after.medians_us,
        rounds_recorded=round_no,
        consecutive_failures=failures,
        objective=objective,
        limits=view.limits,
    )
    return RoundDecided(
        round=round_no,
        decision=decision.value,
        evidence=evidence,
        case_ids=[c.case_id for c in view.cases],
        weights=weights,
        objective=ObjectiveFields(
            target_relative_improvement=objective.target_relative_improvement,
            min_relative_improvement=objective.min_relative_improvement,
            noise_floor=objective.noise_floor,
            max_case_regression=objective.max_case_regression,
        ),
        limits=LimitFields(
            max_rounds=view.limits.max_rounds,
            max_consecutive_failures=view.limits.max_consecutive_failures,
        ),
        best_before=best_before,
        candidate_sha256=candidate_sha256,
        candidate_medians_us=candidate_medians,
        relative_improvement=improvement,
        worst_case_regression=regression,
        best_after=best_after,
        consecutive_failures=progress.consecutive_failures,
        cumulative_improvement=progress.cumulative_improvement,
        target_met=progress.target_met,
        needs_diagnosis=progress.needs_diagnosis,
        remaining_rounds=progress.remaining_rounds,
    )


def conclusion_event(view: RunView) -> RunConcluded:
    """The pure part of `analyze`: how the run concludes, from its state."""
    run = view.run
    progress = decide.Progress(
        rounds_recorded=run.rounds_recorded,
        consecutive_failures=run.consecutive_failures,
        cumulative_improvement=run.cumulative_improvement,
        target_met=run.target_met,
        needs_diagnosis=run.needs_diagnosis,
        remaining_rounds=run.remaining_rounds,
    )
    return RunConcluded(
        conclusion=decide.conclude(progress).value,
        target_met=run.target_met,
        needs_diagnosis=run.needs_diagnosis,
        cumulative_improvement=run.cumulative_improvement,
        round_count=run.rounds_recorded,
        kept_rounds=[r.round for r in view.rounds if r.decision == "KEEP"],
        best_kernel=BestKernel(
            sha256=run.best_kernel_sha256,
            path=run.best_kernel_path,
            round=run.best_round,
            medians_us=[float(c.best_median_us) for c in view.cases],  # type: ignore[arg-type]
        ),
    )


class LedgerService:
    """The application service. Construct it with a store; every method is one use case."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], str] = utc_now,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.store = store
        self.clock = clock
        self.new_id = new_id

    # --- helpers -------------------------------------------------------------------------

    def append(
        self,
        run_id: str,
        before: RunView | None,
        items: Sequence[Event],
        blobs: Sequence[bytes],
        *,
        at: str | None = None,
    ) -> tuple[RunView, list[StoredEvent]]:
        """Append events and update the run's projection rows, in one transaction.

        `before` is the run's view the events were decided on; its stream version is the
        optimistic-concurrency expectation. `at` overrides the clock (imports keep the
        original times)."""
        at = at or self.clock()
        batch = [NewEvent(self.new_id(), item, at) for item in items]
        expected = before.run.stream_version if before else 0
        with self.store.transaction(write=True) as conn:
            stored = self.store.append(conn, run_id, expected, batch)
            for blob in blobs:
                self.store.put_blob(conn, blob)
            after = before
            for record, item in zip(stored, items, strict=True):
                after = projections.apply(after, record.stream_version, record.recorded_at, item)
            assert after is not None
            self.store.save_view(conn, before, after)
        return after, stored

    def view(self, run_id: str) -> RunView:
        with self.store.transaction() as conn:
            view = self.store.load_view(conn, run_id)
        if view is None:
            raise InputError(f"run {run_id!r} is not in the ledger")
        return view

    def full_view(self, run_id: str) -> RunView:
        with self.store.transaction() as conn:
            view = self.store.stored_projection(conn, run_id)
        if view is None:
            raise InputError(f"run {run_id!r} is not in the ledger")
        return view

    # --- plan ----------------------------------------------------------------------------

    def plan(self, config_path: Path) -> PlanResult:
        """Validate a run configuration and lock the run."""
        config_path = Path(config_path).absolute()
        doc, config = load_config(config_path)
        kernel = read_kernel(resolve(config_path, config.kernel.path), "kernel.path")
        planned = config.case_ids
        baseline = _measurements(config.baseline, planned, config_path, "baseline")
        evidence = check_validation(
            resolve(config_path, config.validation_manifest),
            kernel_sha256=kernel.ref.sha256,
            planned_case_ids=planned,
        )
        if not evidence.passed:
            raise InputError(
                f"validation manifest {display(evidence.manifest_path)} has status "
                f"{evidence.manifest.status!r}; the starting kernel must have passed"
            )
        with self.store.transaction() as conn:
            if self.store.stream_head(conn, config.run_id)[0] != 0:
                raise InputError(f"run {config.run_id!r} is already in the ledger")
        planned_event = RunPlanned(
            run_id=config.run_id,
            parent_run_id=config.parent_run_id,
            op_name=config.op_name,
            target=config.target.model_dump(mode="json"),
            kernel=kernel.ref,
            cases=[CaseWeight(id=c.id, weight=c.weight) for c in config.cases],
            objective=ObjectiveFields(**config.objective.model_dump(include=_OBJECTIVE_KEYS)),
            limits=LimitFields(
                max_rounds=config.max_rounds,
                max_consecutive_failures=config.max_consecutive_failures,
            ),
            statistics=config.statistics,
            measurement_policy=config.measurement_policy,
            config=FileRef(path=str(config_path), sha256=doc.sha256, size=doc.size),
            config_document=doc.value,
        )
        items = [
            planned_event,
            _validation_event(0, kernel.ref.sha256, evidence),
            MeasurementsRecorded(
                round=0, role="baseline", kernel_sha256=kernel.ref.sha256, measurements=baseline
            ),
        ]
        self.append(config.run_id, None, items, [kernel.content])
        return PlanResult(config.run_id, kernel.ref.sha256, len(planned))

    # --- record --------------------------------------------------------------------------

    def record(self, run_id: str, result_path: Path) -> RecordResult:
        """Record one round: validate it against the run's state, decide, append."""
        result_path = Path(result_path).absolute()
        doc, result = load_round_result(result_path)
        shown = display(result_path)
        view = self.view(run_id)
        run = view.run
        if view.concluded:
            raise InputError(
                f"run {run_id!r} has concluded ({run.conclusion}); it accepts no rounds"
            )
        next_round = run.rounds_recorded + 1
        if next_round > run.max_rounds:
            raise InputError(
                f"round budget exhausted: run {run_id!r} has recorded all {run.max_rounds} rounds"
            )
        if result.round != next_round:
            raise InputError(
                f"round {result.round} is out of order: the next round of run {run_id!r} is "
                f"{next_round}"
            )
        if result.parent_kernel_sha256 != run.best_kernel_sha256:
            raise InputError(
                f"stale parent: parent_kernel_sha256 {result.parent_kernel_sha256} is not the "
                f"current best kernel of run {run_id!r} ({run.best_kernel_sha256})"
            )
        candidate = read_kernel(resolve(result_path, result.candidate.path), "candidate.path")
        planned = [c.case_id for c in view.cases]
        evidence = check_validation(
            resolve(result_path, result.verification.manifest),
            kernel_sha256=candidate.ref.sha256,
            planned_case_ids=planned,
            allowed_parents=[run.run_id, run.parent_run_id],
        )
        measured: list[Measurement] | None = None
        if evidence.passed:
            rows = parse_measurements(result.measurements, "measurements", shown)
            measured = _measurements(rows, planned, result_path, "measurements")
        submitted = RoundSubmitted(
            round=result.round,
            parent_kernel_sha256=result.parent_kernel_sha256,
            candidate=candidate.ref,
            hypothesis=result.hypothesis,
            change=result.change,
            mechanism=result.mechanism,
            profiler_signals=result.profiler_signals,
            result=FileRef(path=str(result_path), sha256=doc.sha256, size=doc.size),
            result_document=doc.value,
        )
        decided = decide_round(
            view=view,
            round_no=result.round,
            candidate_sha256=candidate.ref.sha256,
            candidate_path=candidate.ref.path,
            candidate_medians=[m.median_us for m in measured] if measured is not None else None,
        )
        items: list[Event] = [
            submitted,
            _validation_event(result.round, candidate.ref.sha256, evidence),
        ]
        if measured is not None:
            items.append(
                MeasurementsRecorded(
                    round=result.round,
                    role="candidate",
                    kernel_sha256=candidate.ref.sha256,
                    measurements=measured,
                )
            )
        items.append(decided)
        after, _ = self.append(run_id, view, items, [candidate.content])
        return RecordResult(
            run_id=run_id,
            round=decided.round,
            decision=decided.decision,
            relative_improvement=decided.relative_improvement,
            worst_case_regression=decided.worst_case_regression,
            cumulative_improvement=decided.cumulative_improvement,
            target_met=decided.target_met,
            needs_diagnosis=decided.needs_diagnosis,
            remaining_rounds=decided.remaining_rounds,
            best_kernel_sha256=after.run.best_kernel_sha256,
        )

    # --- analyze -------------------------------------------------------------------------

    def conclude(self, run_id: str) -> RunView:
        """Conclude the run once; a concluded run is returned as it is."""
        view = self.full_view(run_id)
        if view.concluded:
            return view
        after, _ = self.append(run_id, view, [conclusion_event(view)], [])
        return projections.RunView(run=after.run, cases=after.cases, rounds=view.rounds)

    def planned_event(self, run_id: str) -> RunPlanned:
        with self.store.transaction() as conn:
            first = self.store.read_version(conn, run_id, 1)
        if first is None:
            raise InputError(f"run {run_id!r} is not in the ledger")
        event = first.event()
        assert isinstance(event, RunPlanned)
        return event

    def stream(self, run_id: str) -> list[StoredEvent]:
        with self.store.transaction() as conn:
            return self.store.read_stream(conn, run_id)

    def kernel_source(self, digest: str) -> bytes | None:
        with self.store.transaction() as conn:
            return self.store.get_blob(conn, digest)


_OBJECTIVE_KEYS = {
    "target_relative_improvement",
    "min_relative_improvement",
    "noise_floor",
    "max_case_regression",
}


def round_summary(row: projections.RoundRow) -> dict[str, Any]:
    return projections.as_dict(row)


@dataclass(frozen=True)
class AnalyzeResult:
    run_id: str
    status: str
    target_met: bool
    best_kernel_sha256: str
    output_dir: Path
    analysis_path: Path


def analyze(service: LedgerService, run_id: str, output_dir: Path) -> AnalyzeResult:
    """Conclude the run (once) and write analysis.json, report.md and manifest.json."""
    from ledger import analysis

    output_dir = Path(output_dir).absolute()
    view = service.full_view(run_id)  # unknown runs are refused before anything is written
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        probe = output_dir / ".kernel-ledger-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise InputError(
            f"cannot write to the output folder {display(output_dir)}: {exc.strerror or exc}"
        ) from None
    view = service.conclude(run_id)
    plan = service.planned_event(run_id)
    stream = service.stream(run_id)
    document = analysis.analysis_document(view, plan, last_event_hash=stream[-1].event_hash)
    files = {
        "analysis.json": analysis.dumps(document),
        "report.md": analysis.report_markdown(document).encode(),
    }
    manifest = analysis.performance_manifest(
        view,
        plan,
        files=files,
        command=["kernel-ledger", "analyze", "--run", run_id, "--output-dir", str(output_dir)],
    )
    files["manifest.json"] = analysis.dumps(manifest)
    for name, data in files.items():
        (output_dir / name).write_bytes(data)
    return AnalyzeResult(
        run_id=run_id,
        status=str(view.run.conclusion),
        target_met=view.run.target_met,
        best_kernel_sha256=view.run.best_kernel_sha256,
        output_dir=output_dir,
        analysis_path=output_dir / "analysis.json",
    )
