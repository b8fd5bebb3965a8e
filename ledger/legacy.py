"""Import of a run folder written by the existing JSON-file controller.

The folder holds:

    optimization-config.json   the run configuration (SPEC 2.1)
    state.json                 next_round, current_best_sha256, current_best_path,
                               original_baseline, current_best_measurements, kept_rounds,
                               consecutive_failures, target_met
    rounds.json                {"schema_version": 1, "rounds": [...]}: each round result
                               (SPEC 2.2) plus candidate.sha256, verification {manifest,
                               run_id, status}, decision, relative_improvement_vs_current,
                               worst_case_regression, relative_improvement_vs_original,
                               recorded_at
    manifest.json              the run's Run Manifest v1
    analysis.json              (optional) written when the run was concluded

The run is replayed as the events `plan` and `record` would have written, with the same
input checks and the same round path (`round.admit`, `round.round_events`). Every
recorded decision, figure and state field is compared with the replay; any disagreement,
or a round whose parent was not the best kernel of its time, refuses the whole import with
a report of every disagreement, and nothing is written.

Paths inside the files resolve relative to the file that names them (so relative to the
folder for its top-level files) unless absolute. Every kernel and manifest they name must
exist; each candidate must hash to its recorded `candidate.sha256`.

Events keep the folder's times: planning at the manifest's `created_at`, each round at its
`recorded_at`, the conclusion at the manifest's `updated_at`. Event ids derive from the
content, so importing the same folder again writes nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ledger import projections
from ledger.analysis import manifest_run_id
from ledger.controller import conclusion_event
from ledger.errors import InputError
from ledger.events import Event, RoundDecided, RunPlanned
from ledger.evidence import RunEvidence
from ledger.hashing import sha256_hex
from ledger.inputs import RoundResult, load_config, load_manifest, resolve, validate_model
from ledger.jsonio import JsonFile, display, read_json
from ledger.projections import RunView
from ledger.round import admit, round_events
from ledger.service import (
    checked_round,
    plan_events,
    read_kernel,
    recorded_file,
    submitted_event,
)
from ledger.store import audit_store
from ledger.store.eventstore import Store

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
            f"{len(problems)} disagreement(s) with a replay: {listed}; nothing was written"
        )


@dataclass
class LegacyResult:
    run_id: str
    status: str  # "imported" or "unchanged"
    rounds: int
    events: int
    decisions: list[str]
    concluded: bool
    conclusion: str | None
    best_kernel_sha256: str
    legacy_files: dict[str, str] = field(default_factory=dict)  # name -> sha256


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


def import_legacy(store: Store, folder: Path) -> LegacyResult:
    """Replay the folder; append its events in one transaction if everything agrees."""
    folder = Path(folder).absolute()
    if not folder.is_dir():
        raise InputError(f"--legacy {display(folder)} is not a folder")
    files = {
        name: read_json(folder / name, f"legacy {name}")
        for name in (CONFIG, STATE, ROUNDS, MANIFEST)
    }
    if (folder / ANALYSIS).exists():
        files[ANALYSIS] = read_json(folder / ANALYSIS, f"legacy {ANALYSIS}")
    config_doc, config = load_config(folder / CONFIG)
    _, manifest = load_manifest(folder / MANIFEST)
    run_id = config.run_id
    planned_at = _time(manifest.created_at, f"{MANIFEST} created_at")
    replay = _Replay()
    _plan(replay, config_doc, config, planned_at)
    rounds = _rounds(files[ROUNDS])
    for index, value in enumerate(rounds):
        _round(replay, files[ROUNDS], index, value, run_id, config.parent_run_id)
    view = replay.view
    assert view is not None
    _compare_state(replay, files[STATE], view)
    if manifest.run_id not in (run_id, manifest_run_id(run_id)):
        replay.problems.append(
            f"{MANIFEST} is the manifest of run {manifest.run_id!r}, not of {run_id!r}"
        )
    conclusion = None
    if ANALYSIS in files:
        conclusion = _conclude(replay, files[ANALYSIS].value, manifest.status, manifest.updated_at)
    if replay.problems:
        raise LegacyRejected(run_id, folder, replay.problems)
    items = [(_event_id(run_id, v, e), e, at) for v, (e, at) in enumerate(replay.items, start=1)]
    with store.transaction(write=True) as conn:
        written = audit_store.append_at(store, conn, run_id, items, replay.blobs)
    view = replay.view
    assert view is not None
    return LegacyResult(
        run_id=run_id,
        status="imported" if written else "unchanged",
        rounds=view.run.rounds_recorded,
        events=len(items),
        decisions=[r.decision for r in view.rounds],
        concluded=conclusion is not None,
        conclusion=conclusion,
        best_kernel_sha256=view.run.best_kernel_sha256,
        legacy_files={name: doc.sha256 for name, doc in sorted(files.items())},
    )


def _event_id(run_id: str, version: int, event: Event) -> str:
    """A content-derived id: the same folder imports as the very same events."""
    digest = sha256_hex(event.canonical_payload())
    return str(uuid.uuid5(EVENT_ID_NAMESPACE, f"{run_id}\n{version}\n{event.event_type}\n{digest}"))


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


def _plan(replay: _Replay, doc: JsonFile, config: Any, at: str) -> None:
    """The events `plan` writes, from the same checks."""
    planned = plan_events(doc, config)
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
) -> None:
    """Replay one legacy round as `record` would, then compare with what was recorded."""
    path = doc.path.absolute()
    where = f"{ROUNDS} rounds[{index}]"
    result = validate_model(RoundResult, value, "legacy round", f"{display(path)} rounds[{index}]")
    view = replay.view
    assert view is not None
    label = f"round {result.round}"
    for refusal in admit(view, result.round, result.parent_kernel_sha256):
        replay.problems.append(refusal.problem(where))
    candidate = read_kernel(resolve(path, result.candidate.path), f"{where}.candidate.path")
    recorded_sha = value["candidate"].get("sha256")
    if recorded_sha is None:
        raise InputError(f"legacy {where}: candidate.sha256 is missing")
    if recorded_sha != candidate.ref.sha256:
        raise InputError(
            f"legacy {where}: candidate {display(candidate.ref.path)} hashes to "
            f"{candidate.ref.sha256}, not the recorded candidate.sha256 {recorded_sha!r}"
        )
    validation, measured = checked_round(result, path, candidate, view, f"{where}.measurements")
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


def _compare_state(replay: _Replay, doc: JsonFile, view: RunView) -> None:
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
    elif str(resolve(doc.path.absolute(), state["current_best_path"])) != run.best_kernel_path:
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
            replay.problems.append(f"{STATE} {key} must be a list of {{case_id, median_us}}")
        elif set(medians) != set(mine) or any(not _same(medians[c], mine[c]) for c in mine):
            replay.problems.append(f"{STATE} {key} differs from the replay's medians {mine}")


def _medians(rows: Any) -> dict[str, Any] | None:
    if not isinstance(rows, list):
        return None
    out = {}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("case_id"), str):
            return None
        out[row["case_id"]] = row.get("median_us")
    return out


def _conclude(
    replay: _Replay, analysis: dict[str, Any], manifest_status: str, updated_at: str
) -> str:
    """The run concluded: append RunConcluded and compare it with analysis.json."""
    view = replay.view
    assert view is not None
    event = conclusion_event(view)
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
    if (
        manifest_status in ("passed", "failed", "inconclusive")
        and manifest_status != event.conclusion
    ):
        replay.problems.append(
            f"{MANIFEST} status is {manifest_status!r}, but the run concludes {event.conclusion!r}"
        )
    replay.add(event, _time(updated_at, f"{MANIFEST} updated_at"))
    return event.conclusion
