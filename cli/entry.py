"""The program's entry point (`kernel-ledger`, `python -m cli`).

A command an agent runs once per round (`record` above all) spends most of its life
importing modules, and Python's cycle collector would scan the growing heap again and again
while it does: for the commands declared `one_shot` it is off from their declaration's
import to the exit. They make no reference cycles worth collecting in their short, bounded
run; every other command (a server, a verify of a million events, a bulk import) keeps it.
"""

from __future__ import annotations

import gc
import sys


def main() -> None:
    from cli.declare import command_name, find

    name = command_name(sys.argv[1:])
    command = find(name) if name is not None else None
    if command is not None and command.one_shot:
        gc.disable()
    from cli.app import main as run

    run()
