"""Which ledger a command opens: the --db URL, KERNEL_LEDGER_DB or the default file, checked
before anything connects, and the busy timeout SQLite writers wait."""

from __future__ import annotations

import math
import os
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from ledger.errors import (
    InputError,
)
from ledger.text import display

DEFAULT_DB = "sqlite:///.vaws-local/ascend-triton/optimization/ledger.sqlite3"


DEFAULT_BUSY_TIMEOUT_S = 5.0


def resolve_url(db: str | None) -> str:
    """--db, else KERNEL_LEDGER_DB, else the default SQLite file under the working directory."""
    return db or os.environ.get("KERNEL_LEDGER_DB") or DEFAULT_DB


_SQLITE_OPTIONS = ("timeout",)


def parse_url(url: str, flag: str = "--db") -> Any:
    """The parsed ledger URL (a SQLAlchemy `URL`) of a backend kernel-ledger runs on; `flag`
    names the option it came from in the error. A SQLite URL names a file (an in-memory
    database keeps nothing a command writes) and takes no options but a numeric `timeout`."""
    shown = display(url)
    try:
        parsed = make_url(url)
        parsed.port  # noqa: B018 - a malformed host or port fails here, not on first use
    except (sa_exc.ArgumentError, ValueError):
        raise InputError(f"{flag} {shown!r} is not a database URL") from None
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise InputError(f"{flag} must be a sqlite:// or postgresql+psycopg:// URL, not {shown!r}")
    if any("\x00" in str(part) for part in (parsed.database, parsed.host, parsed.username)):
        raise InputError(f"{flag} {shown!r} holds a NUL character")
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if not database or database == ":memory:" or database.startswith("file:"):
            raise InputError(
                f"{flag} {shown!r} is not a ledger file (an in-memory or URI database keeps "
                "nothing a command writes); name a file: sqlite:///path/to/ledger.sqlite3"
            )
        for key, value in parsed.query.items():
            if key not in _SQLITE_OPTIONS:
                raise InputError(
                    f"{flag} {shown!r}: the SQLite URL option {key!r} is not supported "
                    "(only timeout=SECONDS)"
                )
            try:
                seconds = float(value) if isinstance(value, str) else math.nan
            except ValueError:
                seconds = math.nan
            if not 0 <= seconds <= 3600:
                raise InputError(f"{flag} {shown!r}: timeout must be 0 to 3600 seconds")
    return parsed


def busy_timeout_s() -> float:
    raw = os.environ.get("KERNEL_LEDGER_BUSY_TIMEOUT")
    if raw is None:
        return DEFAULT_BUSY_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise InputError("KERNEL_LEDGER_BUSY_TIMEOUT must be a number of seconds") from None
    if not 0 <= value <= 3600:
        raise InputError("KERNEL_LEDGER_BUSY_TIMEOUT must be between 0 and 3600 seconds")
    return value
