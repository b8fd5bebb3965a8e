"""The replay verifier: re-hash, re-chain, re-fold and re-decide every event.

Checks, in the order each event meets them:
  seq         positions are gapless from 1 (whole-ledger runs only)
  hash        event_hash equals SHA-256 of the event's canonical envelope
  chain       stream versions are contiguous and parent_hash links to the previous event
  canonical   stored payload bytes are exactly RFC 8785 of their own parse
  payload     the payload is a known event type that validates
  replay      the fold accepts the event, and every RoundDecided / RunConcluded equals what
              the pure decision functions derive from the events before it; a RunReopened
              follows a conclusion it names
  projection  stored projection rows equal a rebuild from the events alone
  blobs       every stored kernel source hashes to its key; every kernel an event names is
              stored
The verifier stops at the first failure and names its seq.

The replay is streamed: events are read in pages, and once a run's conclusion has been
replayed its projection rows and kernel sources are compared at once and only its chain
head is kept, so memory is bounded by the runs still open, not by the ledger. What those
comparisons find is reported where it always was, after every event has passed. A run that
gets an event after its conclusion (a profile may follow it) has its earlier events folded
again from the store, so that event is judged exactly as against a run kept whole.

`verify_chain` is the fast check next to the replay: seq, hash and chain alone, over plain
rows, building no event objects.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

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
    load_event,
)
from ledger.core.evidence import RunEvidence
from ledger.core.projections import RunView
from ledger.core.round import admit, decision
from ledger.errors import InputError
from ledger.integrity.hashing import ZERO_HASH, canonical, event_hash, parse_canonical, sha256_hex
from ledger.store.checks import SQLITE_EVENT_TYPES, first_misstated_blob, first_mistyped_event
from ledger.store.eventstore import Store, StoredEvent, _stored

CHECKS = ("seq", "hash", "chain", "canonical", "payload", "replay", "projection", "blobs")
CHAIN_CHECKS = CHECKS[:3]
GAP = "expected seq {expected}, found {seq}: the log has a gap"
BAD_HASH = "event_hash does not match the event's content"
NOT_CONTIGUOUS = "stream version {version} follows {previous}: not contiguous"
BAD_PARENT = "parent_hash does not link to the previous event of the run"


@dataclass(frozen=True)
class Failure:
    seq: int | None
    stream_id: str | None
    stream_version: int | None
    check: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "stream_id": self.stream_id,
            "stream_version": self.stream_version,
            "check": self.check,
            "reason": self.reason,
        }


@dataclass
class Report:
    events_checked: int = 0
    runs_checked: int = 0
    checks: dict[str, str] = field(default_factory=lambda: dict.fromkeys(CHECKS, "ok"))
    first_failure: Failure | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.first_failure is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.ok else "failed",
            "events_checked": self.events_checked,
            "runs_checked": self.runs_checked,
            "checks": self.checks,
            "first_failure": self.first_failure.as_dict() if self.first_failure else None,
            "warnings": self.warnings,
        }


class ReplayStop(Exception):
    """The first failure of a check: replay stops there."""

    def __init__(self, failure: Failure) -> None:
        self.failure = failure


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


@dataclass(slots=True)
class _Head:
    """A run's chain head, for the per-event checks alone (`LedgerCheck`)."""

    version: int = 0
    last_hash: str = ZERO_HASH


def _fail(e: StoredEvent | None, check: str, reason: str) -> ReplayStop:
    if e is None:
        return ReplayStop(Failure(None, None, None, check, reason))
    return ReplayStop(Failure(e.seq, e.stream_id, e.stream_version, check, reason))


