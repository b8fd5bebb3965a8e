"""Who this process is, as the actor of what it appends (ledger/core/actors.py) records it
beside what the database says: the KERNEL_LEDGER_ACTOR label, checked, and on SQLite the
operating-system user and host.

KERNEL_LEDGER_TEST_OS_USER and KERNEL_LEDGER_TEST_HOST replace the user and host: the test
suite pins them so that fresh ledgers hash the same on every machine. They prove nothing
either way: on SQLite whoever can write the file can write any actor."""

from __future__ import annotations

import os
import socket

from ledger.core.actors import printable, problem
from ledger.errors import InputError

LABEL = "KERNEL_LEDGER_ACTOR"


def actor_label() -> str | None:
    """KERNEL_LEDGER_ACTOR, when set (a wrong one is refused: exit 2, nothing written)."""
    raw = os.environ.get(LABEL)
    if raw is None or raw == "":
        return None
    why = problem(LABEL, raw)
    if why is not None:
        raise InputError(f"{why}; nothing was written")
    return raw


def local_user() -> dict[str, str]:
    """os_user and host of this process (its effective user's name)."""
    user = os.environ.get("KERNEL_LEDGER_TEST_OS_USER") or _user_name()
    host = os.environ.get("KERNEL_LEDGER_TEST_HOST") or socket.gethostname() or "unknown"
    return {"os_user": printable(user), "host": printable(host)}


def _user_name() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError, AttributeError):  # no password database entry, or Windows
        import getpass

        try:
            return getpass.getuser()
        except (OSError, KeyError):
            return f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"
