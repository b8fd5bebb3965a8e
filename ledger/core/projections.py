"""Pure folds: events -> run status, best kernel, cases and rounds.

These are the rows of the projection tables. The store writes them in the same
transaction as the events they follow; `rebuild` and the verifier fold the events again
and must get identical rows. One handler per event type; an unknown type fails loudly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from ledger.integrity.hashing import canonical

if TYPE_CHECKING:  # dispatch is by `event_type`: reading projections needs no event models
    from ledger.core.decide import Limits, Objective
    from ledger.core.events import (
        DiagnosisRecorded,
        Event,
        MeasurementsRecorded,
        ProfileRecorded,
        RoundDecided,
        RoundSubmitted,
        RunConcluded,
        RunPlanned,
        RunReopened,
        ValidationLinked,
    )


@dataclass(frozen=True, slots=True)
class CaseRow:
    run_id: str
    position: int
    case_id: str
    weight: float
    baseline_median_us: float | None
    best_median_us: float | None


class RoundRow(NamedTuple):
    """One decided round, as the `rounds` table holds it. A named tuple, not a dataclass:
    history queries build thousands of these, and a tuple is built from a database row in
    a fraction of a frozen dataclass's time (`RoundRow._make(row)`)."""

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
    session_id: str | None = None  # the session the candidate was measured in (0010)


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
    """Profile signals as stored in projection rows: canonical JSON text (the event models
    hold them as a dict of str to float: JSON types only)."""
    return canonical(signals, string_keys=True).decode()


# --- a candidate submitted again --------------------------------------------------------------

_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
_OUTCOMES = {
    "KEEP": "kept",
    "DISCARD": "discarded",
    "NOISE": "judged NOISE",
    "FAIL": "failed validation",
}


def resubmissions(
    rounds: Iterable[tuple[int, str, str]],
) -> dict[int, tuple[tuple[int, str], ...]]:
    """(round, candidate sha256, decision) of a run's decided rounds -> for each round whose
    candidate (the same sha256) was already the candidate of earlier rounds of the run,
    those rounds and their decisions, oldest first. Read from what is recorded: a kernel
    measured again and again until it was kept shows, though no event says so."""
    seen: dict[str, list[tuple[int, str]]] = {}
    found: dict[int, tuple[tuple[int, str], ...]] = {}
    for number, sha256, decision in sorted(rounds):
        earlier = seen.setdefault(sha256, [])
        if earlier:
            found[number] = tuple(earlier)
        earlier.append((number, decision))
    return found


def resubmission(
    subject: str, decision: str, earlier: tuple[tuple[int, str], ...]
) -> dict[str, Any]:
    """The one wording of a round whose candidate was submitted before (`resubmissions`),
    for `show`, `status`, `check-merge` and report.md: `rounds`, `decisions` and the
    `sentence`, "the best kernel (round 5) was also the candidate of rounds 3, 4 (DISCARD,
    DISCARD): kept on its third submission"."""
    numbers = [n for n, _ in earlier]
    decisions = [d for _, d in earlier]
    which = "round" if len(numbers) == 1 else "rounds"
    nth = len(earlier) + 1
    suffix = "th" if 10 <= nth % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(nth % 10, "th")
    ordinal = _ORDINALS[nth - 1] if nth <= len(_ORDINALS) else f"{nth}{suffix}"
    sentence = (
        f"{subject} was also the candidate of {which} {', '.join(map(str, numbers))} "
        f"({', '.join(decisions)}): {_OUTCOMES.get(decision, decision)} on its {ordinal} "
        "submission"
    )
    return {"rounds": numbers, "decisions": decisions, "sentence": sentence}


@dataclass(frozen=True, slots=True)
class _Pending:
    """What a round has stated so far, before its decision arrives."""

    submitted: RoundSubmitted | None = None
    validation_status: str | None = None
    session_id: str | None = None


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
        from ledger.core.decide import Objective  # not at import: `status` needs no decisions

        r = self.run
        return Objective(
            r.target_relative_improvement,
            r.min_relative_improvement,
            r.noise_floor,
            r.max_case_regression,
        )

    @property
    def limits(self) -> Limits:
        from ledger.core.decide import Limits

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
        target_met=False,  # SPEC 3: decided after every round, so not before the first
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
    return fold_into(view, ((version, at, event),))


def fold_into(view: RunView | None, events: Iterable[tuple[int, str, Event]]) -> RunView:
    """Fold (stream_version, recorded_at, event) triples, in version order, into `view`.

    The events of one append (or of a whole run) are folded into a mutable working copy;
    the frozen rows are built once at the end, not once per event."""
    folding = RunFold(view)
    for version, at, event in events:
        folding.apply(version, at, event)
    if folding.view is None:
        raise ProjectionError("no events to fold")
    return folding.view


