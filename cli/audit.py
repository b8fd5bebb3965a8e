"""verify: prove the history is intact and every decision follows from its inputs."""

from __future__ import annotations

import sys

import typer

from cli.common import JSON, open_store
from cli.output import emit_json, progress, say


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)


def verify(
    ctx: typer.Context,
    run: str = typer.Option(None, "--run", metavar="ID", help="Only this run's events."),
    as_json: bool = JSON,
) -> None:
    """Check hashes, chains, canonical payloads, decisions and projections; exit 1 on failure.

    Example: kernel-ledger verify
    """
    from ledger.verify import verify_ledger

    store = open_store(ctx)
    show_progress = not as_json and sys.stderr.isatty()

    def on_progress(done: int, total: int) -> None:
        if show_progress and total:
            progress(f"\rverifying {done}/{total} events")

    report = verify_ledger(store, run, on_progress=on_progress)
    if show_progress:
        progress("\n")
    if as_json:
        emit_json(report.as_dict())
    elif report.ok:
        say(
            f"verified: {report.events_checked} events in {report.runs_checked} runs; "
            f"checks {', '.join(report.checks)} all ok"
        )
    else:
        f = report.first_failure
        assert f is not None
        where = f"seq {f.seq} ({f.stream_id} v{f.stream_version})" if f.seq else "ledger"
        sys.stderr.write(f"Error: verification failed at {where}: {f.check}: {f.reason}\n")
    if not report.ok:
        raise typer.Exit(1)
