"""The replay verifier: re-hash, re-chain, re-fold and re-decide every event.

The checks, the order each event meets them in, and what each proves are docs/audit.md's
"What verify proves"; the per-event ones (seq to payload) are ledger/integrity/eventchecks.py.
The verifier stops at the first failure and names its seq. The replay is streamed (memory
bounded by the runs still open: a concluded run's projection rows and kernel sources are
compared at once, and a run with an event after its conclusion is folded again from the
store), and what those comparisons find is reported after every event has passed.

`verify_since` replays only the runs that have an event after a given seq, each whole, with
every check; the events before it are proven by the caller (`audit.verify_since`: Merkle
consistency with a checkpoint). `verify_chain` is the fast check: seq, hash and chain alone.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ledger.core import projections
from ledger.core.controller import conclusion_as_recorded
from ledger.core.events import (
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
from ledger.core.evidence import RunEvidence
from ledger.core.projections import RunView
from ledger.core.round import admit, decision
from ledger.errors import InputError
from ledger.integrity.eventchecks import (
    CHAIN_CHECKS,
    CHECKS,
    Failure,
    LedgerCheck,
    ReplayStop,
    check_blob,
    check_blob_table,
    check_event,
    check_storage,
    fail,
)
from ledger.integrity.hashing import ZERO_HASH
from ledger.store.eventstore import Store, StoredEvent, _stored

__all__ = ["CHECKS", "Failure", "ReplayStop", "Report", "RunReplay", "verify_ledger"]


@dataclass
class Report:
    events_checked: int = 0
    runs_checked: int = 0
    without_actor: int = 0  # events checked from before actors were recorded
    checks: dict[str, str] = field(default_factory=lambda: dict.fromkeys(CHECKS, "ok"))
    first_failure: Failure | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.first_failure is None

    def failed(self, failure: Failure) -> None:
        """Record the first failure: its check failed, the checks after it did not run."""
        self.first_failure = failure
        self.checks[failure.check] = "failed"
        names = list(self.checks)
        for name in names[names.index(failure.check) + 1 :]:
            self.checks[name] = "not run"

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.ok else "failed",
            "events_checked": self.events_checked,
            "runs_checked": self.runs_checked,
            "events_without_actor": self.without_actor,
            "checks": self.checks,
            "first_failure": self.first_failure.as_dict() if self.first_failure else None,
            "warnings": self.warnings,
        }


@dataclass
class _Stream:
    version: int = 0
    last_hash: str = ZERO_HASH
    fold: projections.RunFold = field(default_factory=projections.RunFold)
    submitted: RoundSubmitted | None = None
    validation: ValidationLinked | None = None
    measured: MeasurementsRecorded | None = None
    kernels: set[str] = field(default_factory=set)
    profile_files: set[str] = field(default_factory=set)
    evidence: RunEvidence = field(default_factory=RunEvidence)
    warnings: list[str] = field(default_factory=list)

    @property
    def view(self) -> RunView | None:
        """The run's projection after the events replayed so far."""
        return self.fold.view


@dataclass(slots=True)
class _Concluded:
    """What is kept of a run once its conclusion has been replayed: its chain head, what its
    projection and blob comparisons found then (reported after every event, in the order
    they always were), and its warnings."""

    version: int
    last_hash: str
    projection: str | None
    missing_blob: str | None
    warnings: list[str]