def _check_record(
    e: StoredEvent,
    state: _Stream | _Concluded | _Head,
    expected_seq: int | None,
    payload_value: Any = None,
) -> Event:
    """The seq, hash, chain, canonical and payload checks of one event; its parsed event.
    `payload_value`: the payload's JSON value, from a caller that has proven `e.payload` to
    be its canonical bytes already (a bundle line checked whole)."""
    if expected_seq is not None and e.seq != expected_seq:
        raise _fail(e, "seq", GAP.format(expected=expected_seq, seq=e.seq))
    if e.computed_hash() != e.event_hash:
        raise _fail(e, "hash", BAD_HASH)
    if e.stream_version != state.version + 1:
        raise _fail(
            e, "chain", NOT_CONTIGUOUS.format(version=e.stream_version, previous=state.version)
        )
    if e.parent_hash != state.last_hash:
        raise _fail(e, "chain", BAD_PARENT)
    value = payload_value if payload_value is not None else _canonical_value(e)
    try:
        return load_event(e.event_type, e.schema_version, value)
    except ValueError as exc:
        reason = " ".join(str(exc).split())[:300]
        raise _fail(e, "payload", f"{e.event_type} payload is invalid: {reason}") from None


def _canonical_value(e: StoredEvent) -> Any:
    """The payload's JSON value, once its bytes are proven RFC 8785 canonical (the fast
    check where it can tell, else a parse and the canonicalizer, which names the fault)."""
    value = parse_canonical(e.payload)
    if value is not None:
        return value
    try:
        value = json.loads(e.payload)
    except (ValueError, UnicodeDecodeError):
        raise _fail(e, "canonical", "payload is not JSON") from None
    try:
        canonical_bytes = canonical(value, string_keys=True)  # json.loads keys are str
    except InputError as exc:
        raise _fail(e, "canonical", f"payload cannot be canonical: {exc.__cause__}") from None
    if canonical_bytes != e.payload:
        raise _fail(e, "canonical", "payload bytes are not RFC 8785 canonical")
    return value


def _replay(e: StoredEvent, state: _Stream, event: Event) -> None:
    # the view is read (and built) only where a rule needs it
    if isinstance(event, RunPlanned):
        if event.run_id != e.stream_id:
            raise _fail(e, "replay", f"RunPlanned names run {event.run_id!r}, not its stream")
        state.kernels.add(event.kernel.sha256)
    elif isinstance(event, RoundSubmitted):
        view = state.view
        refused = admit(view, event.round, event.parent_kernel_sha256) if view else None
        if refused:
            raise _fail(e, "replay", refused[0].reason)
        state.submitted, state.validation, state.measured = event, None, None
        state.kernels.add(event.candidate.sha256)
    elif isinstance(event, ValidationLinked):
        state.validation = event
    elif isinstance(event, MeasurementsRecorded) and event.role == "candidate":
        if state.validation is None or not state.validation.passed:
            raise _fail(e, "replay", "a candidate was measured without a passed validation")
        state.measured = event
    elif isinstance(event, RoundDecided):
        _replay_decision(e, state, event)
    elif isinstance(event, ProfileRecorded):
        state.profile_files.update(f.sha256 for f in event.files)
    elif isinstance(event, RunConcluded) and (view := state.view) is not None:
        full = RunView(run=view.run, cases=view.cases, rounds=view.rounds)
        if not conclusion_as_recorded(full, event):
            raise _fail(e, "replay", "the conclusion does not follow from the rounds")
    elif isinstance(event, RunReopened) and (view := state.view) is not None:
        if not view.concluded:
            raise _fail(e, "replay", "a run that has not concluded was reopened")
        if event.conclusion != view.run.conclusion or event.round != view.run.rounds_recorded + 1:
            raise _fail(e, "replay", "the reopening does not match the run's conclusion")
    try:
        state.fold.apply(e.stream_version, e.recorded_at, event)
    except projections.ProjectionError as exc:
        raise _fail(e, "replay", str(exc)) from None
    state.evidence.apply(event)


