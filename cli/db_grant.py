"""db grant: a PostgreSQL role's least privileges on this ledger."""

from __future__ import annotations

from cli.declare import REQUIRED, Command, Env, Option, Outcome
from cli.output import say


def grant(env: Env, role: str, sql: bool) -> Outcome:
    from ledger.store import roles

    if sql:
        statements = roles.grant_statements(role)
        return Outcome({"status": "ok", "role": role, "sql": statements}, statements)
    from ledger.store.urls import parse_url

    roles.check_grant(parse_url(env.url).get_backend_name(), role)  # before opening
    result = roles.grant(env.store(), role)
    return Outcome(
        {
            "status": "ok",
            "role": result.role,
            "owner": result.owner,
            "schema": result.schema,
            "grants": {table: list(p) for table, p in result.grants.items()},
        },
        result,
    )


def say_grant(out: Outcome, args) -> None:
    if args.sql:
        say("\n".join(f"{s};" for s in ("BEGIN", *out.value, "COMMIT")))
        return
    result = out.value
    say(f"granted {result.role} the application privileges on schema {result.schema}:")
    for table, allowed in result.grants.items():
        say(f"  {table}: {', '.join(allowed)}")


COMMAND = Command(
    "db grant",
    """Give a PostgreSQL role the application's least privileges on this ledger.

    SELECT and INSERT on the log (events, blobs, ledger_info), SELECT, INSERT and UPDATE on
    the projection tables, SELECT on alembic_version; nothing else. Run it as the owner,
    after every db upgrade. --sql prints the statements and connects to nothing.

    Example:

    \b
        kernel-ledger --db postgresql+psycopg://owner@db/ledger db grant --role kledger_app
    """,
    grant,
    say_grant,
    {
        "role": Option("The application role.", default=REQUIRED, metavar="NAME"),
        "sql": Option("Print the SQL instead of running it.", bool, False),
    },
    returns='`status` "ok", `role`, `owner`, `schema`, `grants` {table: privileges}; with '
    "--sql: `role`, `sql`",
)
