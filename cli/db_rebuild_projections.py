"""db rebuild-projections: fold the projection tables again from the events alone."""

from __future__ import annotations

from cli.declare import Command, Env, Outcome
from cli.output import plural, say


def rebuild_projections(env: Env) -> Outcome:
    from ledger.integrity.verify import rebuild_projections as rebuild

    runs = rebuild(env.store())
    return Outcome({"status": "ok", "runs": runs}, runs)


def say_rebuilt(out: Outcome, args) -> None:
    say(f"rebuilt the projections of {plural(out.value, 'run')} from their events")


COMMAND = Command(
    "db rebuild-projections",
    """Fold the projection tables (runs, run_cases, rounds, profiles) again from the events
    alone, in one transaction; the events are read, never changed.

    Example:

    \b
        kernel-ledger --db postgresql+psycopg://owner@db/ledger db rebuild-projections
    """,
    rebuild_projections,
    say_rebuilt,
    returns='`status` "ok", `runs` (the runs rebuilt)',
)
