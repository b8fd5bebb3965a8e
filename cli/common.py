"""What every command shares: the --json flag and opening the service."""

from __future__ import annotations

from pathlib import Path

import typer

JSON = typer.Option(False, "--json", help="Print exactly one JSON object on stdout.")


def open_service(ctx: typer.Context, *, create: bool = False):
    """The service on the --db ledger. Only commands whose job is to create a ledger (plan,
    import, db upgrade) pass `create`; every other command refuses a missing SQLite ledger
    (exit 4) instead of silently starting an empty one where the history was. The store is
    opened on first use, after the command's input files were checked."""
    from ledger.service import LedgerService

    return LedgerService.opening(lambda: open_store(ctx, create=create))


def ledger_url(ctx: typer.Context) -> str:
    """The ledger's URL: --db, else $KERNEL_LEDGER_DB, else the default."""
    from ledger.store.eventstore import resolve_url

    return resolve_url((ctx.obj or {}).get("db"))


def open_store(ctx: typer.Context, *, check_schema: bool = True, create: bool = False):
    from ledger.store.eventstore import Store

    return Store(ledger_url(ctx), create=create, check_schema=check_schema)


def input_path(value: str, flag: str) -> Path:
    if not value or not value.strip():
        from ledger.errors import InputError

        raise InputError(f"{flag} needs a file path")
    return Path(value)
