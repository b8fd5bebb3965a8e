"""One method per use case: read the stream, decide with the pure core (ledger/core/controller.py
and ledger/core/decide.py), append events and
projections in one transaction. A reader who opens this file sees the whole workflow.

    plan     config file  -> RunPlanned, ValidationLinked, MeasurementsRecorded (baseline)
    record   round result -> [RunReopened], RoundSubmitted, ValidationLinked,
                             [MeasurementsRecorded], RoundDecided
    analyze  run          -> RunConcluded (once), then analysis.json, report.md, manifest.json
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ledger import files
from ledger.core import decide, projections
from ledger.core.controller import (
    attribution_settings,
    conclusion_event,
    profile_event,
    samples_not_found,
    settings_from,
    sources_not_samples,
)
from ledger.core.events import (
    CaseWeight,
    DiagnosisRecorded,
    Event,
    FileRef,
    LimitFields,
    Measurement,
    MeasurementsRecorded,
    NamedPath,
    NoiseMeasured,
    ObjectiveFields,
    ProfileRecorded,
    RoundDecided,
    RoundSubmitted,
    RunPlanned,
    RunReopened,
    ValidationLinked,
)
from ledger.core.evidence import EVIDENCE_EVENT_TYPES, DecisionScope, RunEvidence
from ledger.core.projections import RunView
from ledger.core.round import admit, round_events
from ledger.errors import (
    ConflictError,
    InputError,
    LedgerError,
    LedgerMissing,
)
from ledger.inputs.jsonio import JsonFile, display, read_bytes, read_json
from ledger.inputs.models import (
    MeasurementIn,
    RoundResult,
    Sha256,
    ValidationEvidence,
    base_folder,
    check_measurements,
    check_validation,
    config_warnings,
    failed_validation_cases,
    load_config,
    load_round_result,
    parse_measurements,
    resolve,
    validate_model,
)
from ledger.integrity.hashing import sha256_hex
from ledger.store import readmodel
from ledger.store.eventstore import NewEvent, Store, StoredEvent


def utc_now() -> str:
    """RFC 3339 UTC with microseconds, ending in Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class PlanResult:
    run_id: str
    kernel_sha256: str
    case_count: int
    samples_not_found: tuple[str, ...] = ()  # baseline cases whose `source` was not there
    events: tuple[Event, ...] = ()  # as appended, documents as parsed from the files
    warnings: tuple[str, ...] = ()
    dry_run: bool = False
    sources_not_samples: tuple[str, ...] = ()  # baseline cases whose `source` holds no samples


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
    flags: tuple[str, ...] = ()
    samples_not_found: tuple[str, ...] = ()  # cases whose `source` was not there
    events: tuple[Event, ...] = ()  # as appended, documents as parsed from the files
    already_recorded: bool = False  # a retry of a round recorded from this very file
    sources_not_samples: tuple[str, ...] = ()  # cases whose `source` holds no samples


@dataclass(frozen=True)
class KernelFile:
    ref: FileRef
    content: bytes


def recorded_file(path: Path, sha256: str, size: int, written: str | None = None) -> FileRef:
    """The FileRef of a file that was read: its absolute path; the path as the naming file
    wrote it (`written`), when that differs; and, when following symlinks leads elsewhere,
    the path it resolved to."""
    try:
        resolved = os.path.realpath(path, strict=True)
    except (OSError, ValueError):
        resolved = None
    return FileRef(
        path=str(path),
        sha256=sha256,
        size=size,
        resolved_path=resolved if resolved is not None and resolved != str(path) else None,
        written_path=written if written is not None and written != str(path) else None,
    )


def read_kernel(path: Path, what: str, written: str | None = None) -> KernelFile:
    data = read_bytes(path, what)
    digest = sha256_hex(data)
    return KernelFile(recorded_file(path, digest, len(data), written), data)


