"""Import of a run folder written by the existing JSON-file controller.

The folder's files are those `ledger/reports/runfolder.py` describes (and writes for the
drop-in); what the import accepts, re-derives and refuses is docs/migration.md's "Importing
existing run folders". The run is replayed as the events `plan` and `record` would have
written, through the same input checks and round path (`round.admit`, `round.round_events`);
any disagreement with the folder refuses the whole import, listing every one, and nothing is
written. Events keep the folder's times: planning at the manifest's `created_at`, each round
at its `recorded_at`, the conclusion at the manifest's `updated_at`; their ids derive from
the content, so importing the same folder again writes nothing.
"""

from __future__ import annotations

import itertools
import json
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ledger.core import projections
from ledger.core.controller import conclusion_event
from ledger.core.decide import CONTROLLER_CONTRACT
from ledger.core.events import Event, RoundDecided, RoundSubmitted, RunPlanned, RunReopened
from ledger.core.evidence import RunEvidence
from ledger.core.projections import RunView
from ledger.core.round import admit, round_events
from ledger.errors import InputError
from ledger.inputs.jsonio import JsonFile, display, plural, read_json
from ledger.inputs.models import (
    RoundResult,
    base_folder,
    load_config,
    load_manifest,
    manifest_run_id,
    resolve,
    validate_model,
)
from ledger.integrity.hashing import sha256_hex
from ledger.services.building import (
    checked_round,
    plan_events,
    read_kernel,
    recorded_file,
    submitted_event,
)
from ledger.store import audit_store
from ledger.store.eventstore import ZERO_HASH, Store, StoredEvent, sealed_row

CONFIG = "optimization-config.json"
STATE = "state.json"
ROUNDS = "rounds.json"
MANIFEST = "manifest.json"
ANALYSIS = "analysis.json"
DECISIONS = ("KEEP", "DISCARD", "NOISE", "FAIL")
TOLERANCE = 1e-9  # figures the legacy controller wrote are compared to this absolute tolerance
EVENT_ID_NAMESPACE = uuid.UUID("5b3c1f0e-8a5d-4c39-9a43-6c8e2f0b7d11")


class LegacyRejected(InputError):
    """The folder's history disagrees with a replay; `problems` lists every disagreement."""

    def __init__(self, run_id: str, folder: Path, problems: list[str]) -> None:
        self.run_id = run_id
        self.problems = list(problems)
        listed = "; ".join(f"({i}) {p}" for i, p in enumerate(problems, start=1))
        super().__init__(
            f"legacy run {run_id!r} in {display(folder)} was not imported: "
            f"{plural(len(problems), 'disagreement')} with a replay: {listed}; nothing was written"
        )


@dataclass
class LegacyResult:
    """One folder's import, its fields in the order `import --legacy --json` gives them."""

    status: str  # "imported" or "unchanged"
    run_id: str
    rounds: int
    events: int
    events_imported: int  # written now: all of `events`, those after an earlier import, or 0
    decisions: list[str]
    concluded: bool
    conclusion: str | None
    best_kernel_sha256: str
    legacy_files: dict[str, str] = field(default_factory=dict)  # name -> sha256
    reopened_rounds: list[int] = field(default_factory=list)  # recorded after the conclusion
    notes: list[str] = field(default_factory=list)  # what the import read differently


@dataclass(frozen=True)
class ReplayedFolder:
    """A run folder replayed, that agreed with its replay: its run's events sealed as this
    ledger stores them (`_sealed`), kernel sources, the run's view after them, and the
    result to report once written."""

    folder: Path
    result: LegacyResult
    records: list[StoredEvent]
    blobs: list[bytes]
    view: RunView


