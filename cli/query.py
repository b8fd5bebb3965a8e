"""status and history: read-only views from the projection tables."""

from __future__ import annotations

import typer

from cli.common import JSON, ledger, run_use_case
from cli.output import diagnose_hint, emit_json, failures, pct, say, table


def register(app: typer.Typer) -> None:
    app.command("status")(status)
    app.command("history")(history)


def status(
    ctx: typer.Context,
    run: str = typer.Option(None, "--run", metavar="ID", help="One run in detail."),
    as_json: bool = JSON,
) -> None:
    """Run status and best kernel; every run when --run is not given.

    Example: kernel-ledger status --run softmax-demo-001
    """
    out = run_use_case(ctx, "status")
    if as_json:
        emit_json(out.document)
        return
    if run is None:
        rows = out.value
        if not rows:
            say("the ledger holds no runs yet")
            return
        say(
            table(
                ["run", "op", "status", "rounds", "kept", "cumulative", "target", "best kernel"],
                [
                    (
                        r.run_id,
                        r.op_name,
                        r.conclusion or r.status,
                        r.rounds_recorded,
                        r.kept_rounds,
                        pct(r.cumulative_improvement),
                        "met" if r.target_met else "not met",
                        r.best_kernel_sha256[:12],
                    )
                    for r in rows
                ],
            )
        )
        return
    view = out.value
    r = view.run
    say(f"run {r.run_id} ({r.op_name} on {r.soc}): {r.conclusion or r.status}")
    say(
        f"  rounds {r.rounds_recorded}/{r.max_rounds}, kept {r.kept_rounds}, consecutive "
        f"failures {failures(r.consecutive_failures, r.max_consecutive_failures)}"
    )
    if r.needs_diagnosis and not r.conclusion:
        say(f"  {diagnose_hint(r.run_id)}")
    say(
        f"  cumulative improvement {pct(r.cumulative_improvement)} (target "
        f"{pct(r.target_relative_improvement)}, {'met' if r.target_met else 'not met'})"
    )
    say(f"  best kernel {r.best_kernel_sha256} from round {r.best_round}: {r.best_kernel_path}")
    say(
        table(
            ["case", "weight", "baseline µs", "best µs"],
            [(c.case_id, c.weight, c.baseline_median_us, c.best_median_us) for c in view.cases],
        )
    )


def history(
    ctx: typer.Context,
    run: str = typer.Option(None, "--run", metavar="ID", help="Only this run."),
    op: str = typer.Option(None, "--op", metavar="NAME", help="Only runs of this op."),
    soc: str = typer.Option(None, "--soc", metavar="SOC", help="Only runs on this target."),
    decision: str = typer.Option(
        None, "--decision", metavar="D", help="KEEP, DISCARD, NOISE or FAIL."
    ),
    bottleneck: str = typer.Option(
        None, "--bottleneck", metavar="CLASS", help="Rounds whose starting profile had this class."
    ),
    mechanism: str = typer.Option(None, "--mechanism", metavar="NAME", help="Only this mechanism."),
    like_profile: str = typer.Option(
        None,
        "--like-profile",
        metavar="PATH",
        help="Past rounds whose starting profile had the same bottleneck and nearby signals.",
    ),
    kernel_name: str = typer.Option(
        None, "--kernel-name", metavar="NAME", help="With --like-profile: which kernel's rows."
    ),
    search: str = typer.Option(
        None, "--search", metavar="TEXT", help="Text in hypothesis or change."
    ),
    since: str = typer.Option(None, "--since", metavar="WHEN", help="Recorded at or after (UTC)."),
    until: str = typer.Option(None, "--until", metavar="WHEN", help="Recorded before (UTC)."),
    limit: int = typer.Option(None, "--limit", metavar="N", help="At most N rounds."),
    as_json: bool = JSON,
) -> None:
    """Rounds across runs, oldest first, filtered; or, with --like-profile, the past rounds
    that started from a similar profile, nearest first.

    Example: kernel-ledger history --op softmax --decision KEEP
    """
    out = run_use_case(ctx, "history")
    if as_json:
        emit_json(out.document)
        return
    if like_profile is not None:
        _say_like_profile(*out.value)
        return
    rows = out.value
    if not rows:
        say("no rounds match")
        return
    say(
        table(
            ["run", "round", "decision", "I", "R", "cumulative", "change", "recorded"],
            [
                (
                    r.run_id,
                    r.round,
                    r.decision,
                    pct(r.relative_improvement),
                    pct(r.worst_case_regression),
                    pct(r.cumulative_improvement),
                    r.change,
                    r.recorded_at[:19] + "Z",
                )
                for r in rows
            ],
        )
    )
    why = ledger(ctx).service().explain_rounds([(r.run_id, r.round) for r in rows])
    say("why:")
    for r in rows:
        found = why.get((r.run_id, r.round))
        if found is not None:
            say(f"  {r.run_id} round {r.round}: {found.text}")


def _say_like_profile(attribution, similar) -> None:
    say(f"profile bottleneck: {attribution.bottleneck}")
    say(f"first experiment: {attribution.first_experiment}")
    if not similar:
        say("no past round started from a profile with this bottleneck")
        return
    say(
        table(
            ["run", "round", "distance", "decision", "I", "mechanism", "change"],
            [
                (
                    s.row.run_id,
                    s.row.round,
                    s.distance,
                    s.row.decision,
                    pct(s.row.relative_improvement),
                    s.row.mechanism,
                    s.row.change,
                )
                for s in similar
            ],
        )
    )