def _measurement(row: MeasurementIn, base_dir: Path, field: str) -> Measurement:
    """Normalize one measurement: read raw samples from `source` (relative to `base_dir`;
    a JSON list of µs, {"unit", "samples"} or a Duration(us) CSV), compute the median when
    it is absent, check it when both are given. A `source` that does not exist is noted in
    `source_not_found`. Extra keys are kept verbatim. (ledger.inputs.samples is imported only
    where there are samples.)"""
    median = row.median_us
    samples = list(row.samples_us) if row.samples_us is not None else None
    source = not_found = not_samples = None
    path = resolve(base_dir, row.source) if row.source is not None else None
    if row.source is None or path is None:
        pass
    elif not path.exists():
        # named but absent: accepted as the JSON-file controller accepts it (it never reads
        # the file); the median and repeats must then be given, and the row says so
        if samples is None and (median is None or row.repeats is None):
            missing = "median_us" if median is None else "repeats"
            raise InputError(
                f"{field}.{missing} is required: the samples file {field}.source "
                f"{display(path)} does not exist"
            )
        written = row.source if row.source != str(path) else None
        not_found = NamedPath(path=str(path), written_path=written)
    else:
        from ledger.inputs import samples as raw

        try:
            loaded = raw.load_samples_file(path)
        except raw.NotSamples as exc:
            # a file that is there but holds no samples (a benchmark log, a dump of another
            # shape): the controller never reads it either. Its bytes are recorded as
            # evidence and the row's median and repeats stand on their own.
            if samples is None and (median is None or row.repeats is None):
                missing = "median_us" if median is None else "repeats"
                raise InputError(
                    f"{field}.{missing} is required: {field}.source {display(path)} is not "
                    f"a samples file ({exc.reason})"
                ) from None
            source = recorded_file(path, exc.sha256, exc.size, row.source)
            not_samples = exc.reason
            loaded = None
        if loaded is not None:
            source = recorded_file(path, loaded.sha256, path.stat().st_size, row.source)
            if samples is None:
                samples = list(loaded.samples_us)
            elif len(samples) != len(loaded.samples_us) or any(
                abs(a - b) > 1e-9 * b for a, b in zip(samples, loaded.samples_us, strict=True)
            ):
                raise InputError(f"{field}.samples_us differ from the samples in {field}.source")
    if samples is not None:
        from ledger.inputs import samples as raw

        if median is None:
            median = raw.median(samples)
        else:
            raw.check_median_agrees(median, samples, label=f"{field}.median_us")
    repeats = row.repeats if row.repeats is not None else len(samples or ())
    assert median is not None
    return Measurement(
        case_id=row.case_id,
        median_us=median,
        repeats=repeats,
        samples_us=samples,
        source=source,
        extra=dict(row.model_extra or {}),
        source_not_found=not_found,
        source_not_samples=not_samples,
    )


def measured_cases(
    rows: Sequence[MeasurementIn], planned: Sequence[str], base_dir: Path, field: str
) -> list[Measurement]:
    """One checked measurement per planned case, in plan order, raw sample files (relative
    to `base_dir`) ingested."""
    by_case = check_measurements(rows, planned, field)
    index = {id(row): i for i, row in enumerate(rows)}
    return [
        _measurement(by_case[c], base_dir, f"{field}[{index[id(by_case[c])]}]") for c in planned
    ]


def validation_event(round_no: int, kernel_sha256: str, ev: ValidationEvidence) -> ValidationLinked:
    """The event linking a checked validation manifest to the kernel it covers."""
    return ValidationLinked(
        round=round_no,
        kernel_sha256=kernel_sha256,
        manifest=recorded_file(
            ev.manifest_path, ev.manifest_sha256, ev.manifest_size, ev.manifest_written
        ),
        manifest_run_id=ev.manifest.run_id,
        manifest_parent_run_id=ev.manifest.parent_run_id,
        status=ev.manifest.status,
        case_matrix=recorded_file(
            ev.case_matrix_path, ev.case_matrix_sha256, ev.case_matrix_size, ev.case_matrix_written
        ),
        case_ids=ev.case_ids,
    )


def submitted_event(
    result: RoundResult, candidate: KernelFile, source: FileRef, document: dict[str, Any]
) -> RoundSubmitted:
    """The RoundSubmitted of a checked round result: `source` is the file it was read from
    and `document` the result as written there."""
    return RoundSubmitted(
        round=result.round,
        parent_kernel_sha256=result.parent_kernel_sha256,
        candidate=candidate.ref,
        hypothesis=result.hypothesis,
        change=result.change,
        mechanism=result.mechanism,
        profiler_signals=result.profiler_signals,
        expected_signal=(
            result.expected_signal.model_dump(mode="json") if result.expected_signal else None
        ),
        result=source,
        result_document=document,
    )


def checked_round(
    result: RoundResult,
    path: Path,
    candidate: KernelFile,
    view: RunView,
    field: str,
    *,
    base: Path,
    manifest: Path | None = None,
) -> tuple[ValidationLinked, list[Measurement] | None]:
    """A round result's validation (its manifest must vouch for the candidate and cover
    exactly the planned cases) and, when it passed, the candidate's measurements (`field`
    names them in errors); `path` is the file the result was read from. Relative paths in it
    resolve against `base`; `manifest`, when given, is where its verification manifest was
    found instead."""
    planned = [c.case_id for c in view.cases]
    validation = check_validation(
        manifest if manifest is not None else resolve(base, result.verification.manifest),
        kernel_sha256=candidate.ref.sha256,
        planned_case_ids=planned,
        allowed_parents=[view.run.run_id, view.run.parent_run_id],
        written=result.verification.manifest,
    )
    measured = None
    if validation.passed:
        rows = parse_measurements(result.measurements, field, display(path))
        measured = measured_cases(rows, planned, base, field)
    return validation_event(result.round, candidate.ref.sha256, validation), measured


def _round_candidate(stream: Sequence[StoredEvent], round_no: int, run_id: str) -> str:
    for record in stream:
        if record.event_type == "RoundSubmitted":
            event = record.event()
            assert isinstance(event, RoundSubmitted)
            if event.round == round_no:
                return event.candidate.sha256
    raise InputError(f"run {run_id!r} has no round {round_no}")


def _run_kernels(stream: Sequence[StoredEvent]) -> set[str]:
    kernels = set()
    for record in stream:
        if record.event_type in ("RunPlanned", "RoundSubmitted"):
            event = record.event()
            ref = event.kernel if isinstance(event, RunPlanned) else event.candidate  # type: ignore[union-attr]
            kernels.add(ref.sha256)
    return kernels