@dataclass
class _Replay:
    """What the replay builds: events with their times, kernel sources, the run's view."""

    items: list[tuple[Event, str]] = field(default_factory=list)
    blobs: list[bytes] = field(default_factory=list)
    view: RunView | None = None
    evidence: RunEvidence = field(default_factory=RunEvidence)
    problems: list[str] = field(default_factory=list)

    def add(self, event: Event, at: str, *, evidence_folded: bool = False) -> None:
        """Append an event to the replay; `evidence_folded`: `round_events` folded it into
        the evidence already."""
        version = len(self.items) + 1
        self.view = projections.apply(self.view, version, at, event)
        if not evidence_folded:
            self.evidence.apply(event)
        self.items.append((event, at))


@dataclass(frozen=True)
class _Paths:
    """Where the folder's paths lead: the workspace relative paths resolve against, and the
    workspace the controller ran in, when it was elsewhere (absolute paths it stored under
    that folder are looked for under `workspace` when they are gone)."""

    workspace: Path
    ran_in: Path | None = None

    def stored(self, raw: str) -> Path:
        """A path the controller stored (absolute), or one written relative."""
        path = resolve(self.workspace, raw)
        if path.exists() or self.ran_in is None or not Path(raw).is_absolute():
            return path
        try:
            moved = self.workspace / path.relative_to(self.ran_in)
        except ValueError:
            return path
        return moved if moved.exists() else path


def _paths(workspace: Path, config: Any, manifest: Any) -> tuple[_Paths, Path]:
    """The folder's path resolution, and the folder the config's relative paths resolve
    against: the workspace, else the one the controller ran in (from the absolute
    `starting-kernel` URI it stored for the config's relative `kernel.path`)."""
    written = config.kernel.path
    ran_in = None
    artifact = manifest.artifact("starting-kernel")
    if artifact is not None and not Path(written).is_absolute():
        stored = Path(artifact.uri)
        parts = Path(os.path.normpath(written)).parts
        if stored.is_absolute() and stored.parts[-len(parts) :] == parts:
            ran_in = Path(*stored.parts[: -len(parts)])
    paths = _Paths(workspace, ran_in if ran_in != workspace else None)
    if ran_in is None or Path(written).is_absolute() or resolve(workspace, written).exists():
        return paths, workspace
    if resolve(ran_in, written).exists():
        return paths, ran_in
    return paths, workspace


def _replay_folder(
    files: dict[str, JsonFile],
    config_doc: JsonFile,
    config: Any,
    manifest: Any,
    paths: _Paths,
    base: Path,
    concluded_after: int | None,
) -> tuple[_Replay, str | None, list[int]]:
    """Replay the folder with its conclusion after `concluded_after` rounds (None: never);
    the replay, the conclusion and the rounds recorded after it."""
    run_id = config.run_id
    replay = _Replay()
    _plan(replay, config_doc, config, _time(manifest.created_at, f"{MANIFEST} created_at"), base)
    rounds = _rounds(files[ROUNDS])
    analysis = files[ANALYSIS].value if ANALYSIS in files else None
    conclusion = None
    reopened: list[int] = []
    for index, value in enumerate(rounds):
        if index == concluded_after:
            conclusion = _conclude(replay, analysis, manifest.status, manifest.updated_at)
            _reopen(replay, value, index, conclusion)
        if conclusion is not None:
            reopened.append(index + 1)
        _round(replay, files[ROUNDS], index, value, run_id, config.parent_run_id, paths, base)
    if concluded_after == len(rounds):
        conclusion = _conclude(replay, analysis, manifest.status, manifest.updated_at)
    elif analysis is not None and reopened and analysis.get("round_count") == len(rounds):
        view = replay.view  # a later analyze rewrote analysis.json; the manifest refused it
        assert view is not None
        _compare_analysis(replay, analysis, conclusion_event(view, CONTROLLER_CONTRACT))
    view = replay.view
    assert view is not None
    _compare_state(replay, files[STATE], view, paths)
    if manifest.run_id not in (run_id, manifest_run_id(run_id)):
        replay.problems.append(
            f"{MANIFEST} is the manifest of run {manifest.run_id!r}, not of {run_id!r}"
        )
    return replay, conclusion, reopened


