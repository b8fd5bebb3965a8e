"""How messages show a path, a count and a fraction. A leaf: it imports nothing of the
ledger, so every layer (the store, the inputs, the verifier, the services, the reports, the
CLI) may use it."""

from __future__ import annotations


def plural(count: int, noun: str) -> str:
    """`1 round`, `2 rounds`: a count and a regular noun, for messages."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def display(path: object) -> str:
    """A path (or a text) as shown in messages: one line, whatever the name holds."""
    text = str(path)
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text


def pct(value: float | None) -> str:
    """A fraction as a signed percentage (`+8.30%`), `—` when there is none."""
    return "—" if value is None else f"{value * 100:+.2f}%"


def num(value: float | None) -> str:
    """A measured value to four significant digits, `—` when there is none."""
    return "—" if value is None else f"{value:.4g}"


def percent(value: float) -> str:
    """A fraction as a percentage (a limit or threshold: `1.00%`)."""
    return f"{value * 100:.2f}%"


def md_line(text: str) -> str:
    """A text as one line of Markdown: white space folded, `|` escaped (a table cell)."""
    return " ".join(text.replace("|", "\\|").split())