def _plan_of(stream: Sequence[StoredEvent]) -> RunPlanned:
    event = stream[0].event()
    assert isinstance(event, RunPlanned)
    return event


@dataclass(frozen=True)
class PlannedRun:
    """What `plan` appends for a configuration: the events in order and the kernel read."""

    events: tuple[Event, ...]
    kernel: KernelFile


def plan_events(
    doc: JsonFile,
    config: Any,
    base_dir: Path,
    *,
    statistics: dict[str, Any] | None = None,
    warnings: Sequence[str] = (),
) -> PlannedRun:
    """Check a loaded run configuration and build the events that lock the run.

    Shared by `plan` and the legacy importer, so an imported run passes exactly the checks
    a planned one does. Relative paths in the configuration resolve against `base_dir` (the
    working directory, as for the JSON-file controller). Reads the kernel, the baseline
    files and the validation manifest; writes nothing. `statistics`, when given, replaces
    the configuration's own `statistics` settings (the JSON-file controller's command line
    decides on medians alone).
    """
    config_path = doc.path.absolute()
    settings_from(config.target.model_dump(mode="json"), doc.value)  # refuse bad settings now
    from ledger.core.stats import StatisticsConfig

    # Checked now, and recorded with the bootstrap variant in force, so that a replay tells
    # this run from one planned before the key existed (StatisticsConfig.from_recorded).
    statistics = StatisticsConfig.planned(config.statistics if statistics is None else statistics)
    kernel = read_kernel(
        resolve(base_dir, config.kernel.path), "kernel.path", written=config.kernel.path
    )
    planned = config.case_ids
    baseline = measured_cases(config.baseline, planned, base_dir, "baseline")
    evidence = check_validation(
        resolve(base_dir, config.validation_manifest),
        kernel_sha256=kernel.ref.sha256,
        planned_case_ids=planned,
        written=config.validation_manifest,
    )
    if not evidence.passed:
        raise InputError(
            f"validation manifest {display(evidence.manifest_path)} has status "
            f"{evidence.manifest.status!r}; the starting kernel must have passed"
        )
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
        statistics=statistics,
        measurement_policy=config.measurement_policy,
        config=recorded_file(config_path, doc.sha256, doc.size),
        config_document=doc.value,
        warnings=list(warnings) or None,
    )
    events = (
        planned_event,
        validation_event(0, kernel.ref.sha256, evidence),
        MeasurementsRecorded(
            round=0, role="baseline", kernel_sha256=kernel.ref.sha256, measurements=baseline
        ),
    )
    return PlannedRun(events, kernel)


def _indexed_evidence(
    store: Store, conn: Any, view: RunView, scope: DecisionScope
) -> tuple[RunPlanned, RunEvidence] | None:
    """`LedgerService.decision_evidence` through the events-by-type index: the events a
    decision in `scope` reads (the plan, the best round's measurements, the latest profile
    of each kernel, and while the run needs a diagnosis the last diagnosis and the decisions
    after it on a round that was not kept and named a mechanism), folded by
    `RunEvidence.apply` in version order. None where the run needs the
    whole fold (remeasures) or its events are not laid out as `plan` and `record` append
    them (the baseline's measurements first, each round's before its decision)."""
    run_id = view.run.run_id
    rare = readmodel.type_versions(conn, run_id, ("NoiseMeasured", "DiagnosisRecorded"))
    if any(kind == "NoiseMeasured" for _, kind in rare):
        return None
    if scope.best_round == 0:
        measured = readmodel.nth_version(conn, run_id, "MeasurementsRecorded", 1)
    else:
        decided = readmodel.nth_version(conn, run_id, "RoundDecided", scope.best_round)
        measured = (
            readmodel.last_version_before(conn, run_id, "MeasurementsRecorded", decided)
            if decided is not None
            else None
        )
    if measured is None:
        return None
    wanted = {1, measured}
    if scope.failures:
        diagnoses = [version for version, kind in rare if kind == "DiagnosisRecorded"]
        after = diagnoses[-1] if diagnoses else 0
        wanted.update(diagnoses[-1:])
        decided = readmodel.versions_after(conn, run_id, "RoundDecided", after)
        # the i-th decision since the diagnosis is of round `first + i`; the reducer reads
        # only a round that was not kept and named a mechanism (the rounds rows say which)
        first = view.run.rounds_recorded - len(decided) + 1
        failed = readmodel.failed_rounds(conn, run_id, first)
        wanted.update(v for i, v in enumerate(decided, start=first) if i in failed)
    for kernel in sorted(scope.kernels):
        version = readmodel.latest_profile_version(conn, run_id, kernel)
        if version is not None:
            wanted.add(version)
    found = {e.stream_version: e.event() for e in readmodel.read_versions(conn, run_id, wanted)}
    plan, best = found.get(1), found.get(measured)
    if not isinstance(plan, RunPlanned):
        return None
    if not isinstance(best, MeasurementsRecorded) or best.round != scope.best_round:
        return None
    evidence = RunEvidence()
    for version in sorted(found):
        evidence.apply(found[version])
    return plan, evidence.within(scope)


