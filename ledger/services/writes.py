"""The use cases that append, one method each: read the run, decide with the pure core
(ledger/core/round.py, controller.py, decide.py), append events and projection rows in one
transaction (`Session.append`). `LedgerService` has them as its methods (`Writes`).

    plan      config file      -> RunPlanned, ValidationLinked, MeasurementsRecorded (baseline)
    record    round result     -> [RunReopened], RoundSubmitted, ValidationLinked,
                                  [MeasurementsRecorded], RoundDecided
    profile   profiler output  -> ProfileRecorded
    diagnose  bottleneck model -> DiagnosisRecorded
    noise     A/A remeasure    -> NoiseMeasured
    conclude  run              -> RunConcluded (once; `analyze` writes its files,
                                  ledger/services/analysis.py)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.core import projections
from ledger.core.controller import (
    SAMPLES_NOT_FOUND,
    SOURCE_NOT_SAMPLES,
    attribution_settings,
    conclusion_event,
    flagged_cases,
    profile_event,
)
from ledger.core.events import (
    DiagnosisRecorded,
    Event,
    MeasurementsRecorded,
    NoiseMeasured,
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
from ledger.errors import ConflictError, InputError, LedgerMissing
from ledger.inputs.jsonio import JsonFile, read_bytes, read_json
from ledger.inputs.models import (
    NoiseFile,
    base_folder,
    config_warnings,
    explain_inputs,
    failed_validation_cases,
    load_config,
    load_round_result,
    resolve,
    validate_model,
)
from ledger.integrity.hashing import sha256_hex
from ledger.services.building import (
    check_expected_signal,
    checked_reference,
    checked_round,
    measured_cases,
    plan_events,
    read_kernel,
    recorded_file,
    submitted_event,
)
from ledger.services.session import Session
from ledger.store import readmodel
from ledger.store.eventstore import StoredEvent
from ledger.text import display


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


def _explained(decided: RoundDecided, events: Sequence[Event]) -> Any:
    """Why the round got its decision (`explain.explain`), from the events it is decided
    with, as `show` words the stored decision."""
    from ledger.core.explain import explain

    return explain(decided, **explain_inputs(events).get(decided.round, {}))


def key_checked(kind: str, doc: JsonFile, *, strict: bool) -> list[str]:
    """The warnings about near-miss keys in an input file; with `strict`, a refusal that
    lists them all."""
    from ledger.inputs.schemas import key_warnings, refuse_strictly

    warnings = key_warnings(kind, doc.value)
    if strict:
        refuse_strictly(kind, display(doc.path), warnings)
    return warnings


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
    failed_cases: tuple[str, ...] = ()  # the cases its correctness gate failed on
    warnings: tuple[str, ...] = ()  # near-miss keys in the round result
    dry_run: bool = False  # checked and decided, nothing written
    mechanism_entry: dict[str, Any] | None = None  # entry, source (and nearest for other)
    profiles: tuple[dict[str, Any], ...] = ()  # the candidate's profiles the decision read
    mechanism_check: dict[str, Any] | None = None  # as the decision records it
    why: Any = None  # `explain.Explanation` of the decision (None: already recorded)


@dataclass(frozen=True)
class ProfileResult:
    event: ProfileRecorded  # as appended, or as recorded before (`already_recorded`)
    already_recorded: bool = False


class Writes(Session):
    """The use cases that append, one method each."""

    # --- plan ------------------------------------------------------------------------------

    def plan(
        self,
        config_path: Path,
        *,
        base_dir: Path | None = None,
        statistics: dict[str, Any] | None = None,
        check: Callable[[Sequence[Event]], None] | None = None,
        dry_run: bool = False,
        strict: bool = False,
    ) -> PlanResult:
        """Validate a run configuration and lock the run. Relative paths in the configuration
        resolve against `base_dir` (default: the working directory). `statistics` replaces the
        configuration's statistics settings (see `plan_events`); `check`, a caller's own
        rule, sees the events about to be appended and raises to refuse them. With
        `dry_run`, only check (the run id too, where a ledger exists) and write nothing; with
        `strict`, a near-miss key refuses the configuration."""
        doc, config = load_config(Path(config_path).absolute())
        warnings = (*key_checked("config", doc, strict=strict), *config_warnings(doc.value))
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
        self.commit(config.run_id, None, planned.events, [planned.kernel.content], dry_run)
        baseline = planned.events[2]
        assert isinstance(baseline, MeasurementsRecorded)
        return PlanResult(
            config.run_id,
            planned.kernel.ref.sha256,
            len(config.case_ids),
            flagged_cases(baseline, SAMPLES_NOT_FOUND),
            planned.events,
            warnings,
            dry_run,
            flagged_cases(baseline, SOURCE_NOT_SAMPLES),
        )

    # --- record ----------------------------------------------------------------------------

    def record(
        self,
        run_id: str,
        result_path: Path,
        *,
        base_dir: Path | None = None,
        reopen: str | None = None,
        check: Callable[[Sequence[Event]], None] | None = None,
        dry_run: bool = False,
        strict: bool = False,
        vocabulary: bool = True,
        contract: int | None = None,
    ) -> RecordResult:
        """Record one round: validate it against the run's state, decide, append. Relative
        paths in the round result resolve against `base_dir` (default: the working
        directory).

        A concluded run accepts no rounds, unless `reopen` gives the reason to take one
        anyway (as the JSON-file controller does): then RunReopened goes before the round,
        in the same append, so a refused round leaves the run concluded. `check`, a caller's
        own rule, sees the events about to be appended and raises to refuse them. Without
        `vocabulary` the decision records no mechanism entry (`round.round_events`);
        `contract` names the contract version to decide under (None: the newest). With
        `dry_run`, check and decide but write nothing; with `strict`, a near-miss key refuses
        the round result."""
        base = base_folder(base_dir)
        result_path = Path(result_path).absolute()
        doc, result = load_round_result(result_path)
        warnings = key_checked("round", doc, strict=strict)
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
        candidate, evidence, validation, outcome, blobs = self._round_outcome(
            view, doc, result, result_path, base, vocabulary, contract
        )
        check_expected_signal(result, evidence, [run.best_kernel_sha256, candidate.ref.sha256])
        items += outcome.events
        if check is not None:
            check(items)
        self.commit(run_id, view, items, [candidate.content, *blobs], dry_run)
        decision = outcome.decided
        measured = evidence.measured.get(decision.round)
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
            best_kernel_sha256=decision.best_after.sha256,
            flags=tuple(decision.flags),
            samples_not_found=flagged_cases(measured, SAMPLES_NOT_FOUND),
            events=tuple(items),
            sources_not_samples=flagged_cases(measured, SOURCE_NOT_SAMPLES),
            failed_cases=tuple(
                () if validation.passed else failed_validation_cases(validation) or ()
            ),
            warnings=tuple(warnings),
            dry_run=dry_run,
            mechanism_entry=_entry_said(decision, result),
            profiles=tuple(_profiles_read(items, evidence, candidate.ref.sha256)),
            mechanism_check=None
            if decision.mechanism_check is None
            else decision.mechanism_check.model_dump(mode="json"),
            why=_explained(decision, items),
        )

    def commit(
        self,
        run_id: str,
        view: RunView | None,
        items: Sequence[Event],
        blobs: Sequence[bytes],
        dry_run: bool,
    ) -> None:
        """Append what a use case decided, or, for a dry run, nothing at all: every check
        and decision ran the same way before this point."""
        if not dry_run:
            self.append(run_id, view, list(items), list(blobs))

    @staticmethod
    def _round_profiles(
        result: Any, folder: Path, plan: RunPlanned, view: RunView, candidate_sha256: str
    ) -> tuple[list[ProfileRecorded], list[bytes]]:
        """The profiles a round result names (`profile`: one entry or a list; a relative
        path against the working directory, else beside the round result), read and
        attributed as `profile` reads them, with the raw files' bytes."""
        entries = result.profile
        if entries is None:
            return [], []
        listed = entries if isinstance(entries, list) else [entries]
        events, blobs = [], []
        for index, entry in enumerate(listed):
            where = "profile" if not isinstance(entries, list) else f"profile[{index}]"
            _known_case(entry.case_id, view, f"{where}.case_id")
            path = Path(entry.path)
            if not path.is_absolute() and not path.exists() and (folder / path).exists():
                path = folder / path
            event, data = profile_from_file(
                plan,
                path,
                subject="round",
                round_no=result.round,
                kernel_sha256=candidate_sha256,
                kernel_name=entry.kernel,
                shape=entry.shape,
                case_id=entry.case_id,
                shape_option=f"{where}.shape",
            )
            events.append(event)
            blobs += data
        return events, blobs

    def _round_outcome(
        self,
        view: RunView,
        doc: Any,
        result: Any,
        result_path: Path,
        base: Path,
        vocabulary: bool = True,
        contract: int | None = None,
    ) -> tuple[Any, RunEvidence, ValidationLinked, Any, list[bytes]]:
        """An admitted round's candidate, the evidence its decision read, its validation,
        its events (`round_events`) and the raw files they cite: what `record` appends and
        `assess` reports. Writes nothing."""
        run = view.run
        candidate = read_kernel(
            resolve(base, result.candidate.path), "candidate.path", written=result.candidate.path
        )
        plan, evidence = self.decision_evidence(
            view, [run.best_kernel_sha256, candidate.ref.sha256]
        )
        validation, measured = checked_round(
            result, result_path, candidate, view, "measurements", base=base
        )
        reference = (
            checked_reference(result, result_path, view, base=base)
            if measured is not None
            else None
        )
        profiles, blobs = self._round_profiles(
            result, result_path.parent, plan, view, candidate.ref.sha256
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
            profiles=profiles,
            vocabulary=vocabulary,
            reference=reference,
            session=None if result.session is None else result.session.model_dump(mode="json"),
            contract=contract,
        )
        return candidate, evidence, validation, outcome, blobs

    def assess(
        self, run_id: str, result_path: Path, *, base_dir: Path | None = None
    ) -> dict[str, Any]:
        """What `record` would decide for a round result now, under the run's locked policy,
        current best kernel and the result's reference, with the sequential rule's look:
        `settled`, `repeats_used` and, when not settled, `more_repeats`. Writes nothing."""
        base = base_folder(base_dir)
        result_path = Path(result_path).absolute()
        doc, result = load_round_result(result_path)
        view = self.view(run_id)
        refused = admit(view, result.round, result.parent_kernel_sha256)
        if refused:
            raise InputError(refused[0].message)
        _, _, _, outcome, _ = self._round_outcome(view, doc, result, result_path, base)
        decided = outcome.decided
        statistics = decided.statistics or {}
        out: dict[str, Any] = {
            "run_id": run_id,
            "round": decided.round,
            "decision": decided.decision,
            "relative_improvement": decided.relative_improvement,
            "worst_case_regression": decided.worst_case_regression,
            "evidence": decided.evidence,
            "flags": list(decided.flags),
            "why": _explained(decided, outcome.events).as_dict(),
        }
        if "sides" in statistics:
            out["sides"] = statistics["sides"]
        if "settled" in statistics:
            out["settled"] = statistics["settled"]
            out["repeats_used"] = statistics["repeats_used"]
            if not statistics["settled"]:
                out["more_repeats"] = statistics["more_repeats"]
        return out

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

    def decision_evidence(
        self, view: RunView, kernels: Sequence[str]
    ) -> tuple[RunPlanned, RunEvidence]:
        """The run's plan and what a decision on its next round reads of its events (the best
        round's measurements, the latest profile of each of `kernels`, the failed mechanisms
        since the last diagnosis while the run needs one), folded by the reducer the verifier
        folds every event with (`RunEvidence.folded`) and cut to the decision's scope
        (`RunEvidence.within`).

        The events are found through the events-by-type index (`_scoped_events`): a few
        lookups whatever the run's length, so `record` costs the same at round 1,000 as at
        round 1. A run with A/A remeasures reads its evidence events whole (the noise pairs
        need every measurement of the remeasured kernels). `view` must be the run's current
        projection: another writer in between is a conflict."""
        run_id = view.run.run_id
        scope = DecisionScope.of(view, kernels)
        with self.store.transaction() as conn:
            head = self.store.stream_head(conn, run_id)[0]
            if head != view.run.stream_version:
                raise ConflictError(
                    f"run {run_id} is at version {head}, not {view.run.stream_version}: "
                    "another writer recorded first; nothing was written, retry"
                )
            events = _scoped_events(conn, view, scope)
            if events is None:
                stream = self.store.read_stream(conn, run_id, types=EVIDENCE_EVENT_TYPES)
                events = [stored.event() for stored in stream]
        plan = events[0]
        assert isinstance(plan, RunPlanned)
        return plan, RunEvidence.folded(events).within(scope)

    # --- profile and diagnose --------------------------------------------------------------

    def profile(
        self,
        run_id: str,
        path: Path,
        *,
        baseline: bool = False,
        round_no: int | None = None,
        kernel_sha256: str | None = None,
        candidate: Path | None = None,
        kernel_name: str | None = None,
        shape: str | None = None,
        case_id: str | None = None,
        dry_run: bool = False,
    ) -> ProfileResult:
        """Ingest profiler output for one kernel of the run and attribute its bottleneck;
        with `dry_run`, read and attribute it, write nothing.

        `candidate` is a candidate's source before its round is recorded: the profile is kept
        under the file's sha256 and the round whose candidate it is reads it at `record`.
        `case_id` names the planned case the profile ran; the mechanism check compares a
        case only with the same case. The same profile files for the same kernel, case and
        selection are recorded once: a second time answers `already_recorded`."""
        named = (baseline, round_no is not None, kernel_sha256 is not None, candidate is not None)
        if sum(named) != 1:
            raise InputError(
                "name exactly one of --baseline, --round N, --kernel SHA256 or --candidate FILE"
            )
        view, stream = self.state(run_id)
        if view.concluded:
            raise InputError(
                f"run {run_id!r} has concluded ({view.run.conclusion}); it takes no profiles"
            )
        from ledger.integrity.gate import run_kernels

        plan = stream[0].event()
        assert isinstance(plan, RunPlanned)
        if baseline:
            subject, sha, round_no = "baseline", plan.kernel.sha256, 0
        elif round_no is not None:
            subject = "round"
            sha = next((k for n, k, _ in run_kernels(stream) if round_no > 0 and n == round_no), "")
            if not sha:
                raise InputError(f"run {run_id!r} has no round {round_no}")
        elif candidate is not None:
            subject = "candidate"
            sha = read_kernel(Path(candidate).absolute(), "--candidate").ref.sha256
        else:
            subject, sha = "kernel", str(kernel_sha256)
            if sha not in {k for _, k, _ in run_kernels(stream)}:
                raise InputError(
                    f"kernel {sha} is not a kernel of run {run_id!r}; profile a candidate "
                    "before its round with --candidate FILE"
                )
        _known_case(case_id, view, "--case")
        event, blobs = profile_from_file(
            plan,
            Path(path),
            subject=subject,
            round_no=round_no,
            kernel_sha256=sha,
            kernel_name=kernel_name,
            shape=shape,
            case_id=case_id,
        )
        same = _same_profile(stream, event)
        if same is not None:
            return ProfileResult(same, already_recorded=True)
        self.commit(run_id, view, [event], blobs, dry_run)
        return ProfileResult(event)

    def diagnose(
        self, run_id: str, bottleneck: str, evidence_text: str, *, dry_run: bool = False
    ) -> DiagnosisRecorded:
        """Record a new bottleneck model; the consecutive-failure count restarts. With
        `dry_run`, check it, write nothing."""
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
        self.commit(run_id, view, [event], [], dry_run)
        return event

    # --- noise -----------------------------------------------------------------------------

    def noise(
        self,
        run_id: str,
        path: Path,
        *,
        base_dir: Path | None = None,
        dry_run: bool = False,
        strict: bool = False,
    ) -> dict[str, Any]:
        """Record an A/A remeasure of the current best kernel; report the drift estimate
        (with it, for a dry run, which writes nothing). Relative `source` paths resolve
        against `base_dir` (default: the working directory); with `strict`, a near-miss key
        refuses the file."""
        from ledger.core import stats

        base = base_folder(base_dir)
        path = Path(path).absolute()
        doc = read_json(path, "measurements file")
        shown = display(path)
        item = validate_model(NoiseFile, doc.value, "measurements file", shown)
        warnings = key_checked("measurements", doc, strict=strict)
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
            session=None if item.session is None else item.session.model_dump(mode="json"),
        )
        evidence = RunEvidence.folded([*(stored.event() for stored in stream), event])
        self.commit(run_id, view, [event], [], dry_run)
        config = stats.StatisticsConfig.from_recorded(evidence.statistics)
        weights = [c.weight for c in view.cases]
        drift = stats.estimate_drift(evidence.noise_pairs, weights=weights, config=config)
        return {
            "run_id": run_id,
            "kernel_sha256": item.kernel_sha256,
            "pairs": len(evidence.noise_pairs),
            **drift.to_evidence(),
            **({"warnings": warnings} if warnings else {}),
        }

    # --- conclude --------------------------------------------------------------------------

    def conclude(
        self, run_id: str, view: RunView | None = None, contract: int | None = None
    ) -> RunView:
        """Conclude the run once; a concluded run is returned as it is. `view`, when given,
        is the run's full view as the caller read it (a writer in between is a conflict);
        `contract` names the contract version to conclude under (None: the newest)."""
        view = view or self.full_view(run_id)
        if view.concluded:
            return view
        after, _ = self.append(run_id, view, [conclusion_event(view, contract)], [])
        return projections.RunView(run=after.run, cases=after.cases, rounds=view.rounds)

    @staticmethod
    def conclusion_preview(view: RunView, contract: int | None = None) -> RunView:
        """The view `conclude` would give a run in this state, with nothing appended."""
        if view.concluded:
            return view
        event = conclusion_event(view, contract)  # at the run's last time: no clock read
        after = projections.apply(view, view.run.stream_version + 1, view.run.updated_at, event)
        return projections.RunView(run=after.run, cases=after.cases, rounds=view.rounds)


