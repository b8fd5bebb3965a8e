"""plan, record, analyze: the commands that write the ledger."""

from __future__ import annotations

from pathlib import Path

import typer

from cli.common import JSON, checked_run_id, input_path, open_service
from cli.output import emit_json, pct, say


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
    app.command("record")(record)
    app.command("analyze")(analyze)


def plan(
    ctx: typer.Context,
    config: str = typer.Option(..., "--config", metavar="FILE", help="Run configuration JSON."),
    as_json: bool = JSON,
) -> None:
    """Validate a run configuration and lock the run (baseline, cases, objective).

    Example: kernel-ledger plan --config examples/softmax-demo/config.json
    """
    result = open_service(ctx, create=True).plan(input_path(config, "--config"))
    if as_json:
        emit_json(
            {
                "status": "planned",
                "run_id": result.run_id,
                "kernel_sha256": result.kernel_sha256,
                "case_count": result.case_count,
                **_not_found(result.samples_not_found),
            }
        )
    else:
        say(
            f"planned run {result.run_id}: {result.case_count} cases, kernel "
            f"{result.kernel_sha256[:12]}"
        )
        _say_not_found("baseline", result.samples_not_found)


def _not_found(cases: tuple[str, ...]) -> dict[str, list[str]]:
    """The JSON key naming cases whose samples file was named but not found, when any were."""
    return {"samples_not_found": list(cases)} if cases else {}


def _say_not_found(what: str, cases: tuple[str, ...]) -> None:
    if cases:
        say(
            f"  note: the {what} names samples files that do not exist (cases "
            f"{', '.join(cases)}); the decision uses the medians"
        )


def record(
    ctx: typer.Context,
    run: str = typer.Option(
        ..., "--run", metavar="ID", callback=checked_run_id, help="The run to record into."
    ),
    result: str = typer.Option(..., "--result", metavar="FILE", help="Round result JSON."),
    as_json: bool = JSON,
) -> None:
    """Record one round and print the controller's decision.

    Example: kernel-ledger record --run softmax-demo-001 --result rounds/round-1.json
    """
    r = open_service(ctx).record(run, input_path(result, "--result"))
    if as_json:
        emit_json(
            {
                "status": "recorded",
                "run_id": r.run_id,
                "round": r.round,
                "decision": r.decision,
                "relative_improvement": r.relative_improvement,
                "worst_case_regression": r.worst_case_regression,
                "cumulative_improvement": r.cumulative_improvement,
                "target_met": r.target_met,
                "needs_diagnosis": r.needs_diagnosis,
                "remaining_rounds": r.remaining_rounds,
                "best_kernel_sha256": r.best_kernel_sha256,
                **({"flags": list(r.flags)} if r.flags else {}),
                **_not_found(r.samples_not_found),
            }
        )
    else:
        say(
            f"round {r.round}: {r.decision}  I {pct(r.relative_improvement)}  "
            f"R {pct(r.worst_case_regression)}  cumulative {pct(r.cumulative_improvement)}  "
            f"target {'met' if r.target_met else 'not met'}  "
            f"{r.remaining_rounds} rounds left" + ("  NEEDS DIAGNOSIS" if r.needs_diagnosis else "")
        )
        _say_not_found(f"round {r.round}", r.samples_not_found)


def analyze(
    ctx: typer.Context,
    run: str = typer.Option(
        ..., "--run", metavar="ID", callback=checked_run_id, help="The run to conclude."
    ),
    output_dir: str = typer.Option(
        None,
        "--output-dir",
        metavar="DIR",
        help="Where to write analysis.json, report.md and manifest.json "
        "(default: .vaws-local/ascend-triton/optimization/<run>).",
    ),
    force: bool = typer.Option(
        False, "--force", help="Overwrite output files that hold other content."
    ),
    as_json: bool = JSON,
) -> None:
    """Conclude the run (once) and write analysis.json, report.md and manifest.json.

    Example: kernel-ledger analyze --run softmax-demo-001 --output-dir out/softmax
    """
    from ledger.service import analyze as run_analyze

    folder = (
        Path(output_dir) if output_dir else Path(".vaws-local/ascend-triton/optimization") / run
    )
    r = run_analyze(open_service(ctx), run, folder, force=force)
    if as_json:
        emit_json(
            {
                "status": r.status,
                "run_id": r.run_id,
                "target_met": r.target_met,
                "best_kernel_sha256": r.best_kernel_sha256,
                "analysis": str(r.analysis_path),
            }
        )
    else:
        say(
            f"run {r.run_id} concluded {r.status}; best kernel {r.best_kernel_sha256[:12]}; "
            f"wrote {r.output_dir}/analysis.json, report.md, manifest.json"
        )
