"""status and history: read-only views from the projection tables."""

from __future__ import annotations

from datetime import datetime

import typer

from cli.common import JSON, MAX_COUNT, checked_run_id, open_service, open_store
from cli.output import emit_json, pct, say, table

DECISIONS = ("KEEP", "DISCARD", "NOISE", "FAIL")


def register(app: typer.Typer) -> None:
    app.command("status")(status)
    app.command("history")(history)


def status(
    ctx: typer.Context,
    run: str = typer.Option(
        None, "--run", metavar="ID", callback=checked_run_id, help="One run in detail."
    ),
    as_json: bool = JSON,
) -> None:
    """Run status and best kernel; every run when --run is not given.

    Example: kernel-ledger status --run softmax-demo-001
    """
    from ledger.projections import as_dict
    from ledger.store.eventstore import list_runs

    # A read of the projection rows: the store alone, so start-up does not import the
    # service's input models and controller (see docs/benchmarks.md, start-up).
    store = open_store(ctx)
    if run is None:
        with store.transaction() as conn:
            rows = list_runs(conn)
        if as_json:
            emit_json({"status": "ok", "runs": [as_dict(r) for r in rows]})
            return
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
    with store.transaction() as conn:
        view = store.load_view(conn, run)
    if view is None:
        from ledger.errors import InputError

        raise InputError(f"run {run!r} is not in the ledger")
    r = view.run
    if as_json:
        emit_json(
            {
                "status": "ok",
                "run": as_dict(r),
                "best_kernel": {
                    "sha256": r.best_kernel_sha256,
                    "path": r.best_kernel_path,
                    "round": r.best_round,
                },
                "cases": [as_dict(c) for c in view.cases],
            }
        )
        return
    say(f"run {r.run_id} ({r.op_name} on {r.soc}): {r.conclusion or r.status}")
    say(
        f"  rounds {r.rounds_recorded}/{r.max_rounds}, kept {r.kept_rounds}, consecutive "
        f"failures {r.consecutive_failures}/{r.max_consecutive_failures}"
        + (", NEEDS DIAGNOSIS" if r.needs_diagnosis else "")
    )
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


def _date(value: str | None, flag: str) -> str | None:
    if value is None:
        return None
    from ledger.errors import InputError

    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"{flag} must be a date or time like 2026-11-30 or 2026-11-30T12:00:00Z"
        ) from None
    if parsed.tzinfo is not None:
        from datetime import UTC

        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def history(
    ctx: typer.Context,
    run: str = typer.Option(
        None, "--run", metavar="ID", callback=checked_run_id, help="Only this run."
    ),
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
    limit: int = typer.Option(
        None, "--limit", metavar="N", max=MAX_COUNT, help="At most N rounds."
    ),
    as_json: bool = JSON,
) -> None:
    """Rounds across runs, oldest first, filtered; or, with --like-profile, the past rounds
    that started from a similar profile, nearest first.

    Example: kernel-ledger history --op softmax --decision KEEP
    """
    from ledger.errors import InputError
    from ledger.projections import as_dict
    from ledger.store.eventstore import RoundFilter, query_rounds

    if decision is not None and decision.upper() not in DECISIONS:
        raise InputError(f"--decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
    if limit is not None and limit < 1:
        raise InputError("--limit must be at least 1")
    if like_profile is not None:
        _like_profile(ctx, like_profile, kernel_name, limit or 10, as_json)
        return
    f = RoundFilter(
        run_id=run,
        bottleneck=bottleneck,
        op_name=op,
        soc=soc,
        decision=decision.upper() if decision else None,
        mechanism=mechanism,
        search=search,
        since=_date(since, "--since"),
        until=_date(until, "--until"),
        limit=limit,
    )
    service = open_service(ctx)
    if run is not None:
        service.view(run)  # an unknown run is an error, not an empty list
    with service.store.transaction() as conn:
        rows = query_rounds(conn, f)
    if as_json:
        emit_json({"status": "ok", "count": len(rows), "rounds": [as_dict(r) for r in rows]})
        return
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


def _like_profile(ctx, path: str, kernel_name: str | None, limit: int, as_json: bool) -> None:
    from pathlib import Path

    from ledger.bottleneck import classify
    from ledger.profiles import load_profile
    from ledger.projections import as_dict
    from ledger.similar import rank
    from ledger.store.eventstore import rounds_with_bottleneck

    parsed = load_profile(Path(path), kernel_name=kernel_name)
    attribution = classify(parsed.signals, attributes=parsed.attributes)
    service = open_service(ctx)
    with service.store.transaction() as conn:
        candidates = rounds_with_bottleneck(conn, str(attribution.bottleneck), 500)
    similar = rank(parsed.signals, candidates, limit)
    if as_json:
        emit_json(
            {
                "status": "ok",
                "bottleneck": str(attribution.bottleneck),
                "first_experiment": attribution.first_experiment,
                "count": len(similar),
                "rounds": [
                    {**as_dict(s.row), "distance": s.distance, "shared_signals": s.shared_signals}
                    for s in similar
                ],
            }
        )
        return
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
