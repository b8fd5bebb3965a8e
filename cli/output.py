"""Rendering: one JSON object on stdout with --json, readable text otherwise.
Errors are one line on stderr (`Error: …`), or, with --json, an error object on stdout only."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ledger.inputs.jsonio import plural  # noqa: F401  (the commands take it from here)
from ledger.text import pct  # noqa: F401  (the commands take it from here)

EXIT_INTERNAL = 70


def emit_json(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, ensure_ascii=False, allow_nan=False) + "\n")


_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
    "\u2066-\u2069\ud800-\udfff]"
)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """Text for a terminal: control characters (but line breaks and tabs), bidirectional
    overrides and isolates, line separators and lone surrogates are shown as escapes
    (`\\x1b`, `\\u202e`), so no text from a ledger or an input can move the cursor,
    retitle the terminal or reorder what is shown."""
    return _UNSAFE.sub(_escaped, text)


def say(text: str = "") -> None:
    sys.stdout.write(terminal_safe(text) + "\n")


def progress(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def progress_line(as_json: bool, line: Callable[[int, int], str | None]):
    """`on_progress(done, total)` drawing `line(done, total)` over itself on stderr (never
    with --json, never when stderr is not a terminal; nothing while `line` gives None), and
    a function that ends the line where one was drawn."""
    if as_json or not sys.stderr.isatty():
        return None, lambda: None
    drawn = [False]

    def on_progress(done: int, total: int) -> None:
        text = line(done, total)
        if text is not None:
            drawn[0] = True
            progress(text)

    def finish() -> None:
        if drawn[0]:
            progress("\n")

    return on_progress, finish


def error(
    message: str,
    exit_code: int,
    *,
    as_json: bool,
    details: dict | None = None,
    summary: str | None = None,
) -> None:
    """`Error: message` on stderr; with several `details["problems"]`, the `summary` line,
    one line per problem and the `details["hint"]`, if any, instead. With `as_json`, the
    error object on stdout only: one channel, as every `--json` answer."""
    line = " ".join(str(message).split())
    if as_json:
        emit_json({"status": "error", "error": line, "exit_code": exit_code, **(details or {})})
        return
    listed = (details or {}).get("problems") or []
    if summary is not None and len(listed) > 1:
        text = "".join(f"  {terminal_safe(p)}\n" for p in listed)
        hint = (details or {}).get("hint")
        if hint:
            text += f"{terminal_safe(hint)}\n"
        sys.stderr.write(f"Error: {terminal_safe(summary)}\n{text}")
    else:
        sys.stderr.write(f"Error: {terminal_safe(line)}\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain aligned text table."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line.rstrip(), "  ".join("-" * w for w in widths)]
    out += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(out)


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.6g}"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def failures(count: int, limit: int) -> str:
    """Consecutive failures against their limit: `2/5`, or `6 (limit 5)` past it."""
    return f"{count}/{limit}" if count <= limit else f"{count} (limit {limit})"


def diagnose_hint(run_id: str) -> str:
    return (
        f"NEEDS DIAGNOSIS: profile again, then record a new bottleneck model with "
        f"kernel-ledger diagnose --run {run_id} --bottleneck CLASS --evidence TEXT"
    )


def not_found_keys(result) -> dict[str, list[str]]:
    """The JSON keys naming the cases whose samples file was named but not found, and those
    whose `source` file holds no samples, when there are any."""
    keys = {}
    if result.samples_not_found:
        keys["samples_not_found"] = list(result.samples_not_found)
    if result.sources_not_samples:
        keys["sources_not_samples"] = list(result.sources_not_samples)
    return keys


def say_warnings(warnings) -> None:
    """Each warning on stderr (`--json` carries them in its object)."""
    for warning in warnings:
        sys.stderr.write(f"warning: {terminal_safe(warning)}\n")


def say_not_found(what: str, result) -> None:
    """The notes on the cases of `not_found_keys`."""
    if result.samples_not_found:
        say(
            f"  note: the {what} names samples files that do not exist (cases "
            f"{', '.join(result.samples_not_found)}); the decision uses the medians"
        )
    if result.sources_not_samples:
        say(
            f"  note: the {what} names source files that hold no samples (cases "
            f"{', '.join(result.sources_not_samples)}); their digests are recorded and the "
            "decision uses the medians"
        )


def say_profile_notes(attribution: dict, indent: str) -> None:
    """The reader's notes and each shape's own attribution, as stored in the event."""
    for shape in attribution.get("shapes", []):
        say(
            f"{indent}shape {shape['shape'] or '(none)'}: {shape['bottleneck']} "
            f"({shape['launches']} launch(es), {shape['total_us']:.1f} us) — {shape['evidence']}"
        )
    for note in attribution.get("notes", []):
        say(f"{indent}note: {note}")
