"""The program's entry point (`kernel-ledger`, `python -m cli`).

A command an agent runs once per round (`record` above all) spends most of its life
importing modules, and Python's cycle collector would scan the growing heap again and again
while it does: for those commands it is off from the first import to the exit. They make no
reference cycles worth collecting in their short, bounded run; every other command (a
server, a verify of a million events, a bulk import) keeps it.
"""

from __future__ import annotations

import gc
import sys

ONE_SHOT = frozenset({"plan", "record", "status", "show", "diagnose", "noise"})


def command_name(args: list[str]) -> str | None:
    """The first word after the program's options (`--db URL` before or after it)."""
    at = 0
    while at < len(args):
        if args[at] == "--db":
            at += 2
        elif args[at].startswith("--db="):
            at += 1
        elif args[at].startswith("-"):
            return None
        else:
            return args[at]
    return None


def main() -> None:
    if command_name(sys.argv[1:]) in ONE_SHOT:
        gc.disable()
    from cli.app import main as run

    run()