def _replay(e: StoredEvent, state: _Stream, event: Event) -> None:
    # the view is read (and built) only where a rule needs it
    if isinstance(event, RunPlanned):
        if event.run_id != e.stream_id:
            raise fail(e, "replay", f"RunPlanned names run {event.run_id!r}, not its stream")
        state.kernels.add(event.kernel.sha256)
    elif isinstance(event, RoundSubmitted):
        view = state.view
        refused = admit(view, event.round, event.parent_kernel_sha256) if view else None
        if refused:
            raise fail(e, "replay", refused[0].reason)
        state.submitted, state.validation, state.measured = event, None, None
        state.kernels.add(event.candidate.sha256)
    elif isinstance(event, ValidationLinked):
        state.validation = event
    elif isinstance(event, MeasurementsRecorded) and event.role == "candidate":
        if state.validation is None or not state.validation.passed:
            raise fail(e, "replay", "a candidate was measured without a passed validation")
        state.measured = event
    elif isinstance(event, RoundDecided):
        _replay_decision(e, state, event)
    elif isinstance(event, ProfileRecorded):
        state.profile_files.update(f.sha256 for f in event.files)
    elif isinstance(event, RunConcluded) and (view := state.view) is not None:
        full = RunView(run=view.run, cases=view.cases, rounds=view.rounds)
        if not conclusion_as_recorded(full, event):
            raise fail(e, "replay", "the conclusion does not follow from the rounds")
    elif isinstance(event, RunReopened) and (view := state.view) is not None:
        if not view.concluded:
            raise fail(e, "replay", "a run that has not concluded was reopened")
        if event.conclusion != view.run.conclusion or event.round != view.run.rounds_recorded + 1:
            raise fail(e, "replay", "the reopening does not match the run's conclusion")
    try:
        state.fold.apply(e.stream_version, e.recorded_at, event)
    except projections.ProjectionError as exc:
        raise fail(e, "replay", str(exc)) from None
    state.evidence.apply(event)


def _replay_decision(e: StoredEvent, state: _Stream, event: RoundDecided) -> None:
    view, submitted = state.view, state.submitted
    if view is None or submitted is None or submitted.round != event.round:
        raise fail(e, "replay", f"RoundDecided for round {event.round} without its submission")
    passed = state.validation is not None and state.validation.passed
    if passed and state.measured is None:
        raise fail(e, "replay", "a validated candidate was decided without measurements")
    measured = state.measured.measurements if state.measured and passed else None
    expected = decision(view, submitted, state.evidence, measured, recorded=event)
    expected = _as_recorded(expected, event)
    if expected == event or _last_bits_only(expected, event):
        return
    if _numpy_drift_only(expected, event):
        state.warnings.append(
            f"seq {e.seq}: round {event.round}'s statistics were recomputed under numpy "
            f"{expected.statistics['numpy_version']} (recorded under "
            f"{event.statistics['numpy_version']}); the figures differ, the decision does not"
        )
    else:
        differing = [
            name
            for name in RoundDecided.model_fields
            if getattr(expected, name) != getattr(event, name)
        ]
        what = ", ".join(differing) or "content"
        raise fail(e, "replay", f"round {event.round}: recorded {what} differ from a re-derivation")


_DECIDED_FIELDS = frozenset(RoundDecided.model_fields)


def _as_recorded(expected: RoundDecided, recorded: RoundDecided) -> RoundDecided:
    """The re-derived decision as its recorded one could hold it: a field added to
    RoundDecided after the event was recorded (no such key in its stored payload, so pydantic
    filled in the default) takes the recorded value, since the rules of the time did not
    produce it. Every event recorded since holds every field."""
    absent = _DECIDED_FIELDS - recorded.model_fields_set
    if not absent:
        return expected
    return expected.model_copy(update={name: getattr(recorded, name) for name in absent})


ULPS = (1e-9, 1e-12)
"""The relative and absolute differences under which two floats of a re-derived decision
count as equal. numpy sums in another order on another CPU (its SIMD width), which moves a
figure in its last bits, and more, relatively, where a difference cancels to near zero (a
gain of -7.8e-7 re-derived 2.6e-17 apart); the figures are fractions of a latency, so a
changed figure moves far more."""


def _last_bits_only(expected: RoundDecided, recorded: RoundDecided) -> bool:
    """True when the two decisions differ only in the last bits of some floats."""

    def close(a: object, b: object) -> bool:
        if isinstance(a, float) or isinstance(b, float):  # a stored 0.0 reads back as 0
            numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))
            return numbers and math.isclose(a, b, rel_tol=ULPS[0], abs_tol=ULPS[1])
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
        if isinstance(a, list | tuple) and isinstance(b, list | tuple):
            return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
        return type(a) is type(b) and a == b

    return close(expected.model_dump(), recorded.model_dump())


