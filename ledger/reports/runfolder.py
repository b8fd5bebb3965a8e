"""The run folder of the JSON-file controller, rendered from a run's events.

The controller keeps a run in a folder: `optimization-config.json` (the configuration as
given), `state.json` (next round, best kernel, baseline and best measurements keyed by case,
kept rounds, failure count, target), `rounds.json` (each round result as submitted, with the
candidate's and the verification's absolute paths, the decision and its figures),
`analysis.json` and `report.md` (after `analyze`) and `manifest.json` (a Run Manifest v1 of
run type performance, moved planned -> running -> terminal). Agents and tools read these
files; `cli/triton_optimization.py` writes them from the ledger so that they read exactly as
the controller's.

Everything here is pure: events in, documents out. The state comes from the events (a
decision is never re-derived here); the files are written by the caller.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ledger.core.events import (
    Event,
    FileRef,
    MeasurementsRecorded,
    RoundDecided,
    RoundSubmitted,
    RunPlanned,
    ValidationLinked,
)
from ledger.core.projections import RunRow
from ledger.errors import InputError
from ledger.inputs.models import RunManifest, validate_model

SCHEMA_VERSION = 1
CONFIG = "optimization-config.json"
STATE = "state.json"
ROUNDS = "rounds.json"
ANALYSIS = "analysis.json"
REPORT = "report.md"
MANIFEST = "manifest.json"
ROUND_ARTIFACTS = "round-artifacts"

MANIFEST_MOVES = {
    "planned": ("running", "cancelled"),
    "running": ("passed", "failed", "inconclusive", "cancelled"),
}
"""Run Manifest v1 status transitions; the terminal statuses move nowhere."""


class ManifestError(InputError):
    """The run folder's manifest.json is unreadable, not a Run Manifest v1, or cannot take
    the change a step makes to it."""


def dumps(value: Any) -> str:
    """A folder file's text: sorted keys, two-space indent, UTF-8 as is, one newline."""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def file_path(ref: FileRef) -> str:
    """The absolute path the controller writes for a file it was given: symlinks followed."""
    return ref.resolved_path or ref.path


@dataclass
class Folder:
    """What a run's events say its folder holds."""

    config: dict[str, Any]
    state: dict[str, Any]
    rounds: list[dict[str, Any]] = field(default_factory=list)


def _measurement_map(rows: list[Any], medians: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Measurement rows keyed by case as the controller keeps them: each row as given, with
    its median as a float (the one the ledger recorded)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        case_id = row["case_id"]
        out[case_id] = {**row, "median_us": medians[case_id]}
    return out


def _medians(event: MeasurementsRecorded) -> dict[str, float]:
    return {m.case_id: m.median_us for m in event.measurements}


def planned_folder(events: Iterable[Event]) -> Folder:
    """The folder `plan` writes, from the events that planned the run."""
    found: Folder | None = None
    for event in events:
        if isinstance(event, RunPlanned):
            found = Folder(config=event.config_document, state={})
            found.state = {
                "schema_version": SCHEMA_VERSION,
                "next_round": 1,
                "current_best_sha256": event.kernel.sha256,
                "current_best_path": file_path(event.kernel),
                "original_baseline": {},
                "current_best_measurements": {},
                "kept_rounds": [],
                "consecutive_failures": 0,
                "target_met": False,
            }
        elif isinstance(event, MeasurementsRecorded) and event.role == "baseline":
            assert found is not None
            baseline = _measurement_map(found.config["baseline"], _medians(event))
            found.state["original_baseline"] = baseline
            found.state["current_best_measurements"] = baseline
    if found is None:
        raise InputError("the events do not plan a run")
    return found


def with_round(found: Folder, at: str, events: Iterable[Event]) -> Folder:
    """The folder after `record` took the round these events (one append) recorded."""
    submitted: RoundSubmitted | None = None
    validation: ValidationLinked | None = None
    measured: MeasurementsRecorded | None = None
    for event in events:
        if isinstance(event, RoundSubmitted):
            submitted = event
        elif isinstance(event, ValidationLinked):
            validation = event
        elif isinstance(event, MeasurementsRecorded):
            measured = event
        elif isinstance(event, RoundDecided):
            assert submitted is not None and validation is not None
            return _decided(found, at, event, submitted, validation, measured)
    raise InputError("the events record no round")


def _decided(
    found: Folder,
    at: str,
    event: RoundDecided,
    submitted: RoundSubmitted,
    validation: ValidationLinked,
    measured: MeasurementsRecorded | None,
) -> Folder:
    document = submitted.result_document
    rows: dict[str, dict[str, Any]] = {}
    if measured is not None:
        rows = _measurement_map(document["measurements"], _medians(measured))
    candidate_path = file_path(submitted.candidate)
    new_round = {
        **document,
        "candidate": {"path": candidate_path, "sha256": submitted.candidate.sha256},
        "verification": {
            "manifest": file_path(validation.manifest),
            "run_id": validation.manifest_run_id,
            "status": validation.status,
        },
        "measurements": list(rows.values()),
        "decision": event.decision,
        "relative_improvement_vs_current": event.relative_improvement,
        "worst_case_regression": event.worst_case_regression,
        "relative_improvement_vs_original": event.cumulative_improvement,
        "recorded_at": at,
    }
    state = copy.deepcopy(found.state)
    if event.decision == "KEEP":
        state["current_best_sha256"] = submitted.candidate.sha256
        state["current_best_path"] = candidate_path
        state["current_best_measurements"] = rows
        state["kept_rounds"].append(event.round)
    state["consecutive_failures"] = event.consecutive_failures
    state["target_met"] = event.target_met
    state["next_round"] += 1
    return Folder(config=found.config, state=state, rounds=[*found.rounds, new_round])


def rounds_document(found: Folder) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "rounds": found.rounds}


