"""db upgrade / db current: schema migrations."""

from __future__ import annotations

import typer

from cli.common import JSON, open_store
from cli.output import emit_json, say

app = typer.Typer(help="Schema migrations.", no_args_is_help=True)


@app.command("upgrade")
def upgrade(ctx: typer.Context, as_json: bool = JSON) -> None:
    """Migrate the ledger's schema to the newest revision (creates an empty one).

    Example: kernel-ledger --db postgresql+psycopg://owner@db/ledger db upgrade
    """
    store = open_store(ctx.parent or ctx, check_schema=False)
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
