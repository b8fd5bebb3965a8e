"""db copy: this ledger into an empty one, every hash preserved."""

from __future__ import annotations

from dataclasses import asdict

from cli.declare import REQUIRED, Command, Env, Option, Outcome
from cli.output import plural, progress_line, say


def copy(env: Env, to: str) -> Outcome:
    from ledger.integrity.copy import copy_ledger, open_target

    if not to.strip():
        from ledger.errors import InputError

        raise InputError("--to needs a database URL")
    source = env.store()
    target = open_target(source, to)
    on_progress, finish = progress_line(env.as_json, _copying)
    result = copy_ledger(source, target, on_progress=on_progress)
    finish()
    return Outcome(
        {
            "status": "ok",
            "from": source.shown_url,
            "to": target.shown_url,
            **asdict(result),
        },
        (result, target.shown_url),
    )


def _copying(done: int, total: int) -> str | None:
    """The events are in at `total`; the indexes, blobs and read-back take a few seconds more."""
    after = "; copying blobs, building indexes, reading back" if done >= total else ""
    return f"\rcopying {done}/{total} events{after}" if total else None


def say_copy(out: Outcome, args) -> None:
    result, shown_url = out.value
    others = ", ".join(f"{name} {n}" for name, n in result.other_rows.items())
    say(
        f"copied {plural(result.events, 'event')}, {plural(result.blobs, 'blob')} and rows "
        f"({others}) to "
        f"{shown_url} and rebuilt the projections of {plural(result.runs, 'run')}\n"
        f"ledger {result.ledger_id}, tree size {result.tree_size}, root "
        f"{result.tree_root}\nnext: kernel-ledger --db '{shown_url}' verify"
    )


COMMAND = Command(
    "db copy",
    """Copy this ledger into an empty one (SQLite <-> PostgreSQL), preserving every hash.

    Events are copied verbatim (same seq, ids, hashes and payload bytes), with the blobs,
    stored checkpoints and the ledger id; the projections are rebuilt on the target. A
    missing SQLite file or an empty PostgreSQL database is created or migrated first; a
    ledger that holds anything is refused.

    Example:

    \b
        kernel-ledger --db sqlite:///ledger.sqlite3 db copy --to postgresql+psycopg://owner@db/ledger
    """,
    copy,
    say_copy,
    {"to": Option("The empty ledger to copy into (its URL).", default=REQUIRED, metavar="URL")},
    returns='`status` "ok", `from`, `to`, `ledger_id`, `events`, `blobs`, `runs` (projections '
    "rebuilt), `other_rows` (rows copied per other table), `tree_size` and `tree_root` "
    "(base64, as a checkpoint note writes it)",
)