def _scoped_events(conn: Any, view: RunView, scope: DecisionScope) -> list[Event] | None:
    """The events a decision in `scope` reads, in version order, found through the
    events-by-type index: the plan, the baseline's and the best round's measurements, the
    latest decision (its chain factors), the latest profile of
    each kernel, and while the run needs a diagnosis the last diagnosis and the decisions
    after it on a round that was not kept and named a mechanism. None where the run needs
    its evidence events whole (remeasures) or they are not laid out as `plan` and `record`
    append them (the baseline's measurements first, each round's before its decision)."""
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
    baseline = readmodel.nth_version(conn, run_id, "MeasurementsRecorded", 1)
    if baseline is not None:  # its session, beside the chained cumulative improvement
        wanted.add(baseline)
    if view.run.rounds_recorded:  # the latest decision: the chain factors it carries
        last = readmodel.last_version_before(
            conn, run_id, "RoundDecided", view.run.stream_version + 1
        )
        if last is None:
            return None
        wanted.add(last)
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
        # every profile of the kernel: the latest of each case it profiled, and the latest
        wanted.update(readmodel.profile_versions(conn, run_id, kernel))
    found = {e.stream_version: e.event() for e in readmodel.read_versions(conn, run_id, wanted)}
    plan, best = found.get(1), found.get(measured)
    if not isinstance(plan, RunPlanned):
        return None
    if not isinstance(best, MeasurementsRecorded) or best.round != scope.best_round:
        return None
    return [found[version] for version in sorted(found)]


