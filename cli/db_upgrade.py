"""db upgrade: migrate the ledger's schema to the newest revision."""

from __future__ import annotations

from cli.declare import Command, Env, Outcome
from cli.output import say


def upgrade(env: Env) -> Outcome:
    before, after = env.store(check_schema=False, create=True).upgrade()
    return Outcome({"status": "ok", "from_revision": before, "revision": after}, (before, after))


def say_upgrade(out: Outcome, args) -> None:
    before, after = out.value
    say(
        f"schema at revision {after}"
        + (f" (was {before})" if before != after else " (already current)")
    )


COMMAND = Command(
    "db upgrade",
    """Migrate the ledger's schema to the newest revision (creates an empty one).

    Example: kernel-ledger --db postgresql+psycopg://owner@db/ledger db upgrade
    """,
    upgrade,
    say_upgrade,
    returns='`status` "ok", `from_revision`, `revision`',
)
