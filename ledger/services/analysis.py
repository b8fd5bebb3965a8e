"""`analyze`: conclude the run (once) and write analysis.json, report.md and a Run Manifest
v1 (run type performance) to the output folder. The documents are pure renderings of the
run's projection and plan (`analysis_document`, `report_markdown`, `performance_manifest`);
`analyze` checks the output paths, stages the files, appends RunConcluded and puts the
files in place."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.core.events import RunPlanned
from ledger.core.projections import RunView, as_dict, resubmission, resubmissions
from ledger.errors import InputError, LedgerError
from ledger.files import (
    StagedOutput,
    check_output,
    check_output_folder,
    same_bytes,
    write_failure,
)
from ledger.inputs.models import manifest_run_id
from ledger.integrity.hashing import sha256_hex
from ledger.services.service import LedgerService
from ledger.text import display, md_line, pct

ANALYSIS_SCHEMA_VERSION = 1
OUTPUT_NAMES = ("analysis.json", "report.md", "manifest.json")


@dataclass(frozen=True)
class AnalyzeResult:
    run_id: str
    status: str
    target_met: bool
    best_kernel_sha256: str
    output_dir: Path
    analysis_path: Path


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
    output_dir = Path(os.path.abspath(output_dir))  # a/../b/../out makes no a/ or b/
    view = service.full_view(run_id)  # unknown runs are refused before anything is written
    plan = service.planned_event(run_id)
    explanations = service.explanations(run_id)
    command = ["kernel-ledger", "analyze", "--run", run_id, "--output-dir", str(output_dir)]
    protected = service.store.ledger_files()
    check_output_folder(
        output_dir,
        what="--output-dir",
        protected=protected,
        names="analysis.json, report.md and manifest.json",
    )
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _output_error(output_dir, concluded=view.concluded)(exc) from None
    targets = {
        name: check_output(output_dir / name, what="output file", force=force, protected=protected)
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
            if name not in final or not same_bytes(targets[name], final[name]):
                raise InputError(
                    f"{display(output_dir / name)} exists with other content; pass --force "
                    "to overwrite it; nothing was appended"
                )
        replace = True  # the same bytes again
    staged: dict[str, StagedOutput] = {}
    try:
        preview = service.conclusion_preview(view)
        on_error = _output_error(output_dir, concluded=view.concluded)
        for name, data in _output_files(preview, plan, "0" * 64, command, explanations).items():
            # some slack for a round recorded meanwhile
            padded = data + b" " * max(4096, len(data) // 4)
            staged[name] = StagedOutput(targets[name], padded, force=replace, on_error=on_error)
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


def _output_files(
    view: RunView,
    plan: RunPlanned,
    last_event_hash: str,
    command: list[str],
    explanations: dict[int, Any] | None = None,
) -> dict[str, bytes]:
    """analysis.json, report.md and manifest.json of a concluded run, as bytes."""
    document = analysis_document(view, plan, last_event_hash=last_event_hash)
    out = {
        "analysis.json": dumps(document),
        "report.md": report_markdown(document, explanations).encode(),
    }
    out["manifest.json"] = dumps(performance_manifest(view, plan, files=out, command=command))
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
        error = write_failure(message, exc)
        return type(error)(f"{error.message}; {after}")

    return failure


# --- the documents -------------------------------------------------------------------------


def analysis_document(view: RunView, plan: RunPlanned, *, last_event_hash: str) -> dict[str, Any]:
    run = view.run
    return {
        "schema_version": ANALYSIS_SCHEMA_VERSION,
        "run_id": run.run_id,
        "status": run.conclusion,
        "op_name": run.op_name,
        "target": plan.target,
        "best_kernel": {
            "path": run.best_kernel_path,
            "sha256": run.best_kernel_sha256,
            "round": run.best_round,
        },
        "original_kernel_sha256": run.original_kernel_sha256,
        "relative_improvement_vs_original": run.cumulative_improvement,
        "target_relative_improvement": run.target_relative_improvement,
        "target_met": run.target_met,
        "kept_rounds": [r.round for r in view.rounds if r.decision == "KEEP"],
        "round_count": run.rounds_recorded,
        "needs_diagnosis": run.needs_diagnosis,
        "cases": [_row(c, "run_id", "position") for c in view.cases],
        "rounds": [_row(r, "run_id", "op_name", "soc") for r in view.rounds],
        "ledger": {"events": run.stream_version, "last_event_hash": last_event_hash},
    }


def _row(row: Any, *left_out: str) -> dict[str, Any]:
    """A projection row as analysis.json gives it: its columns, but what the run says."""
    return {key: value for key, value in as_dict(row).items() if key not in left_out}


def report_markdown(analysis: dict[str, Any], explanations: dict[int, Any] | None = None) -> str:
    """report.md; `explanations` (round -> `explain.Explanation`) adds why each round got
    its decision, and what the flags it carries mean."""
    best = analysis["best_kernel"]
    again = resubmissions(
        (r["round"], r["candidate_sha256"], r["decision"]) for r in analysis["rounds"]
    )
    lines = [
        f"# {analysis['op_name']}: run {analysis['run_id']}",
        "",
        f"- Conclusion: **{analysis['status']}**",
        f"- Improvement vs original: **{pct(analysis['relative_improvement_vs_original'])}** "
        f"(target {pct(analysis['target_relative_improvement'])}, "
        f"{'met' if analysis['target_met'] else 'not met'})",
        f"- Best kernel: `{best['sha256']}` from round {best['round']} ({best['path']})",
        *(
            [f"- Resubmitted: {_resubmitted(again, best['round'], 'KEEP', best=True)}."]
            if best["round"] in again
            else []
        ),
        f"- Rounds: {analysis['round_count']}, kept: {analysis['kept_rounds'] or 'none'}",
        f"- Needs diagnosis: {'yes' if analysis['needs_diagnosis'] else 'no'}",
        "",
        "## Cases",
        "",
        "| case | weight | baseline µs | best µs | change |",
        "|---|---:|---:|---:|---:|",
    ]
    for case in analysis["cases"]:
        base, best_us = case["baseline_median_us"], case["best_median_us"]
        change = (base - best_us) / base if base else None
        lines.append(
            f"| {case['case_id']} | {case['weight']:g} | {base:.3f} | {best_us:.3f} | "
            f"{pct(change)} |"
        )
    lines += [
        "",
        "## Rounds",
        "",
        "| round | decision | I | R | cumulative | change | hypothesis |",
        "|---:|---|---:|---:|---:|---|---|",
    ]
    for r in analysis["rounds"]:
        lines.append(
            f"| {r['round']} | {r['decision']} | {pct(r['relative_improvement'])} | "
            f"{pct(r['worst_case_regression'])} | {pct(r['cumulative_improvement'])} | "
            f"{md_line(r['change'])} | {md_line(r['hypothesis'])} |"
        )
    if explanations:
        lines += ["", "## Why each round got its decision", ""]
        flags: list[str] = []
        for number in sorted(explanations):
            why = explanations[number]
            said = why.text
            if number in again:
                said += f" Resubmitted: {_resubmitted(again, number, why.decision)}."
            lines.append(f"- Round {number}: {said}")
            flags += [f for f in why.flags if f not in flags]
        if flags:
            from ledger.core.explain import describe_flag

            lines += ["", "Flags:", ""]
            lines += [f"- `{f}`: {describe_flag(f)}" for f in flags]
    lines += [
        "",
        f"Ledger: {analysis['ledger']['events']} events, last hash "
        f"`{analysis['ledger']['last_event_hash']}`.",
        "",
    ]
    return "\n".join(lines)


def _resubmitted(again: dict[int, Any], number: int, decision: str, *, best: bool = False) -> str:
    """report.md's words for a round whose candidate was submitted before
    (`projections.resubmission`)."""
    subject = f"the best kernel (round {number})" if best else f"the candidate of round {number}"
    return resubmission(subject, decision, again[number])["sentence"]


def performance_manifest(
    view: RunView,
    plan: RunPlanned,
    *,
    files: dict[str, bytes],
    command: list[str],
) -> dict[str, Any]:
    run = view.run
    config = plan.config_document
    artifacts = [
        {"name": name, "kind": kind, "uri": name, "sha256": sha256_hex(data)}
        for name, kind, data in (
            (n, "analysis" if n.endswith(".json") else "report", d) for n, d in files.items()
        )
    ]
    artifacts.append(
        {
            "name": "best-kernel",
            "kind": "kernel",
            "uri": run.best_kernel_path,
            "sha256": run.best_kernel_sha256,
        }
    )
    return {
        "schema_version": 1,
        "run_id": manifest_run_id(run.run_id),
        "parent_run_id": manifest_run_id(run.parent_run_id) if run.parent_run_id else None,
        "run_type": "performance",
        "workspace_snapshot": _object(config.get("workspace_snapshot")),
        "environment": {**_object(config.get("environment")), "target": plan.target},
        "model": {"op_name": run.op_name},
        "topology": {},
        "command": command,
        "environment_variables": {},
        "artifacts": artifacts,
        "status": run.conclusion,
        "created_at": _rfc3339(run.planned_at),
        "updated_at": _rfc3339(run.concluded_at or run.updated_at),
    }


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _rfc3339(stamp: str) -> str:
    return stamp if stamp.endswith("Z") else stamp + "Z"


def dumps(document: dict[str, Any]) -> bytes:
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()
