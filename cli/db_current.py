"""db current: the ledger's schema revision."""

from __future__ import annotations

from cli.declare import Command, Env, Outcome
from cli.output import say


def current(env: Env) -> Outcome:
    from ledger.store.schema import HEAD_REVISION

    revision = env.store(check_schema=False).revision()
    document = {"status": "ok", "revision": revision, "head": HEAD_REVISION,
                "current": revision == HEAD_REVISION}  # fmt: skip
    return Outcome(document, document)


def say_current(out: Outcome, args) -> None:
    say(f"revision {out.value['revision'] or 'none'} (head {out.value['head']})")


COMMAND = Command(
    "db current",
    """Print the ledger's schema revision and whether it is current.

    Example: kernel-ledger db current --json
    """,
    current,
    say_current,
    returns='`status` "ok", `revision`, `head`, `current`',
)