def _numpy_drift_only(expected: RoundDecided, recorded: RoundDecided) -> bool:
    """True when two decisions differ only in sample statistics computed under different
    numpy versions, and the decision itself would not flip."""
    a, b = expected.statistics, recorded.statistics
    if not a or not b or a.get("numpy_version") == b.get("numpy_version"):
        return False
    return expected.model_copy(update={"statistics": None}) == recorded.model_copy(
        update={"statistics": None}
    )


def verify_ledger(
    store: Store,
    run_id: str | None = None,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    observe: Callable[[StoredEvent], None] | None = None,
) -> Report:
    """Run every check over the whole ledger (or `run_id`'s events); `observe` sees each
    event that passed its per-event checks, in seq order (the checkpoint verifier builds its
    Merkle tree from it)."""
    report = Report()
    with store.transaction() as conn:
        total = store.event_count(conn) if on_progress else 0
        try:
            check_storage(store, conn, run_id, "payload")
            pages = store.iter_event_pages(conn, stream_id=run_id)
            rows = (row for page in pages for row in page)
            replay = _Replay(store, conn, report, 1 if run_id is None else None)
            replay.run(rows, observe, on_progress, total)
            if run_id is not None and not replay.streams:  # a wrong --run
                raise InputError(f"run {run_id!r} is not in the ledger")
            stored = set(store.all_run_ids(conn)) if run_id is None else {run_id}
            replay.judge(stored, lambda: check_blob_table(store, conn))
        except ReplayStop as stop:
            report.failed(stop.failure)
    if on_progress:
        on_progress(report.events_checked, report.events_checked)
    return report


def verify_since(store: Store, conn, size: int) -> Report:
    """Every check of `verify_ledger` on the runs that have an event after seq `size`, each
    replayed whole, in seq order; seq must be gapless after `size`. The events before are
    not read unless their run goes on after `size` (the caller proves them by Merkle
    consistency). `events_checked` and `runs_checked` count what was replayed."""
    report = Report()
    try:
        check_storage(store, conn, None, "payload", after_seq=size)
        runs = store.runs_after(conn, size)
        rows = heapq.merge(
            *(
                (row for page in store.iter_event_pages(conn, stream_id=run) for row in page)
                for run in runs
            ),
            key=lambda row: row[0],
        )
        replay = _Replay(store, conn, report, size + 1, from_seq=size)
        replay.run(rows)
        named = set()
        for state in replay.streams.values():
            if type(state) is _Stream:
                named |= state.kernels | state.profile_files
        replay.judge(set(runs), lambda: _check_named_blobs(store, conn, named))
    except ReplayStop as stop:
        report.failed(stop.failure)
    return report


def _check_named_blobs(store: Store, conn, digests: set[str]) -> None:
    for digest in sorted(digests):
        content = store.get_blob(conn, digest)
        if content is not None:
            check_blob(digest, content)