def _replay_decision(e: StoredEvent, state: _Stream, event: RoundDecided) -> None:
    view, submitted = state.view, state.submitted
    if view is None or submitted is None or submitted.round != event.round:
        raise _fail(e, "replay", f"RoundDecided for round {event.round} without its submission")
    passed = state.validation is not None and state.validation.passed
    if passed and state.measured is None:
        raise _fail(e, "replay", "a validated candidate was decided without measurements")
    measured = state.measured.measurements if state.measured and passed else None
    expected = decision(view, submitted, state.evidence, measured, recorded=event)
    expected = _as_recorded(expected, event)
    if expected == event:
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
        raise _fail(
            e, "replay", f"round {event.round}: recorded {what} differ from a re-derivation"
        )


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
    workers: int | None = None,
) -> Report:
    """Run every check; `observe` sees each event that passed its per-event checks, in seq
    order (the checkpoint verifier builds its Merkle tree from it).

    The whole ledger's runs are replayed in `workers` processes, each taking the runs that
    begin in its stretch of the log (`_plan_shares`; default `replay_workers()`, for a
    ledger of at least `PARALLEL_MIN_EVENTS` events with no gap in seq); one run, one
    worker, or a log with a gap (which the replay names) is replayed in this process.
    Either way the report is the one a replay of every event in seq order gives: the first
    failure is the one at the lowest seq, counted with the events, runs and warnings before
    it (see `_Share`)."""
    report = Report()
    shares: list[_Share] | None = None
    with store.transaction() as conn:
        bounds = store.seq_bounds(conn)  # (events, lowest seq, highest seq)
        total = bounds[0]
        side = _SideChecks(store, conn, run_id)
        try:
            count, plan = 1, None
            if run_id is None and _may_share(workers, total):
                # the runs' spans are read while the idle CPUs are measured
                since = cpu_sample() if workers is None else None
                spans = _read_spans(store, conn, bounds)
                count = worker_count(workers, total, since)
                plan = _plan_shares(spans, count) if spans and count > 1 else None
            if plan is not None:  # the storage and blob checks run here while workers replay
                shares = _replay_in_processes(store, plan, on_progress, side.run)
            side.storage()
            if shares is None:  # one process (or the workers could not say)
                shares = [_replay_share(store, conn, run_id, observe, on_progress, total)]
                observe = None
            if run_id is not None and not shares[0].first_seen:  # a wrong --run
                raise InputError(f"run {run_id!r} is not in the ledger")
            _judge(store, conn, shares, report, side.blobs)
        except ReplayStop as stop:
            report.first_failure = stop.failure
            report.checks[stop.failure.check] = "failed"
            started = CHECKS.index(stop.failure.check)
            for name in CHECKS[started + 1 :]:
                report.checks[name] = "not run"
        if observe is not None:  # the workers' events that passed, in seq order
            _observe(store, conn, report.events_checked, observe)
    if on_progress:
        on_progress(report.events_checked, report.events_checked)
    return report


PARALLEL_MIN_EVENTS = 20_000


def replay_workers(since: CpuSample | None = None) -> int:
    """Processes a whole-ledger replay is shared among: KERNEL_LEDGER_VERIFY_WORKERS (1 to
    64), else the idle CPUs: those this process may run on less those busy with other work
    (`busy_cpus`, since `since`; the 1-minute load average less this process where that
    cannot be measured), at least 1 and at most 8. A worker on a busy CPU only makes every
    process wait."""
    raw = os.environ.get("KERNEL_LEDGER_VERIFY_WORKERS")
    if raw is not None:
        if not raw.strip().isdigit() or not 1 <= int(raw) <= 64:
            raise InputError("KERNEL_LEDGER_VERIFY_WORKERS must be a whole number from 1 to 64")
        return int(raw)
    return max(1, min(8, idle_cpus(since)))


def idle_cpus(since: CpuSample | None = None) -> int:
    """The CPUs this process may run on less those busy with other work (`busy_cpus`,
    since `since`; the 1-minute load average less this process where that cannot be
    measured), at least 1."""
    cpus = _cpus()
    busy = busy_cpus(since)
    if busy is None:
        try:
            busy = os.getloadavg()[0] - 1  # this process is counted in it
        except (AttributeError, OSError):  # no load average here
            busy = 0.0
    return max(1, min(cpus, round(cpus - busy)))


BUSY_WINDOW_S = 0.05


class CpuSample(NamedTuple):
    ticks: int  # all CPUs' time, in clock ticks (/proc/stat)
    idle: int  # of which idle or waiting for I/O
    own: float  # this process's CPU seconds
    at: float  # time.monotonic()


def cpu_sample() -> CpuSample | None:
    """The kernel's CPU time counters now (None where there are none: not Linux)."""
    try:
        with open("/proc/stat", "rb") as handle:
            fields = handle.readline().split()
        if fields[0] != b"cpu":
            return None
        values = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError, IndexError):
        return None
    return CpuSample(sum(values), values[3] + values[4], time.process_time(), time.monotonic())