def profile_from_file(
    plan: RunPlanned,
    path: Path,
    *,
    subject: str,
    round_no: int | None,
    kernel_sha256: str,
    kernel_name: str | None,
    shape: str | None,
    case_id: str | None,
    shape_option: str = "--shape",
) -> tuple[ProfileRecorded, list[bytes]]:
    """A profile event for the profiler output at `path`, attributed under the run's
    settings, and the bytes of every raw file it read (the ledger stores them).

    A profile of one case is of one launch shape: where the file holds the kernel at
    several and none is chosen, it is refused rather than attributed by total time (that
    would file another case's launch under this case, and the mechanism check compares a
    case only with the same case)."""
    from ledger.inputs.profiles import load_profile

    path = Path(path).absolute()
    parsed = load_profile(path, kernel_name=kernel_name, shape=shape)
    if case_id is not None and shape is None and len(parsed.shapes) > 1:
        shapes = ", ".join(f"{s.shape!r} ({s.launches} launch(es))" for s in parsed.shapes)
        raise InputError(
            f"{display(path)}: {parsed.kernel_name!r} ran with {len(parsed.shapes)} launch "
            f"shapes ({shapes}), and a profile of case {case_id!r} is of one: name the "
            f"shape that case ran with in {shape_option}, or profile that case alone"
        )
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
        kernel_sha256=kernel_sha256,
        origin="file",
        fmt=parsed.format,
        signals=dict(parsed.signals),
        attributes=dict(parsed.attributes),
        files=files,
        aggregation=parsed.aggregation,
        kernel_name=parsed.kernel_name,
        notes=[*parsed.notes, *_unread_map(parsed, plan, path)],
        shapes=[(p.shape, p.launches, p.total_us, dict(p.signals)) for p in parsed.shapes],
        case_id=case_id,
    )
    return event, blobs