class NoiseFile(BaseModel):
    """An A/A remeasure: the kernel it timed (must be the current best) and its timings."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True, defer_build=True)
    kernel_sha256: Sha256
    measurements: list[MeasurementIn]


class LedgerService:
    """The application service. Construct it with a store; every method is one use case."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], str] = utc_now,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self._store: Store | None = store
        self._open_store: Callable[[], Store] | None = None
        self.clock = clock
        self.new_id = new_id

    @classmethod
    def opening(
        cls,
        open_store: Callable[[], Store],
        *,
        clock: Callable[[], str] = utc_now,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> LedgerService:
        """A service that opens its store on first use: a use case checks its input files
        first, so a bad file is rejected (exit 2) before the ledger is opened, or created."""
        service = cls(None, clock=clock, new_id=new_id)  # type: ignore[arg-type]
        service._open_store = open_store
        return service

    def close(self) -> None:
        """Close the store, if it was opened."""
        if self._store is not None:
            self._store.close()

    @property
    def store(self) -> Store:
        if self._store is None:
            assert self._open_store is not None
            self._store = self._open_store()
        return self._store

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
            stored, written = self.store.append_or_find(conn, run_id, expected, batch)
            if not written:
                # a retry of an append that succeeded (same event ids, same content): answer
                # as that append did, write nothing
                return self._replayed(before, stored, items), stored
            self.store.put_blobs(conn, list(blobs))
            after = self._replayed(before, stored, items)
            self.store.save_view(conn, before, after)
        return after, stored

    @staticmethod
    def _replayed(
        before: RunView | None, stored: Sequence[StoredEvent], items: Sequence[Event]
    ) -> RunView:
        """The view right after `stored`: the append's events folded in one call."""
        return projections.fold_into(
            before,
            (
                (record.stream_version, record.recorded_at, item)
                for record, item in zip(stored, items, strict=True)
            ),
        )

    def view(self, run_id: str) -> RunView:
        with self.store.transaction() as conn:
            view = self.store.load_view(conn, run_id)
        if view is None:
            raise InputError(f"run {run_id!r} is not in the ledger")
        return view

    def state(
        self, run_id: str, *, evidence_only: bool = False
    ) -> tuple[RunView, list[StoredEvent]]:
        """The run's projection and its events, read in one transaction; with `evidence_only`,
        just the events the evidence fold (and the plan) uses."""
        types = EVIDENCE_EVENT_TYPES if evidence_only else None
        with self.store.transaction() as conn:
            view = self.store.load_view(conn, run_id)
            stream = self.store.read_stream(conn, run_id, types=types) if view is not None else []
        if view is None:
            raise InputError(f"run {run_id!r} is not in the ledger")
        return view, stream

    def decision_evidence(
        self, view: RunView, kernels: Sequence[str]
    ) -> tuple[RunPlanned, RunEvidence]:
        """The run's plan and what a decision on its next round reads of its events (the
        best round's measurements, the latest profile of each of `kernels`, the failed
        mechanisms since the last diagnosis while the run needs one): the events found
        through the events-by-type index, a few lookups whatever the run's length, folded
        by the reducer the verifier folds every event with (`RunEvidence.apply`), cut to
        the decision's scope (`RunEvidence.within`). A run with A/A remeasures folds its
        evidence events whole (the noise pairs need every measurement of the remeasured
        kernels) and is cut the same way. `view` must be the run's current projection:
        another writer in between is a conflict."""
        run_id = view.run.run_id
        scope = DecisionScope.of(view, kernels)
        with self.store.transaction() as conn:
            head = self.store.stream_head(conn, run_id)[0]
            if head != view.run.stream_version:
                raise ConflictError(
                    f"run {run_id} is at version {head}, not {view.run.stream_version}: "
                    "another writer recorded first; nothing was written, retry"
                )
            found = _indexed_evidence(self.store, conn, view, scope)
            if found is not None:
                return found
            stream = self.store.read_stream(conn, run_id, types=EVIDENCE_EVENT_TYPES)
        evidence = RunEvidence()
        for record in stream:
            evidence.apply(record.event())
        return _plan_of(stream), evidence.within(scope)

    def full_view(self, run_id: str) -> RunView:
        with self.store.transaction() as conn:
            view = self.store.stored_projection(conn, run_id)
        if view is None:
            raise InputError(f"run {run_id!r} is not in the ledger")
        return view

    # --- plan ----------------------------------------------------------------------------

    def plan(
        self,
        config_path: Path,
        *,
        base_dir: Path | None = None,
        statistics: dict[str, Any] | None = None,
        check: Callable[[Sequence[Event]], None] | None = None,
        dry_run: bool = False,
    ) -> PlanResult:
        """Validate a run configuration and lock the run. Relative paths in the configuration
        resolve against `base_dir` (default: the working directory). `statistics` replaces the
        configuration's statistics settings (see `plan_events`); `check`, a caller's own
        rule, sees the events about to be appended and raises to refuse them. With
        `dry_run`, only check (the run id too, where a ledger exists) and write nothing."""
        doc, config = load_config(Path(config_path).absolute())
        warnings = tuple(config_warnings(doc.value))
        planned = plan_events(
            doc, config, base_folder(base_dir), statistics=statistics, warnings=warnings
        )
        try:
            with self.store.transaction() as conn:
                if self.store.stream_head(conn, config.run_id)[0] != 0:
                    raise InputError(f"run {config.run_id!r} is already in the ledger")
        except LedgerMissing:
            if not dry_run:
                raise
        if check is not None:
            check(planned.events)
        if not dry_run:
            self.append(config.run_id, None, list(planned.events), [planned.kernel.content])
        baseline = planned.events[2]
        assert isinstance(baseline, MeasurementsRecorded)
        return PlanResult(
            config.run_id,
            planned.kernel.ref.sha256,
            len(config.case_ids),
            tuple(samples_not_found(baseline)),
            planned.events,
            warnings,
            dry_run,
            tuple(sources_not_samples(baseline)),
        )

    # --- record --------------------------------------------------------------------------

    def record(
        self,
        run_id: str,
        result_path: Path,
        *,
        base_dir: Path | None = None,
        reopen: str | None = None,
        check: Callable[[Sequence[Event]], None] | None = None,
    ) -> RecordResult:
        """Record one round: validate it against the run's state, decide, append. Relative
        paths in the round result resolve against `base_dir` (default: the working
        directory).

        A concluded run accepts no rounds, unless `reopen` gives the reason to take one
        anyway (as the JSON-file controller does): then RunReopened goes before the round,
        in the same append, so a refused round leaves the run concluded. `check`, a caller's
        own rule, sees the events about to be appended and raises to refuse them."""
        base = base_folder(base_dir)
        result_path = Path(result_path).absolute()
        doc, result = load_round_result(result_path)
        view = self.view(run_id)
        run = view.run
        if 1 <= result.round <= run.rounds_recorded:
            return self._recorded(run, result.round, doc.sha256)
        refused = admit(view, result.round, result.parent_kernel_sha256)
        items: list[Event] = []
        if refused and refused[0].rule == "concluded" and reopen is not None:
            conclusion = str(run.conclusion)
            items.append(RunReopened(conclusion=conclusion, round=result.round, reason=reopen))
            refused = refused[1:]
        if refused:
            raise InputError(refused[0].message)
        candidate = read_kernel(
            resolve(base, result.candidate.path), "candidate.path", written=result.candidate.path
        )
        plan, evidence = self.decision_evidence(
            view, [run.best_kernel_sha256, candidate.ref.sha256]
        )
        validation, measured = checked_round(
            result, result_path, candidate, view, "measurements", base=base
        )
        outcome = round_events(
            view=view,
            evidence=evidence,
            plan=plan,
            submitted=submitted_event(
                result, candidate, recorded_file(result_path, doc.sha256, doc.size), doc.value
            ),
            validation=validation,
            measurements=measured,
        )
        items += outcome.events
        if check is not None:
            check(items)
        after, _ = self.append(run_id, view, items, [candidate.content])
        decision = outcome.decided
        return RecordResult(
            run_id=run_id,
            round=decision.round,
            decision=decision.decision,
            relative_improvement=decision.relative_improvement,
            worst_case_regression=decision.worst_case_regression,
            cumulative_improvement=decision.cumulative_improvement,
            target_met=decision.target_met,
            needs_diagnosis=decision.needs_diagnosis,
            remaining_rounds=decision.remaining_rounds,
            best_kernel_sha256=after.run.best_kernel_sha256,
            flags=tuple(decision.flags),
            samples_not_found=tuple(samples_not_found(evidence.measured.get(decision.round))),
            events=tuple(items),
            sources_not_samples=tuple(sources_not_samples(evidence.measured.get(decision.round))),
        )

    def _recorded(self, run: Any, round_no: int, result_sha256: str) -> RecordResult:
        """A round already in the ledger: the answer it got when this same result file was
        recorded (a retry after the commit; nothing is written), else a rejection that
        names its decision."""
        from ledger.store.history import RoundFilter, query_rounds

        with self.store.transaction() as conn:
            version = readmodel.nth_version(conn, run.run_id, "RoundSubmitted", round_no)
            submitted = (
                self.store.read_version(conn, run.run_id, version) if version is not None else None
            )
            rows = query_rounds(conn, RoundFilter(run_id=run.run_id))
        row = next((r for r in rows if r.round == round_no), None)
        event = submitted.event() if submitted is not None else None
        if row is None or not isinstance(event, RoundSubmitted):
            raise InputError(f"round {round_no} of run {run.run_id!r} is already recorded")
        if event.result.sha256 != result_sha256:
            raise InputError(
                f"round {round_no} is out of order: run {run.run_id!r} already recorded it "
                f"(decided {row.decision}, from another result file); the next round is "
                f"{run.rounds_recorded + 1}"
            )
        return RecordResult(
            run_id=run.run_id,
            round=round_no,
            decision=row.decision,
            relative_improvement=row.relative_improvement,
            worst_case_regression=row.worst_case_regression,
            cumulative_improvement=row.cumulative_improvement,
            target_met=row.target_met,
            needs_diagnosis=row.needs_diagnosis,
            remaining_rounds=row.remaining_rounds,
            best_kernel_sha256=row.best_kernel_sha256,
            flags=tuple(f for f in (row.flags or "").split(",") if f),
            already_recorded=True,
        )

    # --- profiles and diagnosis ---------------------------------------------------------

    def profile(
        self,
        run_id: str,
        path: Path,
        *,
        baseline: bool = False,
        round_no: int | None = None,
        kernel_sha256: str | None = None,
        kernel_name: str | None = None,
        shape: str | None = None,
    ) -> ProfileRecorded:
        """Ingest profiler output for one kernel of the run and attribute its bottleneck."""
        from ledger.inputs.profiles import load_profile

        if sum((baseline, round_no is not None, kernel_sha256 is not None)) != 1:
            raise InputError("name exactly one of --baseline, --round N or --kernel SHA256")
        view, stream = self.state(run_id)
        plan = _plan_of(stream)
        if baseline:
            subject, sha, round_no = "baseline", plan.kernel.sha256, 0
        elif round_no is not None:
            subject, sha = "round", _round_candidate(stream, round_no, run_id)
        else:
            subject, sha = "kernel", str(kernel_sha256)
            if sha not in _run_kernels(stream):
                raise InputError(f"kernel {sha} is not a kernel of run {run_id!r}")
        path = Path(path).absolute()
        parsed = load_profile(path, kernel_name=kernel_name, shape=shape)
        base = path if path.is_dir() else path.parent
        files, blobs = [], []
        for source in parsed.files:
            full = (
                (base / source.path).resolve()
                if not Path(source.path).is_absolute()
                else Path(source.path)
            )
            data = read_bytes(full, "profile file")
            if sha256_hex(data) != source.sha256:
                raise InputError(f"profile file {display(full)} changed while it was read")
            files.append(recorded_file(full, source.sha256, source.size))
            blobs.append(data)
        event = profile_event(
            attribution_settings(plan),
            subject=subject,
            round_no=round_no,
            kernel_sha256=sha,
            origin="file",
            fmt=parsed.format,
            signals=dict(parsed.signals),
            attributes=dict(parsed.attributes),
            files=files,
            aggregation=parsed.aggregation,
            kernel_name=parsed.kernel_name,
            notes=list(parsed.notes),
            shapes=[(p.shape, p.launches, p.total_us, dict(p.signals)) for p in parsed.shapes],
        )
        self.append(run_id, view, [event], blobs)
        return event

    def diagnose(self, run_id: str, bottleneck: str, evidence_text: str) -> DiagnosisRecorded:
        """Record a new bottleneck model; the consecutive-failure count restarts."""
        from ledger.core.bottleneck import Bottleneck

        classes = [b.value for b in Bottleneck]
        if bottleneck not in classes:
            raise InputError(
                f"--bottleneck must be one of {', '.join(classes)}, not {bottleneck!r}"
            )
        if not evidence_text.strip():
            raise InputError("--evidence must say what supports the new bottleneck model")
        view = self.view(run_id)
        if view.concluded:
            raise InputError(f"run {run_id!r} has concluded ({view.run.conclusion})")
        event = DiagnosisRecorded(
            bottleneck=bottleneck,
            evidence=evidence_text.strip(),
            after_round=view.run.rounds_recorded,
            consecutive_failures_before=view.run.consecutive_failures,
        )
        self.append(run_id, view, [event], [])
        return event

    # --- noise remeasurement ----------------------------------------------------------------

    def noise(self, run_id: str, path: Path, *, base_dir: Path | None = None) -> dict[str, Any]:
        """Record an A/A remeasure of the current best kernel; report the drift estimate.
        Relative `source` paths resolve against `base_dir` (default: the working directory)."""
        from ledger.core import stats

        base = base_folder(base_dir)
        path = Path(path).absolute()
        doc = read_json(path, "measurements file")
        shown = display(path)
        item = validate_model(NoiseFile, doc.value, "measurements file", shown)
        view, stream = self.state(run_id, evidence_only=True)
        if view.concluded:
            raise InputError(f"run {run_id!r} has concluded ({view.run.conclusion})")
        if item.kernel_sha256 != view.run.best_kernel_sha256:
            raise InputError(
                f"measurements file {shown} names kernel {item.kernel_sha256}, not the current "
                f"best kernel of run {run_id!r} ({view.run.best_kernel_sha256})"
            )
        planned = [c.case_id for c in view.cases]
        measured = measured_cases(item.measurements, planned, base, "measurements")
        event = NoiseMeasured(
            kernel_sha256=item.kernel_sha256,
            after_round=view.run.rounds_recorded,
            measurements=measured,
            source=recorded_file(path, doc.sha256, doc.size),
        )
        evidence = RunEvidence()
        for record in stream:
            evidence.apply(record.event())
        evidence.apply(event)
        self.append(run_id, view, [event], [])
        config = stats.StatisticsConfig.from_recorded(evidence.statistics)
        weights = [c.weight for c in view.cases]
        drift = stats.estimate_drift(evidence.noise_pairs, weights=weights, config=config)
        return {
            "run_id": run_id,
            "kernel_sha256": item.kernel_sha256,
            "pairs": len(evidence.noise_pairs),
            **drift.to_evidence(),
        }

    # --- queries -------------------------------------------------------------------------

    def round_detail(self, run_id: str, round_no: int) -> dict[str, Any]:
        """One round in full: what was submitted, validated, measured, profiled and decided."""
        _, stream = self.state(run_id)
        detail: dict[str, Any] = {"run_id": run_id, "round": round_no, "profiles": []}
        for record in stream:
            event = record.event()
            if getattr(event, "round", None) != round_no:
                continue
            payload = record.payload_value()
            payload["seq"] = record.seq
            key = {
                "RoundSubmitted": "submitted",
                "ValidationLinked": "validation",
                "MeasurementsRecorded": "measurements",
                "RoundDecided": "decision",
                "RunReopened": "reopened",
            }.get(record.event_type)
            if record.event_type == "ProfileRecorded":
                detail["profiles"].append(payload)
            elif key is not None and (round_no > 0 or key in ("validation", "measurements")):
                detail[key] = payload
        if round_no > 0 and "decision" not in detail:
            raise InputError(f"run {run_id!r} has no round {round_no}")
        if "decision" in detail:
            from ledger.core.explain import describe_flag, explain

            decided = RoundDecided.model_validate(
                {k: v for k, v in detail["decision"].items() if k != "seq"}
            )
            failed = None
            if "validation" in detail and detail["validation"]["status"] != "passed":
                linked = {k: v for k, v in detail["validation"].items() if k != "seq"}
                failed = failed_validation_cases(ValidationLinked.model_validate(linked))
            why = explain(decided, failed_cases=failed)
            detail["explanation"] = {
                "rule": why.rule,
                "sentence": why.sentence,
                "worst_case": why.worst_case,
                "flags": {f: describe_flag(f) for f in why.flags},
            }
        return detail

    def explanations(self, run_id: str) -> dict[int, Any]:
        """Why each round got its decision (`explain.explain`), by round, from the run's
        RoundDecided and failed ValidationLinked events (read through the type index)."""
        from ledger.core.explain import explain

        with self.store.transaction() as conn:
            stored = self.store.read_stream(
                conn, run_id, types=("RoundDecided", "ValidationLinked")
            )
        failed: dict[int, list[str] | None] = {}
        decided: list[RoundDecided] = []
        for record in stored:
            event = record.event()
            if isinstance(event, ValidationLinked) and event.status != "passed":
                failed[event.round] = failed_validation_cases(event)
            elif isinstance(event, RoundDecided):
                decided.append(event)
        return {d.round: explain(d, failed_cases=failed.get(d.round)) for d in decided}

    def explain_rounds(self, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], Any]:
        """`explain.explain` for each (run, round) given, each read through the type index
        (a run's n-th RoundDecided is round n): for `history`, whose rows come from the
        projection."""
        from ledger.core.explain import explain

        out: dict[tuple[str, int], Any] = {}
        with self.store.transaction() as conn:
            for run_id, number in keys:
                version = readmodel.nth_version(conn, run_id, "RoundDecided", number)
                record = self.store.read_version(conn, run_id, version) if version else None
                if record is None:
                    continue
                decided = record.event()
                if not isinstance(decided, RoundDecided) or decided.round != number:
                    continue
                failed = None
                if decided.decision == "FAIL":
                    linked_at = readmodel.last_version_before(
                        conn, run_id, "ValidationLinked", version
                    )
                    linked = self.store.read_version(conn, run_id, linked_at) if linked_at else None
                    event = linked.event() if linked else None
                    if isinstance(event, ValidationLinked) and event.round == number:
                        failed = failed_validation_cases(event)
                out[(run_id, number)] = explain(decided, failed_cases=failed)
        return out

    def compare(self, run_id: str, first: int, second: int) -> dict[str, Any]:
        """Per-case medians of two rounds (0 is the baseline) and their relative deltas."""
        view, stream = self.state(run_id)
        evidence = RunEvidence()
        for record in stream:
            evidence.apply(record.event())
        sides = []
        for number in (first, second):
            measured = evidence.measured.get(number)
            if measured is None:
                if not 0 < number <= view.run.rounds_recorded:
                    raise InputError(f"run {run_id!r} has no round {number}")
                raise InputError(
                    f"round {number} of run {run_id!r} has no measurements (a FAIL round)"
                )
            sides.append({m.case_id: m.median_us for m in measured.measurements})
        cases = []
        for case in view.cases:
            a, b = sides[0][case.case_id], sides[1][case.case_id]
            cases.append(
                {
                    "case_id": case.case_id,
                    "weight": case.weight,
                    "a_median_us": a,
                    "b_median_us": b,
                    "relative_change": (b - a) / a,
                }
            )
        weights = [c.weight for c in view.cases]
        return {
            "run_id": run_id,
            "round_a": first,
            "round_b": second,
            "cases": cases,
            "relative_improvement": decide.weighted_improvement(
                weights, [c["a_median_us"] for c in cases], [c["b_median_us"] for c in cases]
            ),
        }

    # --- analyze -------------------------------------------------------------------------

    def conclude(self, run_id: str, view: RunView | None = None) -> RunView:
        """Conclude the run once; a concluded run is returned as it is. `view`, when given,
        is the run's full view as the caller read it (a writer in between is a conflict)."""
        view = view or self.full_view(run_id)
        if view.concluded:
            return view
        after, _ = self.append(run_id, view, [conclusion_event(view)], [])
        return projections.RunView(run=after.run, cases=after.cases, rounds=view.rounds)

    def conclusion_preview(self, view: RunView) -> RunView:
        """The view `conclude` would give a run in this state, with nothing appended."""
        if view.concluded:
            return view
        event = conclusion_event(view)  # at the run's last time: the clock is not consulted
        after = projections.apply(view, view.run.stream_version + 1, view.run.updated_at, event)
        return projections.RunView(run=after.run, cases=after.cases, rounds=view.rounds)

    def planned_event(self, run_id: str) -> RunPlanned:
        with self.store.transaction() as conn:
            first = self.store.read_version(conn, run_id, 1)
        if first is None:
            raise InputError(f"run {run_id!r} is not in the ledger")
        event = first.event()
        assert isinstance(event, RunPlanned)
        return event

    def head_hash(self, run_id: str) -> str:
        """The event hash of the run's latest event."""
        with self.store.transaction() as conn:
            return self.store.stream_head(conn, run_id)[1]

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


