"""How messages show a path and a count. A leaf: it imports nothing of the ledger, so every
layer (the store, the inputs, the verifier, the services, the reports, the CLI) may use it."""

from __future__ import annotations

from pathlib import Path


def plural(count: int, noun: str) -> str:
    """`1 round`, `2 rounds`: a count and a regular noun, for messages."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def display(path: Path | str) -> str:
    """A path as shown in messages: one line, whatever the name holds."""
    text = str(path)
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
