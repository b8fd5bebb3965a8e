"""plan, record, analyze: the commands that write the ledger."""

from __future__ import annotations

import typer

from cli.common import JSON, run_use_case
from cli.output import diagnose_hint, emit_json, pct, plural, say


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
    app.command("record")(record)
    app.command("analyze")(analyze)


def plan(
    ctx: typer.Context,
    config: str = typer.Option(..., "--config", metavar="FILE", help="Run configuration JSON."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Only check the configuration; write nothing."
    ),
    as_json: bool = JSON,
) -> None:
    """Validate a run configuration and lock the run (baseline, cases, objective).

    A key the contract does not know is kept, with a warning when it looks like a typo of
    one it does; so is an objective value that reads like a percentage.

    Example:

    \b
        kernel-ledger plan --config examples/softmax-demo/config.json --dry-run
    """
    out = run_use_case(ctx, "plan")
    if as_json:
        emit_json(out.document)
        return
    result = out.value
    what = "checked (nothing written)" if dry_run else "planned"
    say(
        f"{what} run {result.run_id}: {plural(result.case_count, 'case')}, "
        f"kernel {result.kernel_sha256[:12]}"
    )
    for warning in result.warnings:
        say(f"warning: {warning}")
    _say_not_found("baseline", result.samples_not_found)
    _say_not_samples("baseline", result.sources_not_samples)


def _say_not_found(what: str, cases: tuple[str, ...]) -> None:
    if cases:
        say(
            f"  note: the {what} names samples files that do not exist (cases "
            f"{', '.join(cases)}); the decision uses the medians"
        )


def _say_not_samples(what: str, cases: tuple[str, ...]) -> None:
    if cases:
        say(
            f"  note: the {what} names source files that hold no samples (cases "
            f"{', '.join(cases)}); their digests are recorded and the decision uses the "
            "medians"
        )


def record(
    ctx: typer.Context,
    run: str = typer.Option(..., "--run", metavar="ID", help="The run to record into."),
    result: str = typer.Option(..., "--result", metavar="FILE", help="Round result JSON."),
    as_json: bool = JSON,
) -> None:
    """Record one round and print the controller's decision.

    Example:

    \b
        kernel-ledger record --run softmax-demo-001 \\
          --result examples/softmax-demo/rounds/round-1.json
    """
    out = run_use_case(ctx, "record")
    if as_json:
        emit_json(out.document)
        return
    r = out.value
    if r.already_recorded:
        say(f"round {r.round} is already recorded from this file; nothing was written")
    say(
        f"round {r.round}: {r.decision}  I {pct(r.relative_improvement)}  "
        f"R {pct(r.worst_case_regression)}  cumulative {pct(r.cumulative_improvement)}  "
        f"target {'met' if r.target_met else 'not met'}  "
        f"{plural(r.remaining_rounds, 'round')} left"
    )
    if r.needs_diagnosis:
        say(diagnose_hint(r.run_id))
    _say_not_found(f"round {r.round}", r.samples_not_found)
    _say_not_samples(f"round {r.round}", r.sources_not_samples)


def analyze(
    ctx: typer.Context,
    run: str = typer.Option(..., "--run", metavar="ID", help="The run to conclude."),
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

    Example:

    \b
        kernel-ledger analyze --run softmax-demo-001 --output-dir out/softmax
    """
    out = run_use_case(ctx, "analyze")
    if as_json:
        emit_json(out.document)
        return
    r = out.value
    say(
        f"run {r.run_id} concluded {r.status}; best kernel {r.best_kernel_sha256[:12]}; "
        f"wrote {r.output_dir}/analysis.json, report.md, manifest.json"
    )
