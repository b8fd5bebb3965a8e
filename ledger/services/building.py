"""Events built from the files a user hands in: the kernel and candidate sources, the raw
samples behind each measurement, the validation manifest and its case matrix, the round
result and the run configuration. Each file is read once (`ledger.files`: bounded, a regular
file only), hashed and recorded with the path it was named by; nothing here writes.

Shared by `plan` and `record` (ledger/services/writes.py) and by the legacy importer
(ledger/services/legacy.py), so an imported run passes exactly the checks a recorded one
does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.core.controller import settings_from
from ledger.core.events import (
    CaseWeight,
    Event,
    FileRef,
    LimitFields,
    Measurement,
    MeasurementsRecorded,
    NamedPath,
    ObjectiveFields,
    RoundSubmitted,
    RunPlanned,
    ValidationLinked,
)
from ledger.core.projections import RunView
from ledger.errors import InputError, InputProblems
from ledger.inputs.jsonio import JsonFile, read_bytes
from ledger.inputs.models import (
    MeasurementIn,
    RoundResult,
    ValidationEvidence,
    case_rows,
    check_validation,
    parse_measurements,
    resolve,
)
from ledger.integrity.hashing import sha256_hex
from ledger.text import display


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
        why = f"the samples file {field}.source {display(path)} does not exist"
        _needs_median(row, samples, field, why)
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
            why = f"{field}.source {display(path)} is not a samples file ({exc.reason})"
            _needs_median(row, samples, field, why)
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


def _needs_median(row: MeasurementIn, samples: list[float] | None, field: str, why: str) -> None:
    """A row whose `source` gives no samples stands on its own median and repeats."""
    if samples is None and (row.median_us is None or row.repeats is None):
        missing = "median_us" if row.median_us is None else "repeats"
        raise InputError(f"{field}.{missing} is required: {why}")


def measured_cases(
    rows: Sequence[MeasurementIn], planned: Sequence[str], base_dir: Path, field: str
) -> list[Measurement]:
    """One checked measurement per planned case, in plan order, raw sample files (relative
    to `base_dir`) ingested. A refusal lists every row's problem, in row order; where a
    median disagrees with its samples it also says that median_us may be left out."""
    by_case, found = case_rows(rows, planned, field)
    measured: list[Measurement] = []
    disagrees = False
    for case in planned:
        if case not in by_case:
            continue
        index, row = by_case[case]
        try:
            measured.append(_measurement(row, base_dir, f"{field}[{index}]"))
        except InputError as exc:
            from ledger.inputs import samples as raw

            disagrees = disagrees or isinstance(exc, raw.MedianDisagrees)
            listed = exc.problems if isinstance(exc, InputProblems) else [exc.message]
            found += [(index, problem) for problem in listed]
    if found:
        from ledger.inputs.samples import MEDIAN_HINT

        found.sort(key=lambda item: item[0])  # stable: a row's problems stay in order
        hint = MEDIAN_HINT if disagrees else ""
        raise InputProblems("", [problem for _, problem in found], hint=hint)
    return measured


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
        cases_not_passed=(ev.cases_not_passed or None if ev.manifest.status == "passed" else None),
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


def checked_reference(
    result: RoundResult, path: Path, view: RunView, *, base: Path
) -> list[Measurement] | None:
    """A round result's `reference` (the parent kernel measured in the candidate's session):
    one checked measurement per planned case, or None when the result carries none. Its
    `kernel_sha256`, when given, must be the round's parent."""
    if result.reference is None:
        return None
    named = result.reference.kernel_sha256
    if named is not None and named != result.parent_kernel_sha256:
        raise InputError(
            f"reference.kernel_sha256 {named} is not the round's parent_kernel_sha256 "
            f"({result.parent_kernel_sha256}): a reference is the parent measured in the "
            "candidate's session"
        )
    planned = [c.case_id for c in view.cases]
    field = "reference.measurements"
    rows = parse_measurements(result.reference.measurements, field, display(path))
    return measured_cases(rows, planned, base, field)


def check_expected_signal(result: RoundResult, evidence: Any, kernels: Sequence[str]) -> None:
    """A round's expected_signal must name a signal the tool can know: one in the latest
    profile of the best kernel or of the candidate (`kernels`), where there is one. A name
    neither holds could never be checked, and is refused with the names they hold."""
    expected = result.expected_signal
    if expected is None:
        return
    known: set[str] = set()
    for kernel in kernels:
        known |= set(evidence.signals(kernel) or ())
    if known and expected.metric not in known:
        raise InputError(
            f"expected_signal.metric {expected.metric!r} is not a signal of the profiles the "
            f"round is checked against; they hold: {', '.join(sorted(known))}"
        )


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
    if evidence.manifest.status != "passed":
        raise InputError(
            f"validation manifest {display(evidence.manifest_path)} has status "
            f"{evidence.manifest.status!r}; the starting kernel must have passed"
        )
    if evidence.cases_not_passed:
        raise InputError(
            f"case matrix {display(evidence.case_matrix_path)} reports planned cases not "
            f"passed: {', '.join(evidence.cases_not_passed)} (whatever the manifest's status "
            "says); the starting kernel must pass every planned case"
        )
    planned_event = RunPlanned(
        run_id=config.run_id,
        parent_run_id=config.parent_run_id,
        op_name=config.op_name,
        target=config.target.model_dump(mode="json"),
        kernel=kernel.ref,
        cases=[CaseWeight(id=c.id, weight=c.weight) for c in config.cases],
        objective=ObjectiveFields(
            **config.objective.model_dump(include=set(ObjectiveFields.model_fields))
        ),
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
            round=0,
            role="baseline",
            kernel_sha256=kernel.ref.sha256,
            measurements=baseline,
            session=None if config.session is None else config.session.model_dump(mode="json"),
        ),
    )
    return PlannedRun(events, kernel)