class _Replay:
    """One streamed replay in seq order (see the module docstring): each event's checks,
    its run's replay, and what the report says of it. Seq is checked gapless from
    `expected_seq` on (None: not at all) for the events after `from_seq`."""

    def __init__(
        self, store: Store, conn, report: Report, expected_seq: int | None, from_seq: int = 0
    ) -> None:
        self.store, self.conn, self.report = store, conn, report
        self.expected_seq, self.from_seq = expected_seq, from_seq
        self.streams: dict[str, _Stream | _Concluded] = {}
        self.firsts: dict[str, int] = {}  # where each run begins, as a position in the replay
        self.warnings: list[tuple[int, int, str]] = []  # (run's first position, position, text)

    def run(
        self,
        rows: Iterable[Any],
        observe: Callable[[StoredEvent], None] | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        total: int = 0,
    ) -> None:
        streams, position = self.streams, 0
        try:
            for row in rows:
                e = _stored(row)
                stream_id = e.stream_id
                state = streams.get(stream_id)
                if state is None:
                    state = streams[stream_id] = _Stream()
                    self.firsts[stream_id] = position
                seen = len(state.warnings)
                expected = self.expected_seq if e.seq > self.from_seq else None
                try:
                    event = check_event(e, state, expected)
                    if type(state) is _Concluded:  # an event after the run's conclusion
                        state = streams[stream_id] = self._reopen(e, state)
                    assert type(state) is _Stream
                    _replay(e, state, event)
                finally:
                    for warning in state.warnings[seen:]:
                        self.warnings.append((self.firsts[stream_id], position, warning))
                state.version, state.last_hash = e.stream_version, e.event_hash
                self.report.without_actor += e.actor is None
                if e.event_type == "RunConcluded" and state.view is not None:
                    # compared now and let go; a run reopened by a later event stays whole
                    # and is compared with the others at the end
                    streams[stream_id] = self._conclude(stream_id, state)
                if observe is not None:
                    observe(e)
                position += 1
                if expected is not None:
                    self.expected_seq = expected + 1
                if on_progress and position % 5000 == 0:
                    on_progress(position, total)
        except ReplayStop:
            self._count(position, failed=True)
            raise
        self._count(position)

    def _count(self, position: int, failed: bool = False) -> None:
        """The report's counts and warnings: those met up to `position` (the failing event's,
        counted in when `failed`), warnings by run (as met), then event."""
        report = self.report
        report.events_checked = position
        report.runs_checked = sum(first <= position for first in self.firsts.values())
        if not failed:
            report.runs_checked = len(self.firsts)
        met = sorted((w for w in self.warnings if w[1] <= position), key=lambda w: w[:2])
        report.warnings = [warning for _, _, warning in met]

    def judge(self, stored: set[str], check_blobs: Callable[[], None]) -> None:
        """After every event passed: the projection rows of the runs (`stored`: those with
        rows to compare), the blob table (`check_blobs`), then the blobs each run names."""
        store, conn = self.store, self.conn
        for stream_id in sorted(stored | set(self.streams)):
            state = self.streams.get(stream_id)
            if type(state) is _Concluded:
                fault = state.projection
            else:
                rebuilt = state.view if state is not None else None
                fault = _projection_fault(
                    stream_id, rebuilt, store.stored_projection(conn, stream_id)
                )
            if fault is not None:
                raise fail(None, "projection", fault)
        check_blobs()
        for stream_id, state in sorted(self.streams.items()):
            missing = (
                state.missing_blob
                if type(state) is _Concluded
                else _missing_blob(store, conn, state)
            )
            if missing is not None:
                raise fail(None, "blobs", f"run {stream_id!r}: {missing}")

    def _conclude(self, stream_id: str, state: _Stream) -> _Concluded:
        """Compare a concluded run's projection rows and kernel sources now, and keep only
        what the rest of the replay needs of it."""
        stored = self.store.stored_projection(self.conn, stream_id)
        return _Concluded(
            state.version,
            state.last_hash,
            _projection_fault(stream_id, state.view, stored),
            _missing_blob(self.store, self.conn, state),
            state.warnings,
        )

    def _reopen(self, e: StoredEvent, done: _Concluded) -> _Stream:
        """The state of a concluded run, folded again from its events before `e` (each passed
        every check already), for an event that follows the conclusion."""
        state = _Stream()
        for past in self.store.iter_events(self.conn, stream_id=e.stream_id):
            if past.seq >= e.seq:
                break
            _replay(past, state, past.event())
            state.version, state.last_hash = past.stream_version, past.event_hash
        state.warnings = done.warnings  # as found the first time; the fold above repeats them
        return state