def replay_legacy(folder: Path, *, workspace: Path | None = None) -> ReplayedFolder:
    """Replay the folder and compare every recorded decision, figure and state field with
    the replay: its run, sealed as this ledger stores it, when everything agrees; else
    `LegacyRejected` naming every disagreement (or `InputError` for a file that cannot be
    read). Relative paths in its files resolve against `workspace` (default: the working
    directory), where the controller ran. Reads the folder's files, writes nothing."""
    folder = Path(folder).absolute()
    if not folder.is_dir():
        if folder.is_file():
            raise InputError(
                f"--legacy {display(folder)} is a file, not a run folder (a bundle is imported "
                "without --legacy)"
            )
        raise InputError(f"--legacy {display(folder)} is not a folder")
    if not (folder / CONFIG).exists():
        _not_a_run_folder(folder)
    files = {
        name: read_json(folder / name, f"legacy {name}")
        for name in (CONFIG, STATE, ROUNDS, MANIFEST)
    }
    if (folder / ANALYSIS).exists():
        files[ANALYSIS] = read_json(folder / ANALYSIS, f"legacy {ANALYSIS}")
    config_doc, config = load_config(folder / CONFIG)
    _, manifest = load_manifest(folder / MANIFEST)
    paths, base = _paths(base_folder(workspace), config, manifest)
    run_id = config.run_id
    rounds = _rounds(files[ROUNDS])
    analysis = files[ANALYSIS].value if ANALYSIS in files else None
    points = _conclusion_points(rounds, analysis, manifest)
    tried = []
    for point, note in points:  # the first point whose replay agrees with the folder
        replay, conclusion, reopened = _replay_folder(
            files, config_doc, config, manifest, paths, base, point
        )
        tried.append((replay, conclusion, reopened, note))
        if not replay.problems:
            break
    else:
        replay, conclusion, reopened, note = tried[0]
    notes = [note] if note is not None else []
    if base != paths.workspace:
        notes.append(
            f"the config's relative paths were not under the workspace {display(paths.workspace)}"
            f"; they were read from {display(base)}, where the controller ran"
        )
    if replay.problems:
        raise LegacyRejected(run_id, folder, replay.problems)
    view = replay.view
    assert view is not None
    result = LegacyResult(
        run_id=run_id,
        status="unchanged",
        rounds=view.run.rounds_recorded,
        events=len(replay.items),
        events_imported=0,
        decisions=[r.decision for r in view.rounds],
        concluded=view.concluded,
        conclusion=conclusion,
        best_kernel_sha256=view.run.best_kernel_sha256,
        legacy_files={name: doc.sha256 for name, doc in sorted(files.items())},
        reopened_rounds=reopened,
        notes=notes,
    )
    sealed = _sealed(
        run_id,
        ((e.event_type, e.schema_version, at, e.canonical_payload()) for e, at in replay.items),
    )
    return ReplayedFolder(folder, result, sealed, replay.blobs, view)


def _not_a_run_folder(folder: Path) -> None:
    """Refuse a folder without the controller's configuration, saying so plainly, and naming
    the run folders in it when it is the folder that holds them (`optimization/`)."""
    held = (
        sorted(p.name for p in folder.iterdir() if (p / CONFIG).is_file())
        if _listable(folder)
        else []
    )
    if held:
        raise InputError(
            f"--legacy {display(folder)} is not a run folder (no {CONFIG}); it holds "
            f"{plural(len(held), 'run folder')} ({', '.join(map(display, held[:3]))}"
            f"{', ...' if len(held) > 3 else ''}): name them, as in --legacy "
            f"{display(folder)}/*"
        )
    raise InputError(f"--legacy {display(folder)} is not a run folder: it has no {CONFIG}")


def _listable(folder: Path) -> bool:
    try:
        next(iter(folder.iterdir()), None)
    except OSError:
        return False
    return True


def import_legacy(store: Store, folder: Path, *, workspace: Path | None = None) -> LegacyResult:
    """Replay the folder (`replay_legacy`); append its events in one transaction if
    everything agrees."""
    return import_legacies(store, [folder], workspace=workspace)[0]