def _unread_map(parsed: Any, plan: RunPlanned, path: Path) -> list[str]:
    """The note on a signal map whose names no profile reader gives (the attribution reads
    none of them), in the names of the run's platform."""
    from ledger.core.suggest import platform_family
    from ledger.inputs.profiles.catalog import unread_map_note

    if parsed.format != "signals-json":
        return []
    platform = platform_family(str(plan.target.get("soc", "")))
    note = unread_map_note(dict(parsed.signals), platform, display(path))
    return [] if note is None else [note]


def _known_case(case_id: str | None, view: RunView, where: str) -> None:
    planned = [c.case_id for c in view.cases]
    if case_id is not None and case_id not in planned:
        raise InputError(
            f"{where} {case_id!r} is not a planned case of run {view.run.run_id!r} "
            f"({', '.join(planned)})"
        )


def _same_profile(stream: Sequence[StoredEvent], event: ProfileRecorded) -> ProfileRecorded | None:
    """An earlier profile of the same files for the same kernel, subject, round, case and
    selection: what `profile` recorded when it was given these files before."""
    key = _profile_key(event)
    for stored in stream:
        if stored.event_type == "ProfileRecorded":
            earlier = stored.event()
            assert isinstance(earlier, ProfileRecorded)
            if earlier.origin == "file" and _profile_key(earlier) == key:
                return earlier
    return None


