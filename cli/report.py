"""report: one self-contained HTML page of a run, for people."""

from __future__ import annotations

import typer

from cli.common import JSON, checked_run_id, input_path, open_service
from cli.output import emit_json, plural, say


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(
    ctx: typer.Context,
    run: str = typer.Option(
        ..., "--run", metavar="ID", callback=checked_run_id, help="The run to report on."
    ),
    html_path: str = typer.Option(..., "--html", metavar="PATH", help="The HTML file to write."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --html file."),
    as_json: bool = JSON,
) -> None:
    """Write a self-contained HTML report of a run: round timeline, per-case latency
    distributions, profile signals, rounds table and verification. Appends nothing.

    Example:

    \b
        kernel-ledger report --run softmax-demo-001 --html out/softmax-demo-001.html
    """
    from ledger.reports.report import write_report

    r = write_report(open_service(ctx), run, input_path(html_path, "--html"), force=force)
    v = r.verification
    if as_json:
        emit_json(
            {
                "status": "ok",
                "run_id": r.run_id,
                "html": str(r.path),
                "bytes": r.size,
                "charts": list(r.charts),
                "rounds": r.rounds,
                "profiles": r.profiles,
                "verification": {
                    "status": v.status,
                    "events_checked": v.events_checked,
                    "first_failure": v.first_failure,
                    "last_event_hash": v.last_event_hash,
                    "tree_size": v.tree_size,
                    "tree_root": v.tree_root,
                },
            }
        )
    else:
        state = "ok" if v.ok else "FAILED (the report shows where)"
        say(
            f"wrote {r.path} ({r.size} bytes): run {r.run_id}, {plural(r.rounds, 'round')}, "
            f"charts {', '.join(r.charts)}; verification {state}"
        )
