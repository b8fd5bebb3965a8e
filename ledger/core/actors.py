"""Who appended an event: the actor its hashed envelope records.

An actor is a small JSON object of strings (`db_role` on PostgreSQL, `os_user` and `host`
on SQLite, `client` over MCP, `label` from KERNEL_LEDGER_ACTOR), stored as its RFC 8785
text beside the event and hashed first in its envelope (`hashing.envelope_bytes`); what
each field is and how far it can be trusted is docs/events.md, "Who appended an event".
Only the keys that have a value are written; an event from before actors were recorded has
none at all, and hashes as it always did.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from ledger.integrity.hashing import canonical

KEYS = ("client", "db_role", "host", "label", "os_user")
MAX_CHARS = 128


def problem(name: str, value: Any) -> str | None:
    """Why `value` cannot be the actor's `name` field, or None when it can."""
    if not isinstance(value, str):
        return f"{name} must be a string"
    if not 1 <= len(value) <= MAX_CHARS:
        return f"{name} must be 1 to {MAX_CHARS} characters, not {len(value)}"
    if not value.isprintable():
        return f"{name} must be printable characters only (no control characters)"
    return None


def printable(value: str) -> str:
    """A value the system or a client gave, made a valid field (the process's user or host
    name, an MCP client's declared name): control characters become "?", cut to the limit."""
    shown = "".join(ch if ch.isprintable() else "?" for ch in value)
    return shown[:MAX_CHARS]


def actor_text(fields: Mapping[str, str | None]) -> str:
    """The stored (RFC 8785) text of the actor with the fields that have a value."""
    value = {k: v for k, v in fields.items() if v}
    for key, item in value.items():
        if key not in KEYS:
            raise ValueError(f"an actor has no field {key!r}")
        why = problem(key, item)
        if why is not None:
            raise ValueError(why)
    return canonical(value, string_keys=True).decode()


def parsed(text: str | None) -> dict[str, str] | None:
    """The actor object of a stored text (None for an event that records none)."""
    return None if text is None else json.loads(text)


@functools.lru_cache(maxsize=256)  # pure; a ledger has few actors and verify asks per event
def stored_problem(text: str) -> str | None:
    """Why a stored actor text is not one this ledger writes, or None: canonical JSON of an
    object of the known fields, each a valid string."""
    try:
        value = json.loads(text)
    except ValueError:
        return "actor is not JSON"
    if not isinstance(value, dict) or not value:
        return "actor must be a non-empty JSON object"
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        return f"actor has unknown fields {unknown}"
    for key, item in value.items():
        why = problem(key, item)
        if why is not None:
            return f"actor {why}"
    if canonical(value, string_keys=True).decode() != text:
        return "actor text is not RFC 8785 canonical"
    return None


def describe(value: Mapping[str, str] | None) -> str:
    """One phrase naming who appended an event: the label first, then the principal (the
    database role, else user@host) and the MCP client.

    >>> describe({"label": "agent-7", "db_role": "app", "client": "claude-code"})
    'agent-7 (role app, via claude-code)'
    >>> describe({"os_user": "ana", "host": "box"})
    'ana@box'
    >>> describe(None)
    'not recorded'
    """
    if not value:
        return "not recorded"
    parts = []
    if value.get("db_role"):
        parts.append(f"role {value['db_role']}")
    elif value.get("os_user") or value.get("host"):
        parts.append(f"{value.get('os_user', '?')}@{value.get('host', '?')}")
    if value.get("client"):
        parts.append(f"via {value['client']}")
    label = value.get("label")
    if label is None:
        return ", ".join(parts)
    return f"{label} ({', '.join(parts)})" if parts else label