def _profile_key(event: ProfileRecorded) -> tuple[Any, ...]:
    return (
        event.kernel_sha256,
        event.subject,
        event.round,
        event.case_id,
        event.kernel_name,
        event.aggregation,  # names the launches and shape chosen
        tuple(sorted(event.signals.items())),
        tuple(sorted(f.sha256 for f in event.files)),
    )


def _entry_said(decision: RoundDecided, result: Any) -> dict[str, Any] | None:
    """The vocabulary entry a round's mechanism mapped to, as `record` says it: the entry
    and which text named it, and for `other` the entries nearest to what it said."""
    from ledger.core.mechanisms import OTHER, nearest

    found = decision.mechanism_entry
    if found is None:
        return None
    said: dict[str, Any] = {"entry": found.entry, "source": found.source}
    if found.entry == OTHER:
        said["nearest"] = list(nearest(result.mechanism or result.change or ""))
    return said


def _profiles_read(
    items: Sequence[Event], evidence: RunEvidence, candidate_sha256: str
) -> list[dict[str, Any]]:
    """The candidate's profiles its round's decision read: those the round result named or
    carried (`with` "round"), then those `profile --candidate` recorded before (`with`
    "earlier"), each with its file, format, case, signals and bottleneck."""
    own = [e for e in items if isinstance(e, ProfileRecorded)]
    earlier = {id(e): e for e in evidence.case_profiles.values()}
    earlier.update({id(e): e for e in evidence.profiles.values()})
    before = [e for e in earlier.values() if e.kernel_sha256 == candidate_sha256 and e not in own]
    out = []
    for source, events in (("round", own), ("earlier", before)):
        for e in events:
            out.append(
                {
                    "with": source,
                    "origin": e.origin,
                    "files": [f.written_path or f.path for f in e.files],
                    "format": e.format,
                    "case_id": e.case_id,
                    "signals": sorted(e.signals),
                    "bottleneck": (e.attribution or {}).get("bottleneck"),
                }
            )
    return out
