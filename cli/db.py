"""db upgrade / current / rebuild-projections / copy / grant: schema migrations, projections,
moving a ledger, roles."""

from __future__ import annotations

import sys

import typer

from cli.common import JSON, ledger_url, open_store
from cli.output import emit_json, plural, progress, say

app = typer.Typer(
    help="Schema migrations, moving a ledger, database roles.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command("upgrade")
def upgrade(ctx: typer.Context, as_json: bool = JSON) -> None:
    """Migrate the ledger's schema to the newest revision (creates an empty one).

    Example: kernel-ledger --db postgresql+psycopg://owner@db/ledger db upgrade
    """
    store = open_store(ctx.parent or ctx, check_schema=False, create=True)
    before, after = store.upgrade()
    if as_json:
        emit_json({"status": "ok", "from_revision": before, "revision": after})
    else:
        say(
            f"schema at revision {after}"
            + (f" (was {before})" if before != after else " (already current)")
        )


@app.command("current")
def current(ctx: typer.Context, as_json: bool = JSON) -> None:
    """Print the ledger's schema revision and whether it is current.

    Example: kernel-ledger db current --json
    """
    from ledger.store.schema import HEAD_REVISION

    store = open_store(ctx.parent or ctx, check_schema=False)
    revision = store.revision()
    if as_json:
        emit_json(
            {
                "status": "ok",
                "revision": revision,
                "head": HEAD_REVISION,
                "current": revision == HEAD_REVISION,
            }
        )
    else:
        say(f"revision {revision or 'none'} (head {HEAD_REVISION})")


@app.command("rebuild-projections")
def rebuild_projections(ctx: typer.Context, as_json: bool = JSON) -> None:
    """Fold the projection tables (runs, run_cases, rounds, profiles) again from the events
    alone, in one transaction; the events are read, never changed.

    Example:

    \b
        kernel-ledger --db postgresql+psycopg://owner@db/ledger db rebuild-projections
    """
    from ledger.integrity.verify import rebuild_projections as rebuild

    runs = rebuild(open_store(ctx.parent or ctx))
    if as_json:
        emit_json({"status": "ok", "runs": runs})
    else:
        say(f"rebuilt the projections of {plural(runs, 'run')} from their events")


@app.command("copy")
def copy(
    ctx: typer.Context,
    to: str = typer.Option(..., "--to", metavar="URL", help="The empty ledger to copy into."),
    as_json: bool = JSON,
) -> None:
    """Copy this ledger into an empty one (SQLite <-> PostgreSQL), preserving every hash.

    Events are copied verbatim (same seq, ids, hashes and payload bytes), with the blobs,
    stored checkpoints and the ledger id; the projections are rebuilt on the target. A
    missing SQLite file or an empty PostgreSQL database is created or migrated first; a
    ledger that holds anything is refused.

    Example:

    \b
        kernel-ledger --db sqlite:///ledger.sqlite3 db copy --to postgresql+psycopg://owner@db/ledger
    """
    from ledger.integrity.copy import copy_ledger, open_target

    if not to or not to.strip():
        from ledger.errors import InputError

        raise InputError("--to needs a database URL")
    source = open_store(ctx.parent or ctx)
    target = open_target(source, to)
    show_progress = not as_json and sys.stderr.isatty()

    def on_progress(done: int, total: int) -> None:
        if show_progress and total:
            # the events are in; the indexes, blobs and read-back take a few seconds more
            after = "; copying blobs, building indexes, reading back" if done >= total else ""
            progress(f"\rcopying {done}/{total} events{after}")

    result = copy_ledger(source, target, on_progress=on_progress)
    if show_progress:
        progress("\n")
    if as_json:
        emit_json(
            {
                "status": "ok",
                "from": source.shown_url,
                "to": target.shown_url,
                "ledger_id": result.ledger_id,
                "events": result.events,
                "blobs": result.blobs,
                "runs": result.runs,
                "other_rows": result.other_rows,
                "tree_size": result.tree_size,
                "tree_root": result.tree_root,
            }
        )
    else:
        others = ", ".join(f"{name} {n}" for name, n in result.other_rows.items())
        say(
            f"copied {plural(result.events, 'event')}, {plural(result.blobs, 'blob')} and rows "
            f"({others}) to "
            f"{target.shown_url} and rebuilt the projections of {plural(result.runs, 'run')}\n"
            f"ledger {result.ledger_id}, tree size {result.tree_size}, root "
            f"{result.tree_root}\nnext: kernel-ledger --db '{target.shown_url}' verify"
        )


@app.command("grant")
def grant(
    ctx: typer.Context,
    role: str = typer.Option(..., "--role", metavar="NAME", help="The application role."),
    sql: bool = typer.Option(False, "--sql", help="Print the SQL instead of running it."),
    as_json: bool = JSON,
) -> None:
    """Give a PostgreSQL role the application's least privileges on this ledger.

    SELECT and INSERT on the log (events, blobs, ledger_info), SELECT, INSERT and UPDATE on
    the projection tables, SELECT on alembic_version; nothing else. Run it as the owner,
    after every db upgrade. --sql prints the statements and connects to nothing.

    Example:

    \b
        kernel-ledger --db postgresql+psycopg://owner@db/ledger db grant --role kledger_app
    """
    from ledger.store import roles

    if sql:
        statements = roles.grant_statements(role)
        if as_json:
            emit_json({"status": "ok", "role": role, "sql": statements})
        else:
            say("\n".join(f"{s};" for s in ("BEGIN", *statements, "COMMIT")))
        return
    from ledger.store.urls import parse_url

    top = ctx.parent or ctx
    roles.check_grant(parse_url(ledger_url(top)).get_backend_name(), role)  # before opening
    result = roles.grant(open_store(top), role)
    if as_json:
        emit_json(
            {
                "status": "ok",
                "role": result.role,
                "owner": result.owner,
                "schema": result.schema,
                "grants": {table: list(p) for table, p in result.grants.items()},
            }
        )
    else:
        say(f"granted {result.role} the application privileges on schema {result.schema}:")
        for table, allowed in result.grants.items():
            say(f"  {table}: {', '.join(allowed)}")