class RunFold:
    """One run's projection folded one event at a time, for `fold_into` and for a reader
    that reads the view only at some events (the replay verifier reads it before a
    submission, a decision, a conclusion or a reopening): the events go into one mutable
    working copy, and the frozen view is built when it is read, not after every event.

    An event that does not fold raises `ProjectionError`; the fold is then not to be used
    further (the caller stops at that event)."""

    __slots__ = ("_view", "_work")

    def __init__(self, view: RunView | None = None) -> None:
        """Continue from `view` (the run's rows so far), or from nothing."""
        self._view = view
        self._work = _Working(view) if view is not None else None

    def apply(self, version: int, at: str, event: Event) -> None:
        work = self._work
        if work is None:
            if event.event_type != "RunPlanned":
                raise ProjectionError(f"{event.event_type} before RunPlanned")
            self._view = _planned(event, version, at)  # type: ignore[arg-type]
            self._work = _Working(self._view)
            return
        handler = _HANDLERS.get(event.event_type)
        if handler is None:
            raise ProjectionError(f"no projection handler for {event.event_type}")
        self._view = None
        work.run["stream_version"] = version
        work.run["updated_at"] = at
        handler(work, version, at, event)

    @property
    def view(self) -> RunView | None:
        """The view after every event applied so far (None before the first)."""
        if self._view is None and self._work is not None:
            self._view = self._work.view()
            self._work.rebase(self._view)
        return self._view


def _new(cls: type, getters: tuple[Callable[..., None], ...]) -> Callable[[Iterable[Any]], Any]:
    """A constructor of a frozen, slotted row from its field values in order, without
    `__init__`'s one `object.__setattr__` per field (this runs for every event folded)."""
    new = object.__new__

    def make(values: Iterable[Any]) -> Any:
        row = new(cls)
        for set_field, value in zip(getters, values, strict=True):
            set_field(row, value)
        return row

    return make


def _maker(cls: type) -> Callable[[Iterable[Any]], Any]:
    return _new(cls, tuple(getattr(cls, name).__set__ for name in cls.__slots__))


_RUN_FIELDS = RunRow.__slots__
_run_values = attrgetter(*_RUN_FIELDS)
_make_run = _maker(RunRow)
_make_round = RoundRow._make
_make_profile = _maker(ProfileRow)
_make_view = _maker(RunView)


class _Working:
    """One run's projection while a batch of its events is folded."""

    __slots__ = (
        "base",
        "cases",
        "profiles",
        "rounds",
        "run",
        "session_id",
        "submitted",
        "validation_status",
    )

    def __init__(self, view: RunView) -> None:
        self.base = view
        self.run: dict[str, Any] = dict(zip(_RUN_FIELDS, _run_values(view.run), strict=True))
        self.cases = view.cases
        self.rounds: list[RoundRow] = []
        self.profiles: list[ProfileRow] = []
        self.submitted = view.pending.submitted
        self.validation_status = view.pending.validation_status
        self.session_id = view.pending.session_id

    def rebase(self, view: RunView) -> None:
        """Continue from `view`, which `self.view()` just built (the working copy's run,
        cases and pending round are its own already)."""
        self.base = view
        self.rounds = []
        self.profiles = []

    def view(self) -> RunView:
        base = self.base
        pending = base.pending
        if (
            self.submitted is not pending.submitted
            or self.validation_status != pending.validation_status
            or self.session_id != pending.session_id
        ):
            pending = _Pending(self.submitted, self.validation_status, self.session_id)
        return _make_view(
            (
                _make_run(self.run.values()),
                self.cases,
                (*base.rounds, *self.rounds) if self.rounds else base.rounds,
                pending,
                (*base.profiles, *self.profiles) if self.profiles else base.profiles,
            )
        )


def _planned_again(work: _Working, version: int, at: str, event: Any) -> None:
    raise ProjectionError("RunPlanned for a run that already exists")


def _validation(work: _Working, version: int, at: str, event: ValidationLinked) -> None:
    work.validation_status = event.gate_status


def _measured(work: _Working, version: int, at: str, event: MeasurementsRecorded) -> None:
    if event.role == "candidate":
        work.session_id = (event.session or {}).get("id")
    if event.role == "baseline":
        medians = {m.case_id: m.median_us for m in event.measurements}
        work.cases = tuple(
            CaseRow(
                c.run_id, c.position, c.case_id, c.weight, medians[c.case_id], medians[c.case_id]
            )
            for c in work.cases
        )


def _submitted(work: _Working, version: int, at: str, event: RoundSubmitted) -> None:
    work.submitted, work.validation_status, work.session_id = event, None, None


