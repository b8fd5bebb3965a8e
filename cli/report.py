"""report: one self-contained HTML page of a run, for people."""

from __future__ import annotations

from pathlib import Path

from cli.declare import REQUIRED, Command, Env, Option, Outcome, run_option
from cli.output import plural, say


def report(env: Env, run: str, html: str, force: bool) -> Outcome:
    from ledger.reports.report import write_report

    r = write_report(env.service(), run, Path(html), force=force)
    v = r.verification
    return Outcome(
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
        },
        r,
    )


def say_report(out: Outcome, args) -> None:
    r = out.value
    state = "ok" if r.verification.ok else "FAILED (the report shows where)"
    say(
        f"wrote {r.path} ({r.size} bytes): run {r.run_id}, {plural(r.rounds, 'round')}, "
        f"charts {', '.join(r.charts)}; verification {state}"
    )


COMMAND = Command(
    "report",
    """Write a self-contained HTML report of a run: round timeline, per-case latency
    distributions, profile signals, rounds table and verification. Appends nothing.

    Example:

    \b
        kernel-ledger report --run softmax-demo-001 --html out/softmax-demo-001.html
    """,
    report,
    say_report,
    {
        "run": run_option("The run to report on."),
        "html": Option("The HTML file to write.", default=REQUIRED, metavar="PATH", file=True),
        "force": Option("Overwrite an existing --html file.", bool, False),
    },
    returns='`status` "ok", `run_id`, `html`, `bytes`, `charts`, `rounds`, `profiles`, '
    "`verification` {status, events_checked, first_failure, last_event_hash, tree_size, "
    "tree_root}",
)
