"""What every command shares: the --json flag and opening the service."""

from __future__ import annotations

import typer

from cli.tools import Ledger, input_path

__all__ = [
    "JSON",
    "MAX_COUNT",
    "checked_options",
    "checked_run_id",
    "input_path",
    "ledger",
    "ledger_url",
    "open_service",
    "open_store",
    "run_use_case",
]

JSON = typer.Option(False, "--json", help="Print exactly one JSON object on stdout.")


def open_service(ctx: typer.Context, *, create: bool = False):
    """The service on the --db ledger. Only commands whose job is to create a ledger (plan,
    import, db upgrade) pass `create`; every other command refuses a missing SQLite ledger
    (exit 4) instead of silently starting an empty one where the history was. The store is
    opened on first use, after the command's input files were checked."""
    from ledger.services.service import LedgerService

    return LedgerService.opening(lambda: open_store(ctx, create=create))


def ledger_url(ctx: typer.Context) -> str:
    """The ledger's URL: --db, else $KERNEL_LEDGER_DB, else the default."""
    from ledger.store.urls import resolve_url

    return resolve_url((ctx.obj or {}).get("db"))


def open_store(ctx: typer.Context, *, check_schema: bool = True, create: bool = False):
    from ledger.store.eventstore import Store

    return Store(ledger_url(ctx), create=create, check_schema=check_schema)


def ledger(ctx: typer.Context) -> Ledger:
    """The --db ledger for the shared use cases (cli/tools.py), opened by the command."""
    return Ledger(lambda create=False: open_store(ctx, create=create))


def not_a_run_id(value: str) -> str | None:
    """Why `value` is not a run id, or None: a run id follows the one safe pattern (the Run
    Manifest's), so a hostile value is a usage error (exit 2) before anything is opened."""
    from ledger.inputs.jsonio import RUN_ID_RE, display

    if RUN_ID_RE.fullmatch(value):
        return None
    return f"'{display(value)}' is not a run id (ids match {RUN_ID_RE.pattern})"


def checked_run_id(value: str | None) -> str | None:
    """The --run callback of the commands that are no use case of cli/arguments.py."""
    problem = None if value is None else not_a_run_id(value)
    if problem is not None:
        raise typer.BadParameter(problem)
    return value


def option_names(ctx: typer.Context) -> dict[str, str]:
    """Each parameter of the command by the name its user writes: `--round`, `PATH`."""
    return {
        p.name: p.opts[0] if p.param_type_name == "option" else (p.metavar or p.name.upper())
        for p in ctx.command.params
        if p.name
    }


def checked_options(ctx: typer.Context, use_case: str) -> dict:
    """The command's options, checked by its use case's model in cli/arguments.py."""
    from cli.arguments import TOOLS

    return TOOLS[use_case].options(ctx.params, option_names(ctx))


def run_use_case(ctx: typer.Context, use_case: str, **hooks):
    """The use case the command is (cli/tools.py), with its options checked by the same model
    the MCP server checks a tool's arguments with (cli/arguments.py)."""
    from cli.arguments import TOOLS

    return TOOLS[use_case].call(ledger(ctx), **checked_options(ctx, use_case), **hooks)


MAX_COUNT = 2**53 - 1
"""The largest whole number an option takes (the ledger's integers are RFC 8785-safe)."""