def verify_chain(
    store: Store,
    run_id: str | None = None,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    batch: int = 2000,
) -> Report:
    """The seq, hash and chain checks of `verify_ledger` alone (`eventchecks.check_chain`),
    with the same failures; no payload is parsed. Memory holds one page of rows and each
    run's chain head."""
    report = Report(checks=dict.fromkeys(CHAIN_CHECKS, "ok"))
    check = LedgerCheck(chain_only=True, gapless=run_id is None)
    done = 0
    with store.transaction() as conn:
        total = store.event_count(conn) if on_progress else 0
        try:
            check_storage(store, conn, run_id, "hash")  # the hash is over these bytes
            for page in store.iter_event_pages(conn, batch=batch, stream_id=run_id):
                for row in page:
                    e = _stored(row)
                    check.check(e)
                    done += 1
                    report.without_actor += e.actor is None
                if on_progress:
                    on_progress(done, total)
            if run_id is not None and not check.heads:
                raise InputError(f"run {run_id!r} is not in the ledger")
        except ReplayStop as stop:
            report.failed(stop.failure)
    report.events_checked = done
    report.runs_checked = len(check.heads)
    if on_progress:
        on_progress(done, done)
    return report


def _projection_fault(
    stream_id: str, rebuilt: RunView | None, stored: RunView | None
) -> str | None:
    if rebuilt is None:
        return f"run {stream_id!r} has projection rows but no events"
    if stored is None:
        return f"run {stream_id!r} has events but no projection rows"
    for name, mine, theirs in (
        ("runs", (rebuilt.run,), (stored.run,)),
        ("run_cases", rebuilt.cases, stored.cases),
        ("rounds", rebuilt.rounds, stored.rounds),
        ("profiles", rebuilt.profiles, stored.profiles),
    ):
        if mine != theirs:
            return f"run {stream_id!r}: table {name} differs from a rebuild from events"
    return None


def _missing_blob(store: Store, conn, state: _Stream) -> str | None:
    """What the run names that is not stored: a kernel source, else a profile file (the
    first in sha256 order; one query for both)."""
    stored = store.stored_digests(conn, sorted(state.kernels | state.profile_files))
    for digests, what in (
        (state.kernels, "kernel source"),
        (state.profile_files - state.kernels, "profile file"),
    ):
        missing = next((d for d in sorted(digests) if d not in stored), None)
        if missing is not None:
            return f"{what} {missing} is not stored"
    return None


def rebuild_projections(store: Store) -> int:
    """Drop the projection rows and fold them again from the events alone."""
    with store.transaction(write=True) as conn:
        views: dict[str, RunView | None] = {}
        for e in store.iter_events(conn):
            views[e.stream_id] = projections.apply(
                views.get(e.stream_id), e.stream_version, e.recorded_at, e.event()
            )
        store.clear_projections(conn)
        for view in views.values():
            assert view is not None
            store.save_view(conn, None, view)
    return len(views)


class RunReplay:
    """One run's events replayed in order under the checks `verify` applies to each (hash,
    stream version, parent link, then the replay rules), for a reader that is not a store,
    such as an exported bundle. Each method raises `ReplayStop` with the failure."""

    def __init__(self) -> None:
        self._state = _Stream()

    def check(self, e: StoredEvent, payload_value: Any = None) -> Event:
        """The event's own checks (hash, version, parent, canonical payload); returns the
        parsed event. `payload_value`: see `eventchecks.check_event`."""
        return check_event(e, self._state, None, payload_value)

    def apply(self, e: StoredEvent, event: Event) -> None:
        """Replay a checked event and move the run's head past it."""
        _replay(e, self._state, event)
        self._state.version, self._state.last_hash = e.stream_version, e.event_hash

    @property
    def view(self) -> RunView | None:
        """The run's projection rows, folded from the events replayed so far."""
        return self._state.view

    @property
    def kernels(self) -> set[str]:
        """The kernel sources the run's events name."""
        return set(self._state.kernels)

    @property
    def warnings(self) -> list[str]:
        return list(self._state.warnings)