def import_legacies(
    store: Store,
    folders: Sequence[Path],
    *,
    workspace: Path | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[LegacyResult]:
    """`import_legacy` of each folder in the order given, all in one transaction: every run
    is imported, or (one folder refused) none is, and the refusal names that folder.

    Each folder is replayed on its own (its files alone decide it), then written. A run this
    ledger holds already is left as it is when the folder gives the same events, and gets
    the events after them when the folder has gone on since (rounds recorded since it was
    imported); a run here with other events is refused. `on_progress(folders written,
    folders)` is told after each."""
    results = []
    with ExitStack() as stack:
        conn = None
        for folder in map(Path, folders):
            run = replay_legacy(folder, workspace=workspace)
            if conn is None:
                conn = stack.enter_context(store.transaction(write=True))
            results.append(_write(store, conn, run))
            if on_progress is not None:
                on_progress(len(results), len(folders))
    return results


def _write(store: Store, conn: Any, run: ReplayedFolder) -> LegacyResult:
    """Append a replayed run in the caller's transaction (see `import_legacies`)."""
    run_id = run.result.run_id
    records, view = run.records, run.view
    actor = store.actor(conn)  # who imports: sealed into the events appended now
    present = store.read_stream(conn, run_id)
    if present and _goes_on(present, records):
        # the folder's earlier import, and the rounds recorded since on top of it
        spelled = _spelling(present[-1].recorded_at)
        tail = (
            (r.event_type, r.schema_version, spelled(r.recorded_at), r.payload) for r in records
        )
        records = present + _sealed(
            run_id,
            itertools.islice(tail, len(present), None),
            version=len(present),
            parent=present[-1].event_hash,
            actor=actor,
        )
        view = None  # folded from the events as they are stored
    else:
        contents = ((r.event_type, r.schema_version, r.recorded_at, r.payload) for r in records)
        records = _sealed(run_id, contents, actor=actor)
    outcome = audit_store.import_run_verbatim(
        store, conn, run_id, records, run.blobs, view, source=f"the folder {display(run.folder)}"
    )
    written = len(outcome.imported)
    return replace(
        run.result, status="imported" if written else "unchanged", events_imported=written
    )


def _goes_on(present: Sequence[StoredEvent], records: Sequence[StoredEvent]) -> bool:
    """Whether the stored run is this folder's rounds so far, so that the folder's events
    after them (if any) are new: the run as an earlier import of the folder wrote it, or as
    `plan` and `record` kept it while they wrote the folder (the drop-in,
    cli/triton_optimization.py), either of which the controller may have gone on writing
    since. Up to the stored head the events must be the same but for how each step was
    taken (`_same_as_read`):

    - `RoundSubmitted.result`: the folder's `rounds.json` for an import (the whole file,
      which grows by a round each time the controller records one), or the round's own
      result file for `record`. The document read (`result_document`) must be the same
      where the file is the same; `record`'s is the round's own file, whose fields the
      round's events hold, and those must be the same;
    - `RunPlanned.config`: the folder's `optimization-config.json` for an import, or the
      configuration `plan` was given; the same file must not have changed;
    - `RunReopened.reason`, which names who reopened the run: `record` taking a round after
      `analyze`, or an import finding one;

    the paths as the step's input wrote them (`written_path` of a file reference: `record`
    keeps the relative path a round result names, an import reads the controller's resolved
    one), and the times, which `record` keeps to the second as the controller writes them and
    an import writes as microseconds: the same instant. Every other field must be the
    same."""
    if len(records) < len(present):
        return False
    for mine, theirs in zip(present, records, strict=False):
        # hashes chain in the parent's: once one event differs, every later hash does
        if (mine.event_type, mine.schema_version) != (theirs.event_type, theirs.schema_version):
            return False
        if mine.recorded_at != theirs.recorded_at and not _same_instant(
            mine.recorded_at, theirs.recorded_at
        ):
            return False
        if mine.payload != theirs.payload and not _same_as_read(
            mine.event_type,
            _as_read(json.loads(mine.payload)),
            _as_read(json.loads(theirs.payload)),
        ):
            return False
    return True


def _as_read(value: Any) -> Any:
    """A payload without the paths as its input wrote them (`written_path`)."""
    if isinstance(value, dict):
        return {k: _as_read(v) for k, v in value.items() if k != "written_path"}
    if isinstance(value, list):
        return [_as_read(v) for v in value]
    return value


# the file reference of the file an event's step read, by event type
_READ_FROM = {RoundSubmitted.event_type: "result", RunPlanned.event_type: "config"}


def _same_as_read(event_type: str, mine: Any, theirs: Any) -> bool:
    """Two payloads of one event type that differ at most in how their step was taken: the
    file it read, or who reopened the run (see `_goes_on`)."""
    if mine == theirs:
        return True
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return False
    if event_type == RunReopened.event_type:
        # who reopened the run: `record` on a round after analyze, or this import
        mine.pop("reason", None)
        theirs.pop("reason", None)
        return mine == theirs
    key = _READ_FROM.get(event_type)
    if key is None:
        return False
    ours, other = mine.pop(key, None), theirs.pop(key, None)
    if not isinstance(ours, dict) or not isinstance(other, dict):
        return False
    same_file = ours.get("path") == other.get("path")
    if event_type == RunPlanned.event_type and same_file and ours != other:
        return False  # the folder's configuration changed since
    if event_type == RoundSubmitted.event_type and not same_file:
        mine.pop("result_document", None)
        theirs.pop("result_document", None)
    return mine == theirs


def _spelling(stored: str) -> Callable[[str], str]:
    """How the events added to a run spell their times: as its stored events do. A run the
    drop-in recorded keeps the controller's times to the second (`...:05Z`), where an
    import writes microseconds (`...:05.000000Z`); the same instant either way, but the
    history sorts times as text, and its rounds of one second must keep their order."""
    if stored.endswith("Z") and "." not in stored:
        return lambda at: at[:-8] + "Z" if at.endswith(".000000Z") else at
    return lambda at: at


def _same_instant(a: str, b: str) -> bool:
    try:
        return datetime.fromisoformat(a) == datetime.fromisoformat(b)
    except ValueError:
        return False


def _sealed(
    run_id: str,
    contents: Iterable[tuple[str, int, str, bytes]],
    *,
    version: int = 0,
    parent: str = ZERO_HASH,
    actor: str | None = None,
) -> list[StoredEvent]:
    """Events of the run after `version` (whose event hash is `parent`), from their contents
    (event type, schema version, time, canonical payload), as `Store.write` would seal them
    for `actor` (the importer's stored actor text; None in a replay not yet written):
    content id, version, parent and event hash (`seq` 0 until written), so the run goes
    through the verbatim path in one pass."""
    out = []
    for event_type, schema_version, at, payload in contents:
        version += 1
        event_id = _event_id_of(run_id, version, event_type, payload)
        row = sealed_row(
            0, event_id, run_id, version, event_type, schema_version, at, payload, parent, actor
        )
        out.append(StoredEvent(*row))
        parent = row[9]
    return out


def _event_id_of(run_id: str, version: int, event_type: str, payload: bytes) -> str:
    """A content-derived id: the same folder imports as the very same events."""
    digest = sha256_hex(payload)
    return str(uuid.uuid5(EVENT_ID_NAMESPACE, f"{run_id}\n{version}\n{event_type}\n{digest}"))


def _time(value: Any, where: str) -> str:
    """An RFC 3339 time as the ledger stores it: UTC with microseconds, ending in Z."""
    if not isinstance(value, str) or not value:
        raise InputError(f"legacy {where} must be an RFC 3339 time")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InputError(f"legacy {where} {value!r} is not an RFC 3339 time") from None
    if parsed.tzinfo is None:
        raise InputError(f"legacy {where} {value!r} has no time zone")
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- the plan ----------------------------------------------------------------------------


def _plan(replay: _Replay, doc: JsonFile, config: Any, at: str, base: Path) -> None:
    """The events `plan` writes, from the same checks. The run decides on the medians, as
    the controller decided it (raw samples in its files are kept, not used to decide)."""
    from ledger.core.stats import MEDIANS_ONLY

    planned = plan_events(doc, config, base, statistics=MEDIANS_ONLY)
    for event in planned.events:
        replay.add(event, at)
    replay.blobs.append(planned.kernel.content)


# --- the rounds --------------------------------------------------------------------------


def _rounds(doc: JsonFile) -> list[dict[str, Any]]:
    shown = display(doc.path)
    if doc.value.get("schema_version") != 1:
        raise InputError(f"legacy {ROUNDS} {shown}: schema_version must be 1")
    rounds = doc.value.get("rounds")
    if not isinstance(rounds, list) or not all(isinstance(r, dict) for r in rounds):
        raise InputError(f"legacy {ROUNDS} {shown}: rounds must be a list of objects")
    return rounds


def _round(
    replay: _Replay,
    doc: JsonFile,
    index: int,
    value: dict[str, Any],
    run_id: str,
    parent_run_id: str | None,
    paths: _Paths,
    base: Path,
) -> None:
    """Replay one legacy round as `record` would, then compare with what was recorded.
    Its candidate and manifest are where the controller stored them (`paths`); relative
    measurement sources resolve against `base`, as the config's paths do."""
    path = doc.path.absolute()
    where = f"{ROUNDS} rounds[{index}]"
    result = validate_model(RoundResult, value, "legacy round", f"{display(path)} rounds[{index}]")
    view = replay.view
    assert view is not None
    label = f"round {result.round}"
    for refusal in admit(view, result.round, result.parent_kernel_sha256):
        replay.problems.append(refusal.problem(where))
    candidate = read_kernel(
        paths.stored(result.candidate.path),
        f"{where}.candidate.path",
        written=result.candidate.path,
    )
    recorded_sha = value["candidate"].get("sha256")
    if recorded_sha is None:
        raise InputError(f"legacy {where}: candidate.sha256 is missing")
    if recorded_sha != candidate.ref.sha256:
        raise InputError(
            f"legacy {where}: candidate {display(candidate.ref.path)} hashes to "
            f"{candidate.ref.sha256}, not the recorded candidate.sha256 {recorded_sha!r}"
        )
    validation, measured = checked_round(
        result,
        path,
        candidate,
        view,
        f"{where}.measurements",
        base=base,
        manifest=paths.stored(result.verification.manifest),
    )
    verification = value["verification"]
    for key, found in (("status", validation.status), ("run_id", validation.manifest_run_id)):
        if key in verification and verification[key] != found:
            replay.problems.append(
                f"{label}: verification.{key} is {verification[key]!r}, but its manifest says "
                f"{found!r}"
            )
    at = _time(value.get("recorded_at"), f"{where}.recorded_at")
    plan = replay.items[0][0]
    assert isinstance(plan, RunPlanned)
    outcome = round_events(
        view=view,  # `record` decides on the run as it was before the round's events
        evidence=replay.evidence,
        plan=plan,
        submitted=submitted_event(
            result, candidate, recorded_file(path, doc.sha256, doc.size), value
        ),
        validation=validation,
        measurements=measured,
        vocabulary=False,  # a folder's rounds import as they always did, byte for byte
        contract=CONTROLLER_CONTRACT,
    )
    _compare_round(replay, label, value, outcome.decided)
    for event in outcome.events:
        replay.add(event, at, evidence_folded=True)
    replay.blobs.append(candidate.content)


def _compare_round(
    replay: _Replay, label: str, value: dict[str, Any], decided: RoundDecided
) -> None:
    recorded = value.get("decision")
    if recorded not in DECISIONS:
        replay.problems.append(f"{label}: recorded decision {recorded!r} is not one of {DECISIONS}")
    elif recorded != decided.decision:
        figures = ""
        if decided.relative_improvement is not None:
            figures = (
                f" (I {decided.relative_improvement:.6g}, R {decided.worst_case_regression:.6g})"
            )
        replay.problems.append(
            f"{label}: recorded {recorded}, but the rules give {decided.decision}{figures}"
        )
    for key, mine in (
        ("relative_improvement_vs_current", decided.relative_improvement),
        ("worst_case_regression", decided.worst_case_regression),
        ("relative_improvement_vs_original", decided.cumulative_improvement),
    ):
        if key not in value:
            replay.problems.append(f"{label}: {key} is missing")
        elif not _same(value[key], mine):
            replay.problems.append(f"{label}: recorded {key} {value[key]!r}, replay gives {mine!r}")


def _same(recorded: Any, mine: float | None) -> bool:
    if mine is None or recorded is None:
        return recorded is None and mine is None
    if isinstance(recorded, bool) or not isinstance(recorded, int | float):
        return False
    return abs(float(recorded) - mine) <= TOLERANCE


# --- state and conclusion ----------------------------------------------------------------


def _compare_state(replay: _Replay, doc: JsonFile, view: RunView, paths: _Paths) -> None:
    state = doc.value
    run = view.run
    kept = [r.round for r in view.rounds if r.decision == "KEEP"]
    expected: dict[str, Any] = {
        "next_round": run.rounds_recorded + 1,
        "current_best_sha256": run.best_kernel_sha256,
        "kept_rounds": kept,
        "consecutive_failures": run.consecutive_failures,
        "target_met": run.target_met,
    }
    for key, mine in expected.items():
        if key not in state:
            replay.problems.append(f"{STATE} has no {key}")
        elif state[key] != mine or isinstance(state[key], bool) != isinstance(mine, bool):
            replay.problems.append(f"{STATE} {key} is {state[key]!r}, replay gives {mine!r}")
    if "current_best_path" not in state or not isinstance(state["current_best_path"], str):
        replay.problems.append(f"{STATE} has no current_best_path")
    elif os.path.realpath(paths.stored(state["current_best_path"])) != os.path.realpath(
        run.best_kernel_path
    ):
        replay.problems.append(
            f"{STATE} current_best_path {state['current_best_path']!r} is not the best kernel "
            f"{run.best_kernel_path!r}"
        )
    for key, column in (
        ("original_baseline", "baseline_median_us"),
        ("current_best_measurements", "best_median_us"),
    ):
        medians = _medians(state.get(key))
        mine = {c.case_id: getattr(c, column) for c in view.cases}
        if medians is None:
            replay.problems.append(f"{STATE} {key} must map each case id to its measurement")
        elif set(medians) != set(mine) or any(not _same(medians[c], mine[c]) for c in mine):
            replay.problems.append(f"{STATE} {key} differs from the replay's medians {mine}")


def _medians(rows: Any) -> dict[str, Any] | None:
    """Case id -> median from the controller's map of measurement rows keyed by case id."""
    if not isinstance(rows, dict):
        return None
    out = {}
    for case_id, row in rows.items():
        if not isinstance(row, dict) or row.get("case_id", case_id) != case_id:
            return None
        out[case_id] = row.get("median_us")
    return out


def _conclusion_points(
    rounds: list[dict[str, Any]], analysis: dict[str, Any] | None, manifest: Any
) -> list[tuple[int | None, str | None]]:
    """After how many rounds `analyze` concluded the run (None: never), most likely first,
    each with the note the import then makes.

    `analysis.json`'s `round_count` says it, unless a later `analyze` rewrote analysis.json
    and then failed on the manifest (the controller writes the files first): then the
    manifest's terminal status stands, after the rounds recorded up to its `updated_at`.
    Times have whole seconds, so a round recorded in the same second as that update may be
    on either side of it; where `round_count` is every round and some of them share the
    update's second, the conclusion may also have come before them."""
    terminal = manifest.status in ("passed", "failed", "inconclusive")
    if analysis is None and not terminal:
        return [(None, None)]
    before = at = len(rounds)
    if terminal:
        until = _time(manifest.updated_at, f"{MANIFEST} updated_at")
        times = [
            _time(r.get("recorded_at"), f"{ROUNDS} rounds[{i}].recorded_at")
            for i, r in enumerate(rounds)
        ]
        before = sum(1 for t in times if t < until)
        at = sum(1 for t in times if t <= until)
    if analysis is None:
        note = (
            f"{MANIFEST} is {manifest.status} but the folder has no {ANALYSIS}; the "
            f"conclusion is the manifest's"
        )
        return [(point, note) for point in range(before, at + 1)]
    count = analysis.get("round_count")
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= len(rounds):
        raise InputError(
            f"legacy {ANALYSIS} round_count must be a number of rounds from 0 to {len(rounds)}"
        )
    if count < len(rounds) or not terminal:
        return [(count, None)]
    rewritten = (
        f"{ANALYSIS} was rewritten by an analyze after round {count} that the controller "
        f"refused ({MANIFEST} stayed {manifest.status} from an earlier analyze); the run "
        f"concluded at that earlier analyze and was reopened"
    )
    earlier = [(point, rewritten) for point in range(before, at + 1) if point != count]
    return [(count, None), *earlier] if at >= count else earlier


REOPEN_REASON = "the JSON-file controller recorded this round after analyze (legacy import)"


def _reopen(replay: _Replay, value: dict[str, Any], index: int, conclusion: str) -> None:
    """The run concluded, and the controller took another round: reopen it first."""
    at = _time(value.get("recorded_at"), f"{ROUNDS} rounds[{index}].recorded_at")
    replay.add(RunReopened(conclusion=conclusion, round=index + 1, reason=REOPEN_REASON), at)


def _conclude(
    replay: _Replay, analysis: dict[str, Any] | None, manifest_status: str, updated_at: str
) -> str:
    """The run concluded: append RunConcluded and compare it with analysis.json (when that
    was written at this point) and the manifest's status."""
    view = replay.view
    assert view is not None
    event = conclusion_event(view, CONTROLLER_CONTRACT)
    if analysis is not None and analysis.get("round_count") == view.run.rounds_recorded:
        _compare_analysis(replay, analysis, event)
    if (
        manifest_status in ("passed", "failed", "inconclusive")
        and manifest_status != event.conclusion
    ):
        replay.problems.append(
            f"{MANIFEST} status is {manifest_status!r}, but the run concludes {event.conclusion!r}"
        )
    replay.add(event, _time(updated_at, f"{MANIFEST} updated_at"))
    return event.conclusion


def _compare_analysis(replay: _Replay, analysis: dict[str, Any], event: Any) -> None:
    """analysis.json against the conclusion the replay gives at the same point."""
    expected: dict[str, Any] = {
        "status": event.conclusion,
        "target_met": event.target_met,
        "kept_rounds": event.kept_rounds,
        "round_count": event.round_count,
        "needs_diagnosis": event.needs_diagnosis,
    }
    for key, mine in expected.items():
        if key in analysis and analysis[key] != mine:
            replay.problems.append(f"{ANALYSIS} {key} is {analysis[key]!r}, replay gives {mine!r}")
    if "status" not in analysis:
        replay.problems.append(f"{ANALYSIS} has no status")
    best = analysis.get("best_kernel")
    if isinstance(best, dict) and best.get("sha256") != event.best_kernel.sha256:
        replay.problems.append(
            f"{ANALYSIS} best_kernel.sha256 is {best.get('sha256')!r}, replay gives "
            f"{event.best_kernel.sha256!r}"
        )
    key = "relative_improvement_vs_original"
    if key in analysis and not _same(analysis[key], event.cumulative_improvement):
        replay.problems.append(
            f"{ANALYSIS} {key} is {analysis[key]!r}, replay gives {event.cumulative_improvement!r}"
        )
