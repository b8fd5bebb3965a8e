"""What every command shares: the --json flag and opening the service."""

from __future__ import annotations

from pathlib import Path

import typer

JSON = typer.Option(False, "--json", help="Print exactly one JSON object on stdout.")


def open_service(ctx: typer.Context):
    from ledger.service import LedgerService
    from ledger.store.eventstore import Store, resolve_url

    return LedgerService(Store(resolve_url((ctx.obj or {}).get("db"))))


def open_store(ctx: typer.Context, *, check_schema: bool = True):
    from ledger.store.eventstore import Store, resolve_url

    return Store(resolve_url((ctx.obj or {}).get("db")), check_schema=check_schema)


def input_path(value: str, flag: str) -> Path:
    if not value or not value.strip():
        from ledger.errors import InputError

        raise InputError(f"{flag} needs a file path")
    return Path(value)