def _profiled(work: _Working, version: int, at: str, event: ProfileRecorded) -> None:
    run = work.run
    attribution = event.attribution or {}
    work.profiles.append(
        _make_profile(
            (
                run["run_id"],
                version,
                run["op_name"],
                run["soc"],
                event.kernel_sha256,
                event.subject,
                event.round,
                event.format,
                attribution.get("bottleneck"),
                signals_text(event.signals),
                at,
            )
        )
    )


def _unchanged(work: _Working, version: int, at: str, event: Any) -> None:
    pass  # stream_version and updated_at only


def _diagnosed(work: _Working, version: int, at: str, event: DiagnosisRecorded) -> None:
    run = work.run
    run["consecutive_failures"] = 0
    run["needs_diagnosis"] = False
    run["bottleneck_model"] = event.bottleneck


def _concluded(work: _Working, version: int, at: str, event: RunConcluded) -> None:
    run = work.run
    run["status"] = "concluded"
    run["conclusion"] = event.conclusion
    run["concluded_at"] = at
    run["target_met"] = event.target_met  # as the conclusion recorded it (migration 0008)


def _reopened(work: _Working, version: int, at: str, event: RunReopened) -> None:
    run = work.run
    run["status"] = "active"
    run["conclusion"] = None  # concluded_at stays: the rounds that follow are marked by it


def _decided(work: _Working, version: int, at: str, event: RoundDecided) -> None:
    submitted = work.submitted
    if submitted is None or submitted.round != event.round:
        raise ProjectionError(f"RoundDecided for round {event.round} without its RoundSubmitted")
    after = event.best_after
    run = work.run
    run["best_kernel_sha256"] = after.sha256
    run["best_kernel_path"] = after.path
    run["best_round"] = after.round
    run["rounds_recorded"] = event.round
    run["kept_rounds"] += event.decision == "KEEP"
    run["consecutive_failures"] = event.consecutive_failures
    run["cumulative_improvement"] = event.cumulative_improvement
    run["target_met"] = event.target_met
    run["needs_diagnosis"] = event.needs_diagnosis
    run["remaining_rounds"] = event.remaining_rounds
    work.cases = tuple(
        CaseRow(c.run_id, c.position, c.case_id, c.weight, c.baseline_median_us, m)
        for c, m in zip(work.cases, after.medians_us, strict=True)
    )
    start = event.start_profile
    work.rounds.append(
        _make_round(
            (  # RoundRow's fields, in order
                run["run_id"],
                event.round,
                run["op_name"],
                run["soc"],
                event.decision,
                submitted.hypothesis,
                submitted.change,
                _mechanism(event, submitted),
                submitted.candidate.sha256,
                submitted.candidate.path,
                submitted.parent_kernel_sha256,
                work.validation_status or "unknown",
                event.relative_improvement,
                event.worst_case_regression,
                event.cumulative_improvement,
                after.sha256,
                event.consecutive_failures,
                event.target_met,
                event.needs_diagnosis,
                event.remaining_rounds,
                at,
                start.bottleneck if start else None,
                event.mechanism_check.confirmed if event.mechanism_check else None,
                _round_flags(event.flags, run["concluded_at"]),
                signals_text(start.signals) if start else None,
                work.session_id,
            )
        )
    )
    work.submitted, work.validation_status, work.session_id = None, None, None


def _mechanism(event: RoundDecided, submitted: RoundSubmitted) -> str | None:
    """The mechanism a round changed: as its decision records it, or, for a decision
    recorded before RoundDecided had the field (no such key in its stored payload), as the
    round was submitted, which is what the projection held then."""
    return event.mechanism if "mechanism" in event.model_fields_set else submitted.mechanism


def _round_flags(flags: list[str], concluded_at: str | None) -> str | None:
    """The round row's flags: the decision's, and `reopened` for a round recorded after its
    run had concluded once (RunReopened), which only a run never concluded lacks."""
    if concluded_at is not None:
        flags = [*flags, REOPENED_FLAG]
    return ",".join(flags) or None


REOPENED_FLAG = "reopened"

_HANDLERS: dict[str, Callable[[_Working, int, str, Any], None]] = {
    "RunPlanned": _planned_again,
    "ValidationLinked": _validation,
    "MeasurementsRecorded": _measured,
    "RoundSubmitted": _submitted,
    "RoundDecided": _decided,
    "ProfileRecorded": _profiled,
    "NoiseMeasured": _unchanged,
    "DiagnosisRecorded": _diagnosed,
    "RunConcluded": _concluded,
    "RunReopened": _reopened,
}


def row_fields(cls: type) -> tuple[str, ...]:
    """A projection row class's field names in column order (dataclass or named tuple)."""
    return cls._fields if issubclass(cls, tuple) else cls.__slots__


def as_dict(row: Any) -> dict[str, Any]:
    return {name: getattr(row, name) for name in row_fields(type(row))}