OUTPUT_NAMES = ("analysis.json", "report.md", "manifest.json")


def _output_files(
    view: RunView,
    plan: RunPlanned,
    last_event_hash: str,
    command: list[str],
    explanations: dict[int, Any] | None = None,
):
    """analysis.json, report.md and manifest.json of a concluded run, as bytes."""
    from ledger.services import analysis

    document = analysis.analysis_document(view, plan, last_event_hash=last_event_hash)
    out = {
        "analysis.json": analysis.dumps(document),
        "report.md": analysis.report_markdown(document, explanations).encode(),
    }
    manifest = analysis.performance_manifest(view, plan, files=out, command=command)
    out["manifest.json"] = analysis.dumps(manifest)
    return out


def _output_error(output_dir: Path, *, concluded: bool) -> Callable[[OSError], LedgerError]:
    """How a failed write of the output files is reported (`files.write_failure` decides
    between exit 2 and exit 4)."""
    message = f"cannot write to the output folder {display(output_dir)}"
    after = (
        "the run is concluded: run analyze again to write its files"
        if concluded
        else "nothing was appended"
    )

    def failure(exc: OSError) -> LedgerError:
        error = files.write_failure(message, exc)
        return type(error)(f"{error.message}; {after}")

    return failure


def analyze(
    service: LedgerService, run_id: str, output_dir: Path, *, force: bool = False
) -> AnalyzeResult:
    """Conclude the run (once) and write analysis.json, report.md and manifest.json.

    The output paths are checked first (`ledger.files`: an existing file is replaced only
    with `force`, or when it already holds the bytes a concluded run's analysis writes).
    The files are then staged in the output folder (with the conclusion the run is about
    to get), so an output folder that cannot take them refuses the command before
    RunConcluded is appended; then they are rewritten with the final content and renamed
    into place."""
    output_dir = Path(output_dir).absolute()
    view = service.full_view(run_id)  # unknown runs are refused before anything is written
    plan = service.planned_event(run_id)
    explanations = service.explanations(run_id)
    command = ["kernel-ledger", "analyze", "--run", run_id, "--output-dir", str(output_dir)]
    protected = service.store.ledger_files()
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _output_error(output_dir, concluded=view.concluded)(exc) from None
    targets = {
        name: files.check_output(
            output_dir / name, what="output file", force=force, protected=protected
        )
        for name in OUTPUT_NAMES
    }
    replace = force
    existing = [name for name in OUTPUT_NAMES if os.path.lexists(targets[name])]
    if existing and not force:
        final = (
            _output_files(view, plan, service.head_hash(run_id), command, explanations)
            if view.concluded
            else {}
        )
        for name in existing:
            if name not in final or not files.same_bytes(targets[name], final[name]):
                raise InputError(
                    f"{display(output_dir / name)} exists with other content; pass --force "
                    "to overwrite it; nothing was appended"
                )
        replace = True  # the same bytes again
    staged: dict[str, files.StagedOutput] = {}
    try:
        preview = service.conclusion_preview(view)
        on_error = _output_error(output_dir, concluded=view.concluded)
        for name, data in _output_files(preview, plan, "0" * 64, command, explanations).items():
            # some slack for a round recorded meanwhile
            padded = data + b" " * max(4096, len(data) // 4)
            staged[name] = files.StagedOutput(
                targets[name], padded, force=replace, on_error=on_error
            )
        view = service.conclude(run_id, view)
        final = _output_files(view, plan, service.head_hash(run_id), command, explanations)
        for name, data in final.items():
            staged[name].on_error = _output_error(output_dir, concluded=True)
            staged[name].commit(data)
    finally:
        for output in staged.values():
            output.discard()
    return AnalyzeResult(
        run_id=run_id,
        status=str(view.run.conclusion),
        target_met=view.run.target_met,
        best_kernel_sha256=view.run.best_kernel_sha256,
        output_dir=output_dir,
        analysis_path=output_dir / "analysis.json",
    )