def busy_cpus(since: CpuSample | None = None, window: float = BUSY_WINDOW_S) -> float | None:
    """How many of this process's CPUs were busy with other work than this process's,
    from `since` (else from now) until now, waiting until `window` seconds have passed: the
    share of all CPUs' time not idle and not waiting for I/O (stolen time counts as busy),
    times the CPUs this process may run on, less the CPUs this process itself used meanwhile
    (so a caller may do its own work during the window). None where the kernel keeps no
    such counters.

    A present measure, unlike the load average, which still counts for a minute the
    processes that ran just before (a benchmark's previous step, a build)."""
    start = since if since is not None else cpu_sample()
    if start is None:
        return None
    left = window - (time.monotonic() - start.at)
    if left > 0:
        time.sleep(left)
    end = cpu_sample()
    if end is None or end.ticks <= start.ticks:
        return None
    share = 1 - (end.idle - start.idle) / (end.ticks - start.ticks)
    own = (end.own - start.own) / max(end.at - start.at, 1e-9)
    return max(0.0, _cpus() * share - own)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _may_share(workers: int | None, total: int) -> bool:
    """Whether `worker_count` may give more than one process."""
    if workers is not None:
        return workers > 1
    return "KERNEL_LEDGER_VERIFY_WORKERS" in os.environ or total >= PARALLEL_MIN_EVENTS


def worker_count(workers: int | None, total: int, since: CpuSample | None = None) -> int:
    """The processes `verify_ledger(workers=workers)` replays a ledger of `total` events in
    (`since`: see `replay_workers`)."""
    if workers is not None:
        return max(1, workers)
    if "KERNEL_LEDGER_VERIFY_WORKERS" in os.environ:
        return replay_workers()
    return replay_workers(since) if total >= PARALLEL_MIN_EVENTS else 1


@dataclass
class _Share:
    """What the replay of one share of the runs found. Positions are 0-based places in seq
    order among all events (seq - 1 in a log without gaps), so the shares' findings combine
    into what one replay in seq order reports: its first failure is the one at the lowest
    position, `events_checked` that position, and the runs and warnings are those met up
    to it."""

    events: int = 0  # events read
    failure: Failure | None = None
    position: int | None = None  # of the failing event
    first_seen: list[int] = field(default_factory=list)  # where each of its runs begins
    warnings: list[tuple[int, int, str]] = field(default_factory=list)  # (run's first
    # position, the event's position, the warning)
    projection: tuple[str, str] | None = None  # (run id, fault): the first by run id
    missing_blob: tuple[str, str] | None = None  # (run id, what): the first by run id


@dataclass(frozen=True)
class _SharePlan:
    """A whole ledger's runs shared among `parts` workers. A run belongs to the share whose
    stretch of the log (an equal part of its seq range) holds the run's first event, and
    each share reads the log only from its first run's first event to its last run's last
    event: runs are mostly written one after another, so a worker reads little beyond its
    own events. Planned only for a log with no gap in seq (a gap is the replay's first
    finding, which one process names), so an event's position is its seq - 1."""

    parts: int
    snapshot: tuple[int, int, int]  # (events, lowest seq, highest seq) when planned
    owner: dict[str, int]  # run id -> its share
    spans: tuple[tuple[int, int], ...]  # per share: (first seq, last seq) to read

    def runs(self, part: int) -> frozenset[str]:
        return frozenset(run for run, share in self.owner.items() if share == part)

    def owns(self, part: int, run_id: str) -> bool:
        """Whether share `part` judges `run_id`; a run with projection rows but no events
        falls to share 0."""
        return self.owner.get(run_id, 0) == part


_Spans = tuple[tuple[int, int, int], list[tuple[str, int, int]]]


def _read_spans(store: Store, conn, snapshot: tuple[int, int, int] | None = None) -> _Spans | None:
    """(events, lowest seq, highest seq) (`snapshot`, else read now) and each run's first
    and last seq, or None where the log has a gap in seq (or no events): then one process
    replays it, and names the gap."""
    snapshot = snapshot if snapshot is not None else store.seq_bounds(conn)
    count, low, high = snapshot
    if count == 0 or low != 1 or high != count:
        return None
    return snapshot, store.run_spans(conn)