def analysis_document(found: Folder, run: RunRow) -> dict[str, Any]:
    """analysis.json for a run that concludes (or concluded) as `run` says."""
    state = found.state
    return {
        "schema_version": SCHEMA_VERSION,
        "status": run.conclusion,
        "op_name": found.config["op_name"],
        "best_kernel": {
            "path": state["current_best_path"],
            "sha256": state["current_best_sha256"],
        },
        "relative_improvement_vs_original": run.cumulative_improvement,
        "target_relative_improvement": found.config["objective"]["target_relative_improvement"],
        "target_met": run.target_met,
        "kept_rounds": state["kept_rounds"],
        "round_count": len(found.rounds),
        "needs_diagnosis": run.needs_diagnosis,
        "rounds": found.rounds,
    }


def report_text(analysis: dict[str, Any]) -> str:
    """report.md: the controller's short summary of the analysis."""
    kept = ", ".join(str(n) for n in analysis["kept_rounds"]) or "none"
    target = float(analysis["target_relative_improvement"])
    return (
        "# Ascend Triton optimization report\n\n"
        f"- Status: **{analysis['status']}**\n"
        f"- Operator: `{analysis['op_name']}`\n"
        f"- Best kernel: `{analysis['best_kernel']['path']}`\n"
        f"- Improvement vs original: {analysis['relative_improvement_vs_original']:.4%}\n"
        f"- Target: {target:.4%}\n"
        f"- Kept rounds: {kept}\n"
        f"- Diagnosis required: {analysis['needs_diagnosis']}\n"
    )


# --- manifest.json ----------------------------------------------------------------------


def _object(config: dict[str, Any], key: str, default: Any) -> Any:
    return config.get(key) or default


def start_manifest(plan: RunPlanned, validation: ValidationLinked, at: str) -> dict[str, Any]:
    """The run's manifest.json as `plan` writes it: status planned, the starting kernel and
    validation, and the folder's own files as artifacts. Refused (ManifestError) when the
    configuration's values do not make a Run Manifest v1 (a run id outside its pattern)."""
    config = plan.config_document
    manifest: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run_id": config["run_id"],
        "parent_run_id": config.get("parent_run_id"),
        "run_type": "performance",
        "workspace_snapshot": _object(config, "workspace_snapshot", {}),
        "environment": _object(config, "environment", {}),
        "model": {},
        "topology": {"target": config["target"]},
        "command": _object(config, "command", []),
        "environment_variables": {},
        "artifacts": [],
        "status": "planned",
        "created_at": at,
        "updated_at": at,
    }
    check_manifest(manifest)
    for name, kind, uri, digest in (
        ("starting-kernel", "triton-kernel", file_path(plan.kernel), plan.kernel.sha256),
        ("starting-validation", "run-manifest", file_path(validation.manifest), None),
        ("optimization-config", "optimization-config", CONFIG, None),
        ("optimization-state", "state", STATE, None),
        ("rounds", "optimization-rounds", ROUNDS, None),
    ):
        manifest = add_artifact(manifest, name, kind, uri, digest, at)
    return manifest


def check_manifest(manifest: Any, shown: str = MANIFEST) -> None:
    """Refuse what is not a Run Manifest v1."""
    try:
        validate_model(RunManifest, manifest, "run manifest", shown)
    except InputError as exc:
        raise ManifestError(str(exc)) from None


def add_artifact(
    manifest: dict[str, Any], name: str, kind: str, uri: str, sha256: str | None, at: str
) -> dict[str, Any]:
    if any(a.get("name") == name for a in manifest["artifacts"]):
        raise ManifestError(f"{MANIFEST} already has an artifact named {name!r}")
    artifact = {"name": name, "kind": kind, "uri": uri}
    if sha256 is not None:
        artifact["sha256"] = sha256
    return {**manifest, "artifacts": [*manifest["artifacts"], artifact], "updated_at": at}


def move(manifest: dict[str, Any], status: str, at: str) -> dict[str, Any]:
    """The manifest with its status moved, as Run Manifest v1 allows."""
    current = manifest["status"]
    if status not in MANIFEST_MOVES.get(current, ()):
        raise ManifestError(f"{MANIFEST} cannot move from status {current} to {status}")
    return {**manifest, "status": status, "updated_at": at}


def concluded_manifest(manifest: dict[str, Any], status: str, at: str) -> dict[str, Any]:
    """The manifest as `analyze` leaves it: running if it was planned, the analysis and the
    report added, then the run's terminal status."""
    if manifest["status"] == "planned":
        manifest = move(manifest, "running", at)
    manifest = add_artifact(manifest, "analysis", "analysis", ANALYSIS, None, at)
    manifest = add_artifact(manifest, "report", "report", REPORT, None, at)
    return move(manifest, status, at)