def _plan_shares(read: _Spans, parts: int) -> _SharePlan:
    """The plan for `parts` workers over the spans `_read_spans` read."""
    snapshot, runs = read
    count = snapshot[0]
    owner: dict[str, int] = {}
    spans: list[tuple[int, int]] = [(1, 0)] * parts  # (1, 0): nothing to read
    for run_id, first, last in runs:
        part = min(parts - 1, (first - 1) * parts // count)
        owner[run_id] = part
        lo, hi = spans[part]
        spans[part] = (first, last) if lo > hi else (min(lo, first), max(hi, last))
    return _SharePlan(parts, snapshot, owner, tuple(spans))


def _replay_share(
    store: Store,
    conn,
    run_id: str | None,
    observe: Callable[[StoredEvent], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    total: int = 0,
    *,
    plan: _SharePlan | None = None,
    part: int = 0,
    counter: Any = None,
) -> _Share:
    """Replay every run (or `run_id`'s), checking seq over every event, or only the runs
    of share `part` of `plan`, reading only its stretch of the log; stops at the first
    failure. `counter` (a shared value) is told how many of its events were replayed."""
    share = _Share()
    streams: dict[str, _Stream | _Concluded] = {}
    firsts: dict[str, int] = {}
    expected_seq = 1 if run_id is None and plan is None else None
    position = 0
    replayed = 0
    if plan is None:
        pages = store.iter_event_pages(conn, stream_id=run_id)
        mine: frozenset[str] = frozenset()
        last = 0
    else:
        first, last = plan.spans[part]
        pages = store.iter_event_pages(conn, after_seq=first - 1) if first <= last else iter(())
        mine = plan.runs(part)
    try:
        for page in pages:
            for row in page:
                stream_id = row[2]
                if plan is not None:
                    if row[0] > last:
                        break
                    if stream_id not in mine:
                        continue
                    position = row[0] - 1
                e = _stored(row)
                state = streams.get(stream_id)
                if state is None:
                    state = streams[stream_id] = _Stream()
                    firsts[stream_id] = position
                    share.first_seen.append(position)
                seen = len(state.warnings)
                try:
                    event = _check_record(e, state, expected_seq)
                    if type(state) is _Concluded:  # an event after the run's conclusion
                        state = streams[stream_id] = _reopen(store, conn, e, state)
                    assert type(state) is _Stream
                    _replay(e, state, event)
                finally:
                    for warning in state.warnings[seen:]:
                        share.warnings.append((firsts[stream_id], position, warning))
                state.version, state.last_hash = e.stream_version, e.event_hash
                if e.event_type == "RunConcluded" and state.view is not None:
                    # compared now and let go; a run reopened by a later event stays whole
                    # and is compared with the others at the end
                    streams[stream_id] = _conclude(store, conn, stream_id, state)
                if observe is not None:
                    observe(e)
                position += 1
                replayed += 1
                if expected_seq is not None:
                    expected_seq += 1
                if on_progress and position % 5000 == 0:
                    on_progress(position, total)
            else:
                if counter is not None:
                    counter.value = replayed
                continue
            break  # past the share's stretch
    except ReplayStop as stop:
        share.failure, share.position = stop.failure, position
        return share
    if counter is not None:
        counter.value = replayed
    share.events = position if plan is None else plan.snapshot[0]
    stored = set(store.all_run_ids(conn)) if run_id is None else {run_id}
    if plan is not None:
        stored = {stream_id for stream_id in stored if plan.owns(part, stream_id)}
    share.projection = _first_projection_fault(store, conn, streams, stored)
    share.missing_blob = _first_missing_blob(store, conn, streams)
    return share


class _SideChecks:
    """The checks of the stored rows that the replay does not make (storage types of the
    events' columns, the blob table), made once and raised where a replay in one process
    meets them: storage first, blobs after the runs. `run` makes both while worker
    processes replay; a check not made yet is made when it is asked for."""

    def __init__(self, store: Store, conn, run_id: str | None) -> None:
        self._store, self._conn, self._run_id = store, conn, run_id
        self._found: dict[str, ReplayStop | None] = {}

    def run(self) -> bool:
        """Make both checks now; False when the storage check failed (the replay's
        findings then do not matter)."""
        self._make("storage")
        self._make("blobs")
        return self._found["storage"] is None

    def storage(self) -> None:
        self._raise("storage")

    def blobs(self) -> None:
        self._raise("blobs")

    def _make(self, which: str) -> None:
        if which in self._found:
            return
        try:
            if which == "storage":
                _check_storage(self._store, self._conn, self._run_id, "payload")
            else:
                _check_blob_table(self._store, self._conn)
        except ReplayStop as stop:
            self._found[which] = stop
        else:
            self._found[which] = None

    def _raise(self, which: str) -> None:
        self._make(which)
        stop = self._found[which]
        if stop is not None:
            raise stop


def _judge(
    store: Store, conn, shares: list[_Share], report: Report, check_blobs: Callable[[], None]
) -> None:
    """The report of a replay in seq order, from its shares' findings; raises `ReplayStop`
    with the first failure."""
    failed = [share for share in shares if share.failure is not None]
    at = min((share.position for share in failed), default=None)  # type: ignore[type-var]
    met = [found for share in shares for found in share.warnings]
    if at is not None:
        met = [w for w in met if w[1] <= at]
    met.sort(key=lambda w: w[:2])  # by run (as met), then event; stable within an event
    report.warnings = [warning for _, _, warning in met]
    if at is not None:
        first = next(share for share in failed if share.position == at)
        report.events_checked = at
        report.runs_checked = sum(q <= at for share in shares for q in share.first_seen)
        assert first.failure is not None
        raise ReplayStop(first.failure)
    report.events_checked = shares[0].events
    report.runs_checked = sum(len(share.first_seen) for share in shares)
    faults = [share.projection for share in shares if share.projection is not None]
    if faults:
        raise _fail(None, "projection", min(faults)[1])
    check_blobs()
    missing = [share.missing_blob for share in shares if share.missing_blob is not None]
    if missing:
        stream_id, what = min(missing)
        raise _fail(None, "blobs", f"run {stream_id!r}: {what}")


def _replay_in_processes(
    store: Store,
    plan: _SharePlan,
    on_progress: Callable[[int, int], None] | None,
    meanwhile: Callable[[], bool] | None = None,
) -> list[_Share] | None:
    """The shares of `plan` replayed in worker processes, each with its own connection;
    None when one of them could not say (it failed to start or open the ledger, or the
    ledger it saw is not the one planned: (events, lowest seq, highest seq) differ): then
    the caller replays in its own process, which says why, or replays what it sees.
    `meanwhile` runs here once the workers have started; when it returns False they are
    stopped and None is returned."""
    from multiprocessing.connection import wait

    from ledger.integrity.inprocesses import process_context

    ctx = process_context()
    processes, counters, pending = [], [], {}
    found: dict[int, Any] = {}
    count = plan.parts
    try:
        for part in range(count):
            reader, writer = ctx.Pipe(duplex=False)
            counter = ctx.Value("q", 0, lock=False)
            process = ctx.Process(
                target=_share_process,
                args=(store.url, store.read_only, plan, part, writer, counter),
                daemon=True,
            )
            process.start()  # refused in a daemonic process, for one
            writer.close()
            processes.append(process)
            counters.append(counter)
            pending[reader] = part
    except (AssertionError, OSError, ValueError):
        pending.clear()
        for process in processes:
            process.kill()
    try:
        if pending and meanwhile is not None and not meanwhile():
            pending.clear()
            for process in processes:
                process.kill()
        while pending:
            for reader in wait(list(pending), timeout=0.5):
                part = pending.pop(reader)
                try:
                    found[part] = reader.recv()
                except (EOFError, OSError):
                    found[part] = None
                reader.close()
            if on_progress is not None:
                on_progress(sum(counter.value for counter in counters), plan.snapshot[0])
    except BaseException:  # an error here, or an interrupt: the workers are not waited for
        for process in processes:
            process.kill()
        raise
    finally:
        for process in processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
    shares = [found.get(part) for part in range(count)]
    if not all(isinstance(share, _Share) for share in shares):
        return None
    return shares  # type: ignore[return-value]


def _share_process(
    url: str,
    read_only: bool,
    plan: _SharePlan,
    part: int,
    writer: Any,
    counter: Any,
) -> None:
    """A worker process: replay share `part` of the ledger at `url` and send the `_Share`
    (or a line saying why not)."""
    result: _Share | str
    try:
        store = Store(url, create=False, read_only=read_only)
        try:
            with store.transaction() as conn:
                if store.seq_bounds(conn) != plan.snapshot:
                    result = "the ledger changed while it was verified"
                else:
                    result = _replay_share(store, conn, None, plan=plan, part=part, counter=counter)
        finally:
            store.close()
    except Exception as exc:  # the replay in the parent process reports it
        result = f"{type(exc).__name__}: {exc}"
    writer.send(result)
    writer.close()


def _observe(store: Store, conn, passed: int, observe: Callable[[StoredEvent], None]) -> None:
    """Show `observe` the first `passed` events in seq order (those that passed)."""
    if passed == 0:
        return
    for e in store.iter_events(conn):
        observe(e)
        passed -= 1
        if passed == 0:
            return


def verify_chain(
    store: Store,
    run_id: str | None = None,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    batch: int = 2000,
) -> Report:
    """The seq, hash and chain checks of `verify_ledger` alone, with the same failures: each
    event's hash recomputed from its stored envelope bytes, stream versions contiguous and
    parent hashes linked per run, and (whole ledger) seq gapless from 1. Over the stored rows
    as they come: no payload is parsed and no event object is built; memory holds one page
    of rows and each run's chain head."""
    report = Report(checks=dict.fromkeys(CHAIN_CHECKS, "ok"))
    heads: dict[str, tuple[int, str]] = {}
    whole = run_id is None
    expected = 1  # the next seq; minus one, the events that passed
    with store.transaction() as conn:
        total = store.event_count(conn) if on_progress else 0
        try:
            _check_storage(store, conn, run_id, "hash")  # the hash is over these bytes
            start = (0, ZERO_HASH)
            for page in store.iter_event_pages(conn, batch=batch, stream_id=run_id):
                for row in page:
                    seq, event_id, stream_id, version, kind, schema, at, payload, parent, stored = (
                        row
                    )
                    if whole and seq != expected:
                        raise _row_fail(row, "seq", GAP.format(expected=expected, seq=seq))
                    computed = event_hash(
                        stream_id=stream_id,
                        stream_version=version,
                        event_id=event_id,
                        event_type=kind,
                        schema_version=schema,
                        recorded_at=at,
                        parent_hash=parent,
                        payload=payload,
                    )
                    if computed != stored:
                        raise _row_fail(row, "hash", BAD_HASH)
                    previous, head = heads.get(stream_id, start)
                    if version != previous + 1:
                        reason = NOT_CONTIGUOUS.format(version=version, previous=previous)
                        raise _row_fail(row, "chain", reason)
                    if parent != head:
                        raise _row_fail(row, "chain", BAD_PARENT)
                    heads[stream_id] = (version, stored)
                    expected += 1
                if on_progress:
                    on_progress(expected - 1, total)
            if not whole and not heads:
                raise InputError(f"run {run_id!r} is not in the ledger")
        except ReplayStop as stop:
            report.first_failure = stop.failure
            report.checks[stop.failure.check] = "failed"
            for name in CHAIN_CHECKS[CHAIN_CHECKS.index(stop.failure.check) + 1 :]:
                report.checks[name] = "not run"
    report.events_checked = expected - 1
    report.runs_checked = len(heads)
    if on_progress:
        on_progress(report.events_checked, report.events_checked)
    return report


def _row_fail(row, check: str, reason: str) -> ReplayStop:
    return ReplayStop(Failure(row[0], row[2], row[3], check, reason))


def _conclude(store: Store, conn, stream_id: str, state: _Stream) -> _Concluded:
    """Compare a concluded run's projection rows and kernel sources now, and keep only what
    the rest of the replay needs of it."""
    stored = store.stored_projection(conn, stream_id)
    return _Concluded(
        state.version,
        state.last_hash,
        _projection_fault(stream_id, state.view, stored),
        _missing_blob(store, conn, state),
        state.warnings,
    )


def _reopen(store: Store, conn, e: StoredEvent, done: _Concluded) -> _Stream:
    """The state of a concluded run, folded again from its events before `e` (each passed
    every check already), for an event that follows the conclusion."""
    state = _Stream()
    for past in store.iter_events(conn, stream_id=e.stream_id):
        if past.seq >= e.seq:
            break
        _replay(past, state, past.event())
        state.version, state.last_hash = past.stream_version, past.event_hash
    state.warnings = done.warnings  # as found the first time; the fold above repeats them
    return state


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


def _first_projection_fault(
    store: Store, conn, streams: dict[str, _Stream | _Concluded], stored_ids: set[str]
) -> tuple[str, str] | None:
    """(run id, fault) of the first run, in run id order, whose stored projection rows
    differ from the rebuild (`stored_ids`: the runs with rows to compare)."""
    for stream_id in sorted(stored_ids | set(streams)):
        state = streams.get(stream_id)
        if type(state) is _Concluded:
            fault = state.projection
        else:
            rebuilt = state.view if state is not None else None
            fault = _projection_fault(stream_id, rebuilt, store.stored_projection(conn, stream_id))
        if fault is not None:
            return stream_id, fault
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


def _check_storage(store: Store, conn, run_id: str | None, check: str) -> None:
    """The first event stored with a column of another storage type than the ledger writes
    (`ledger.store.checks`): reading it as if it were right would hide a rewrite."""
    found = first_mistyped_event(conn, store.dialect, run_id)
    if found is not None:
        seq, stream_id, version, column, kind = found
        reason = (
            f"column {column} is stored as {kind}, not {SQLITE_EVENT_TYPES[column]}: "
            "the row was written outside kernel-ledger"
        )
        raise ReplayStop(Failure(seq, stream_id, version, check, reason))


def _check_blob_table(store: Store, conn) -> None:
    """Every stored blob has the size and storage type it was stored with and hashes to its
    key."""
    misstated = first_misstated_blob(conn, store.dialect)
    if misstated is not None:
        raise _fail(
            None,
            "blobs",
            f"stored blob {misstated}: its size or storage type is not what was stored",
        )
    for digest, content in store.iter_blobs(conn):
        if sha256_hex(content) != digest:
            raise _fail(None, "blobs", f"stored kernel source {digest} does not hash to its key")


def _first_missing_blob(
    store: Store, conn, streams: dict[str, _Stream | _Concluded]
) -> tuple[str, str] | None:
    """(run id, what is missing) of the first run, in run id order, that names a kernel
    source or profile file that is not stored."""
    for stream_id, state in sorted(streams.items()):
        if type(state) is _Concluded:
            missing = state.missing_blob
        else:
            missing = _missing_blob(store, conn, state)
        if missing is not None:
            return stream_id, missing
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


class LedgerCheck:
    """The per-event checks of `verify` (seq gapless from 1, hash, chain, canonical payload,
    payload validates) over a whole ledger's events in seq order, without the replay, for a
    reader that moves them (`db copy`). Memory: one chain head per run."""

    def __init__(self) -> None:
        self._heads: dict[str, _Head] = {}
        self._expected = 1

    def check(self, e: StoredEvent) -> Event:
        """Check the next event and move its run's head past it; returns the parsed event.
        Raises `ReplayStop` with the failure."""
        head = self._heads.get(e.stream_id)
        if head is None:
            head = self._heads[e.stream_id] = _Head()
        event = _check_record(e, head, self._expected)
        head.version, head.last_hash = e.stream_version, e.event_hash
        self._expected += 1
        return event


class RunReplay:
    """One run's events replayed in order under the checks `verify` applies to each (hash,
    stream version, parent link, then the replay rules), for a reader that is not a store,
    such as an exported bundle. Each method raises `ReplayStop` with the failure."""

    def __init__(self) -> None:
        self._state = _Stream()

    def check(self, e: StoredEvent, payload_value: Any = None) -> Event:
        """The event's own checks (hash, version, parent, canonical payload); returns the
        parsed event. `payload_value`: see `_check_record`."""
        return _check_record(e, self._state, None, payload_value)

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
